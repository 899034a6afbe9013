/* test_tables_current.c - the published table sets (results/CHIP/table.csv
 * and model.csv, what tune writes and a runtime loads) describe today's
 * kernels: each records the kernel build it was measured on, and that must
 * be this build's (mq_kernel_build(), a checksum of the kernel sources and
 * the backends' translations). A change to the kernels fails here until
 * the sets are tuned again (h100 and h200 on the GPU machine) and
 * committed. A set that cannot be tuned again here is listed in
 * results/stale-tables.csv with the build it says and why; the test fails
 * when a listed set has been tuned again (the line must go) or says another
 * build than its line. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "csvfile.h"
#include "model_store.h"
#include "mq.h"

#ifndef MQ_SOURCE_DIR
#define MQ_SOURCE_DIR "."
#endif

typedef struct {
    char chip[32], build[32];
    int used;
} stale_line;

/* results/stale-tables.csv: chip,kernel_build,why. The count, or -1. */
static int read_stale(stale_line *s, int cap)
{
    mq_csv_table t;
    char err[512];
    if (mq_csv_read(MQ_SOURCE_DIR "/results/stale-tables.csv", &t, err, sizeof err)) {
        CHECK(0, "results/stale-tables.csv: %s", err);
        return -1;
    }
    int n = 0;
    for (int i = 1; i < t.nrows && n < cap; i++) {
        const mq_csv_row *r = &t.rows[i];
        CHECK(r->nfields == 3 && r->fields[2][0],
              "results/stale-tables.csv:%d: expected chip,kernel_build,why with a reason", r->line);
        if (r->nfields != 3)
            continue;
        snprintf(s[n].chip, sizeof s[n].chip, "%s", r->fields[0]);
        snprintf(s[n].build, sizeof s[n].build, "%s", r->fields[1]);
        s[n++].used = 0;
    }
    mq_csv_free(&t);
    return n;
}

/* One set: its table and model say which kernels; today's, or its line. */
static void check_set(const char *chip, stale_line *st, int nst)
{
    char tpath[512], mpath[512];
    snprintf(tpath, sizeof tpath, "%s/results/%s/table.csv", MQ_SOURCE_DIR, chip);
    snprintf(mpath, sizeof mpath, "%s/results/%s/model.csv", MQ_SOURCE_DIR, chip);
    mq_table *t = NULL;
    mq_error e;
    if (mq_table_load(tpath, NULL, &t, &e) != MQ_OK) {
        CHECK(0, "results/%s/table.csv loads: %s", chip, e.msg);
        return;
    }
    static mq_model m;
    char err[4400];
    int model_ok = mq_model_read(mpath, &m, err, sizeof err) == 0;
    CHECK(model_ok, "results/%s/model.csv loads: %s", chip, err);
    const char *tb = mq_table_kernel_build(t), *mb = model_ok ? m.kernel_build : "";
    stale_line *line = NULL;
    for (int i = 0; i < nst && !line; i++)
        if (!strcmp(st[i].chip, chip))
            line = &st[i];
    if (line) {
        line->used = 1;
        CHECK(strcmp(tb, mq_kernel_build()) != 0,
              "results/%s was tuned again on today's kernels (%s): remove its line from "
              "results/stale-tables.csv",
              chip, tb);
        CHECK(!strcmp(tb, line->build) && !strcmp(mb, line->build),
              "results/%s: its table says kernel build '%s' and its model '%s', its line in "
              "results/stale-tables.csv '%s'",
              chip, tb, mb, line->build);
    } else {
        CHECK(!strcmp(tb, mq_kernel_build()) && !strcmp(mb, mq_kernel_build()),
              "results/%s: expected today's kernel build %s, its table says '%s' and its model "
              "'%s': tune it again (h100, h200: scripts/gpu-run.sh tune on the GPU machine) and "
              "commit the set",
              chip, mq_kernel_build(), tb, mb);
    }
    mq_table_free(t);
}

int main(void)
{
    stale_line st[32];
    int nst = read_stale(st, 32), sets = 0;
    DIR *d = opendir(MQ_SOURCE_DIR "/results");
    CHECK(d != NULL, "results/ opens");
    struct dirent *de;
    while (d && nst >= 0 && (de = readdir(d)) != NULL) {
        char p[512];
        struct stat sb;
        snprintf(p, sizeof p, "%s/results/%s/table.csv", MQ_SOURCE_DIR, de->d_name);
        if (de->d_name[0] == '.' || stat(p, &sb) != 0)
            continue;
        check_set(de->d_name, st, nst);
        sets++;
    }
    if (d)
        closedir(d);
    CHECK(sets >= 4, "expected the published sets (devcpu, h100, h200, host, m4max), found %d",
          sets);
    for (int i = 0; i < nst; i++)
        CHECK(st[i].used, "results/stale-tables.csv lists %s, which has no table set",
              st[i].chip);
    return check_done("tables_current");
}
