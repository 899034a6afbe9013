/* moe_bench_main.c - the moe-bench command: its options, the suites and
 * token counts; the measuring is harness/moe_bench.c. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "chips.h"
#include "cli.h"
#include "moe_bench.h"

#define MAX_TOKENS 32
#define MAX_NAMED 64 /* --candidate */

/* The candidates named with --candidate, in order. */
typedef struct {
    mq_moe_candidate items[MAX_NAMED];
    int n;
} named_candidates;

static int add_candidate(const char *v, void *dst, char *err, size_t errlen)
{
    named_candidates *l = dst;
    mq_error e;
    if (l->n == MAX_NAMED) {
        snprintf(err, errlen, "too many --candidate at '%s' (at most %d)", v, MAX_NAMED);
        return -1;
    }
    if (mq_moe_candidate_parse(v, &l->items[l->n], &e)) {
        snprintf(err, errlen, "--candidate: %s", e.msg);
        return -1;
    }
    l->n++;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: moe-bench [options]\n"
        "Measures the MoE block (gemm_trellis_moe: routing, fused SwiGLU over gate, up and\n"
        "down, probability-weighted outputs) of real models' MoE layers on a backend (the\n"
        "CPU model, or the Metal kernels on an NVIDIA GPU): the fused kernel over its\n"
        "candidate space against the unfused baseline (per expert: gather, dense\n"
        "gate/up/down, SwiGLU and the weighted sum as passes; on a device each dense\n"
        "kernel the fastest of its shape, tuned in the same run). Each\n"
        "candidate is verified against the float64 reference of sampled tokens (first,\n"
        "middle, last) before it is timed, and so is every timed run's output (each\n"
        "routing against its own reference); weights are synthetic trellis codes, seeded.\n\n"
        "  --suite NAME       %s (default qwen3-30b-a3b)\n"
        "  --tokens LIST      token counts, e.g. 1,4,16 (default 1,4,16); decode is up to 16\n"
        "  --routing KIND     uniform, zipf, one (every token on experts 0..top_k-1), or a CSV\n"
        "                     of token,slot,expert,prob rows (its tokens replace --tokens)\n"
        "  --zipf S           the Zipf exponent of --routing zipf (default 1.2)\n"
        "  --format F         trellis2, trellis3, trellis4 (default trellis3)\n"
        "  --group G          32, 64 or 128 (default 128)\n"
        "  --backend B        cpu (the CPU model, default), cuda (the Metal kernels on an\n"
        "                     NVIDIA GPU), msl-cpu (the Metal kernels on the CPU executor:\n"
        "                     verified, not timed), auto\n"
        "  --threads N        CPU-model workers (default: one per core)\n"
        "  --chip NAME        plan the Metal kernels under this chip's limits (harness/chips.csv;\n"
        "                     h100: its asynchronous copies stage the lane block's weights;\n"
        "                     default: Apple's)\n"
        "  --budget S         timed seconds per fused candidate (default 0.2; the baseline 4x)\n"
        "  --max-candidates N the first N of the fused space only (default: all)\n"
        "  --candidate C      time this fused candidate instead of the space, as a results\n"
        "                     file's candidate column writes it (repeatable, at most 64;\n"
        "                     e.g. 'gemm_trellis_moe[lane_trellis tm=8 tn=64 tk=256 tg=0\n"
        "                     sk=4] i_split=1 fuse_gate_up=0'; one a case cannot run gets\n"
        "                     a row saying why)\n"
        "  --rotations N      routings (seeds) cycled through while timing, so that the\n"
        "                     touched experts change and are not all cache-hot (default 8)\n"
        "  --seed N           weights, activations and routings (default 1)\n"
        "  --out FILE         results CSV, each row appended as it is measured (default\n"
        "                     results/host/moe.csv)\n"
        "  --help             this text\n\n"
        "Exit status: 0 done, 1 a candidate computed a wrong result, 2 bad input or an\n"
        "environment error.\n\n"
        "examples:\n"
        "  moe-bench --suite qwen3-30b-a3b --tokens 1,4,16\n"
        "  moe-bench --suite all --tokens 1,16,128 --routing zipf --out /tmp/moe.csv\n"
        "  moe-bench --suite mixtral-8x7b --routing recorded.csv\n"
        "  moe-bench --backend cuda --chip h100 --tokens 1 --candidate \\\n"
        "    'gemm_trellis_moe[lane_trellis tm=8 tn=64 tk=256 tg=0 sk=4] i_split=1 fuse_gate_up=0'\n",
        mq_moe_suite_names());
}

static int parse_format(const char *v, void *dst, char *err, size_t errlen)
{
    mq_error e;
    mq_format f;
    if (mq_format_from_name(v, &f, &e) || !mq_format_is_trellis(f)) {
        snprintf(err, errlen, "bad --format '%s' (the MoE block takes trellis2, trellis3 or "
                              "trellis4)", v);
        return -1;
    }
    *(mq_format *)dst = f;
    return 0;
}

int main(int argc, char **argv)
{
    const char *suite = "qwen3-30b-a3b", *tokens_s = "1,4,16", *out = "results/host/moe.csv";
    int group = 128, seed = 1;
    const char *chip = NULL;
    static named_candidates named;
    mq_moe_bench_opts o = {"cpu", "uniform", 1.2, MQ_FMT_TRELLIS3, 128, 0, 0.2, 0, 8, 1, 0, NULL,
                           NULL, 0};
    const mq_arg args[] = {
        MQ_OPT_STR("--suite", &suite),
        MQ_OPT_STR("--tokens", &tokens_s),
        MQ_OPT_STR("--routing", &o.routing),
        MQ_OPT_STR("--backend", &o.backend),
        MQ_OPT_DOUBLE("--zipf", &o.zipf_s, 0, 10, "bad --zipf (0..10)"),
        MQ_OPT_CUSTOM("--format", &o.format, parse_format, NULL),
        MQ_OPT_INT("--group", &group, 1, 1 << 20, "bad group size"),
        MQ_OPT_INT("--threads", &o.threads, 1, 1024, "bad thread count"),
        MQ_OPT_DOUBLE("--budget", &o.budget_s, 1e-4, 3600, "bad --budget"),
        MQ_OPT_INT("--max-candidates", &o.max_candidates, 1, 100000, "bad --max-candidates"),
        MQ_OPT_INT("--rotations", &o.rotations, 1, 64, "bad --rotations (1..64)"),
        MQ_OPT_INT("--seed", &seed, 0, 1 << 30, "bad --seed"),
        MQ_OPT_STR("--out", &out),
        MQ_OPT_STR("--chip", &chip),
        MQ_OPT_CUSTOM("--candidate", &named, add_candidate, NULL),
    };
    int rc = mq_args_parse("moe-bench", argc, argv, 1, args, sizeof args / sizeof args[0], NULL,
                           0, NULL);
    if (rc == 1) {
        usage(stdout);
        return 0;
    }
    if (rc)
        return rc;
    if (group != 32 && group != 64 && group != 128)
        return mq_cli_fail("moe-bench", "bad --group (32, 64 or 128)", "");
    o.group = group;
    o.seed = (uint64_t)seed;
    o.candidates = named.items;
    o.ncandidates = named.n;
    mq_chip target;
    if (chip) {
        char cerr[512];
        if (mq_chip_load_named(mq_chips_default_path(), chip, &target, cerr, sizeof cerr)) {
            fprintf(stderr, "moe-bench: %s\n", cerr);
            return 2;
        }
        o.lim = &target.lim;
    }
    const mq_moe_model *models[8];
    char err[512];
    int nm = mq_moe_suite(suite, models, 8, err, sizeof err);
    if (nm < 0) {
        fprintf(stderr, "moe-bench: %s\n", err);
        return 2;
    }
    int tokens[MAX_TOKENS], nt = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", tokens_s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (nt == MAX_TOKENS || mq_cli_int(t, 1, 1 << 16, &tokens[nt]))
            return mq_cli_fail("moe-bench", "bad --tokens (1..65536, at most 32 values)",
                               tokens_s);
        nt++;
    }
    if (!nt)
        return mq_cli_fail("moe-bench", "bad --tokens (1..65536, at most 32 values)", tokens_s);
    mq_moe_model list[8];
    for (int i = 0; i < nm; i++)
        list[i] = *models[i];
    return mq_moe_bench(list, nm, tokens, nt, &o, out);
}
