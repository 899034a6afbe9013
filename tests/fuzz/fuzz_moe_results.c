/* fuzz_moe_results.c - every reader of moe-bench's results: its own loader
 * (mq_moe_results_load, which moe-bench runs before appending), plot moe's
 * (mq_plot_moe_data) and tune --moe-results's (mq_moe_table_entries). Any
 * bytes give rows or one error naming the file, never a crash, a leak or
 * undefined behaviour; what loads holds finite numbers in range, and each
 * row written back through moe-bench's writer loads again with the same
 * text and integers (the writer never writes what its reader refuses); a
 * file moe-bench refuses to append to is left byte for byte as it was. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "moe_data.h"
#include "moe_results.h"
#include "moe_rows.h"

static int same_text(const mq_moe_result *a, const mq_moe_result *b)
{
    const char *const x[] = {a->tool_version, a->git_rev, a->host, a->date, a->model,
                             a->routing, a->candidate, a->status, a->error, a->backend,
                             a->device};
    const char *const y[] = {b->tool_version, b->git_rev, b->host, b->date, b->model,
                             b->routing, b->candidate, b->status, b->error, b->backend,
                             b->device};
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        if (strcmp(x[i], y[i]))
            return 0;
    return a->format == b->format && a->tokens == b->tokens && a->experts == b->experts &&
           a->top_k == b->top_k && a->hidden == b->hidden && a->inter == b->inter &&
           a->group == b->group && a->route_max_tokens == b->route_max_tokens &&
           a->route_touched == b->route_touched && a->threads == b->threads &&
           a->fused == b->fused && a->reps == b->reps;
}

/* The loaded rows' invariants, then each row through the writer and back. */
static void check_rows(const mq_moe_results *rs, const char *path)
{
    for (int i = 0; i < rs->n; i++) {
        const mq_moe_result *r = &rs->r[i];
        const double re[] = {r->route_mean_tokens, r->median_s, r->p10_s, r->p90_s,
                             r->touched_gbs, r->read_probe_gbs};
        for (size_t j = 0; j < sizeof re / sizeof re[0]; j++)
            if (!isfinite(re[j]) || re[j] < 0)
                abort();
        int passed = !strcmp(r->status, "ok") || !strcmp(r->status, "verified");
        if ((isnan(r->worst_of_bound) && passed) || r->worst_of_bound < 0 ||
            isinf(r->worst_of_bound) || r->tokens < 1 || r->top_k > r->experts ||
            r->schema != rs->schema || (i && r->line <= rs->r[i - 1].line) ||
            (!strcmp(r->status, "ok") && !(r->median_s > 0)))
            abort();
    }
    const char *back = fuzz_file("moe-back.csv", (const uint8_t *)"", 0);
    if (!back || unlink(back))
        return;
    char err[1024];
    int fd = mq_moe_results_open(back, err, sizeof err);
    if (fd < 0)
        abort();
    for (int i = 0; i < rs->n; i++) {
        mq_moe_result w = rs->r[i];
        w.schema = MQ_MOE_RESULTS_SCHEMA;
        if (mq_moe_results_append(fd, back, &w, err, sizeof err))
            abort(); /* a row that loaded could not be written */
    }
    close(fd);
    mq_moe_results again;
    if (mq_moe_results_load(back, &again, err, sizeof err) || again.n != rs->n)
        abort(); /* what the writer wrote does not load */
    for (int i = 0; i < rs->n; i++) {
        mq_moe_result a = rs->r[i];
        if (rs->schema == 1) { /* written as schema 2 */
            a.backend = "cpu";
            a.device = "";
        }
        if (!same_text(&a, &again.r[i]))
            abort();
    }
    mq_moe_results_free(&again);
    unlink(back);
    (void)path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("moe.csv", data, size);
    if (!path)
        return 0;
    char err[1024], host[256] = "vm", be[64] = "cpu", dev[128] = "";
    mq_moe_results rs;
    if (mq_moe_results_load(path, &rs, err, sizeof err) == 0) {
        if (rs.n) { /* the tuner looks for the first row's backend and host */
            snprintf(host, sizeof host, "%s", rs.r[0].host);
            snprintf(be, sizeof be, "%s", rs.r[0].backend);
            snprintf(dev, sizeof dev, "%s", rs.r[0].device);
        }
        check_rows(&rs, path);
        mq_moe_results_free(&rs);
    } else if (!strstr(err, path) || strchr(err, '\n')) {
        abort();
    }
    FILE *sink = fopen("/dev/null", "w");
    if (sink) {
        mq_plot_moe_info info;
        const char *paths[] = {path};
        if (mq_plot_moe_data(paths, 1, sink, &info, err, sizeof err) == 0 &&
            (info.nseries < 1 || info.rows < 2))
            abort();
        fclose(sink);
    }
    /* moe-bench's own open before it appends: refused, the file as it was */
    int fd = mq_moe_results_open(path, err, sizeof err);
    if (fd >= 0) {
        close(fd);
    } else {
        FILE *f = fopen(path, "rb");
        uint8_t *now = malloc(size + 1);
        size_t got = f && now ? fread(now, 1, size + 1, f) : 0;
        if (!f || !now || got != size || (size && memcmp(now, data, size)))
            abort();
        free(now);
        fclose(f);
    }
    mq_table_entry *e = NULL;
    char kb[MQ_MOE_KBUILD_LEN];
    int n = mq_moe_table_entries(path, be, dev, host, &e, kb, err, sizeof err);
    for (int i = 0; i < n; i++)
        if (e[i].row.m_lo < 1 || e[i].row.m_lo > e[i].row.m_hi || !(e[i].row.expected_s > 0))
            abort();
    free(e);
    return 0;
}
