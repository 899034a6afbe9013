/* merge_main.c - the merge command: results files of many machines (the
 * shards of a sweep, or any runs) into one, with the report of
 * harness/merge.c. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "merge.h"

#define MAX_INPUTS 65536

static void usage(FILE *f)
{
    fprintf(f,
        "usage: merge --out FILE [options] RESULTS...\n"
        "Combines results files (the shards of a sweep from many machines, or any runs) into\n"
        "one. Every row keeps its host, chip, backend, build and date. Rows of different\n"
        "builds or schemas are refused unless allowed. A key (chip, backend, problem,\n"
        "candidate) found more than once is reported, and its newest row kept. A shard's\n"
        "manifest beside its results file (bench/tune --shard) lets merge name the shards of\n"
        "each sweep that are missing or incomplete. FILE is written to a temporary name and\n"
        "renamed: a kill leaves the old file or the new one.\n\n"
        "  --out FILE              the merged results file (required; may be one of the inputs)\n"
        "  --keep newest|first|all of a key's duplicate rows: the newest (default; equal dates:\n"
        "                          the later input), the first in input order, or all of them\n"
        "  --allow-mixed-builds    merge rows of different builds (tool version, git revision)\n"
        "  --allow-mixed-schemas   merge rows of different results schemas (1, 2 and 3\n"
        "                          merge without it: 2 is 1 plus idle_s, 3 is 2 plus\n"
        "                          kernel_build)\n"
        "  --allow-gaps            exit 0 even when shards are missing or incomplete\n"
        "  --help                  this text\n\n"
        "Exit status: 0 merged, every sweep complete; 1 merged, but shards are missing or\n"
        "incomplete (listed); 2 bad input or an environment error (nothing written).\n\n"
        "examples:\n"
        "  merge --out results/host/bench.csv sweep/shard-*.csv\n"
        "  merge --out all.csv --keep all mac1/bench.csv mac2/bench.csv\n");
}

static int parse_keep(const char *v, void *dst, char *err, size_t errlen)
{
    static const char *const names[] = {"newest", "first", "all"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(v, names[i])) {
            *(mq_merge_keep *)dst = (mq_merge_keep)i;
            return 0;
        }
    snprintf(err, errlen, "bad --keep '%.40s' (expected newest, first or all)", v);
    return -1;
}

int main(int argc, char **argv)
{
    static const char *inputs[MAX_INPUTS];
    int ninputs = 0, allow_gaps = 0;
    const char *out = NULL;
    mq_merge_opts o = {MQ_KEEP_NEWEST, 0, 0};
    const mq_arg args[] = {
        MQ_OPT_STR("--out", &out),
        MQ_OPT_CUSTOM("--keep", &o.keep, parse_keep, NULL),
        MQ_OPT_FLAG("--allow-mixed-builds", &o.allow_mixed_builds),
        MQ_OPT_FLAG("--allow-mixed-schemas", &o.allow_mixed_schemas),
        MQ_OPT_FLAG("--allow-gaps", &allow_gaps),
    };
    int rc = mq_args_parse("merge", argc, argv, 1, args, sizeof args / sizeof args[0], inputs,
                           MAX_INPUTS, &ninputs);
    if (rc == 1)
        usage(stdout);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (!out || !ninputs) {
        fprintf(stderr, "merge: %s (see --help)\n",
                !out ? "--out FILE is required" : "no results files to merge");
        return 2;
    }
    char err[8400];
    mq_merge_summary sum;
    rc = mq_merge(inputs, ninputs, out, &o, stdout, &sum, err, sizeof err);
    if (rc == 2) {
        fprintf(stderr, "merge: %s; nothing written\n", err);
        return 2;
    }
    if (rc == 1)
        fprintf(stderr, "merge: %d shard%s missing, %d incomplete (%d units without their "
                        "rows): %s written with what there is%s\n",
                sum.shards_missing, sum.shards_missing == 1 ? "" : "s", sum.shards_incomplete,
                sum.units_missing, out, allow_gaps ? " (--allow-gaps)" : "");
    return rc == 1 && allow_gaps ? 0 : rc;
}
