/* bench_main.c - the bench command: measure a shape suite, a shape, or
 * single candidates on a chip's candidate space, verified before timed,
 * appending each result to the results store as it is measured. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chips.h"
#include "cli.h"
#include "measure.h"
#include "probes.h"
#include "results.h"
#include "space.h"
#include "suites.h"
#include "version.h"

#define MAX_CANDS 64
#define MAX_MS 64

typedef struct {
    const char *chip, *chips, *suite, *m, *out, *backend;
    mq_shape shapes[64];
    int nshapes;
    unsigned formats;
    int group;
    mq_space_kind space;
    mq_candidate cands[MAX_CANDS];
    int ncands;
    int explain, resume, warm, threads, quiet;
    mq_measure_opts mo;
} options;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: bench [options]\n"
        "Measures candidates of the kernel variants on a chip's candidate space, each\n"
        "verified against the float64 reference before it is timed, and appends every\n"
        "result to a results CSV as it is measured (a killed run can --resume).\n\n"
        "  --chip NAME        target chip (default host: this machine, measured)\n"
        "  --chips FILE       chip descriptions (default harness/chips.csv or $MQ_CHIPS)\n"
        "  --suite NAME|FILE  llama3-8b, llama3-70b, moe, default, all, smoke, or a CSV with\n"
        "                     model,layer,N,K[,M] (default smoke)\n"
        "  --m SPEC           token counts: decode, prefill, all or 1,16,512 (default decode)\n"
        "  --shape MxNxK      one shape instead of a suite (repeatable)\n"
        "  --formats LIST     fp4,u4,trellis2,trellis3,trellis4 (default fp4)\n"
        "  --group G          32, 64 or 128 (default 128)\n"
        "  --space seed|full  each variant's seed configuration (default) or the full grid\n"
        "  --candidate SPEC   only this candidate, 'variant tm tn tk tg sk' (repeatable)\n"
        "  --explain          list the candidate space with every rejection reason; no timing\n"
        "  --out FILE         results CSV (default results/CHIP/bench.csv)\n"
        "  --resume           skip what this build already measured on this host in FILE\n"
        "  --budget S         timed seconds per candidate at most (default 0.5)\n"
        "  --ci REL           stop once the 95%% CI of the median is within +-REL (0.02)\n"
        "  --max-reps N       repetitions per candidate at most (default 1000)\n"
        "  --warm             do not rotate weights past the caches\n"
        "  --backend NAME     auto (default: metal when available, else cpu), cpu, metal\n"
        "  --threads N        CPU-model workers (default: one per core)\n"
        "  --quiet            no per-candidate lines, only the summary\n"
        "  --help             this text\n\n"
        "Exit status: 0 done, 1 a candidate computed a wrong result, 2 bad input or an\n"
        "environment error (the results file keeps every row written before it).\n\n"
        "examples:\n"
        "  bench                                  # smoke suite, seed space, on this machine\n"
        "  bench --suite llama3-8b --m 1,16 --formats fp4,u4 --out /tmp/8b.csv\n"
        "  bench --shape 16x4096x4096 --space full --explain --chip m4max\n"
        "  bench --shape 1x4096x14336 --candidate 'marlin_gemm_fused_fp4 8 1024 128 0 1'\n"
        "  bench --suite all --m all --space full --resume   # long; resumable\n");
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->chip = "host";
    o->chips = mq_chips_default_path();
    o->suite = "smoke";
    o->m = "decode";
    o->backend = "auto";
    o->group = 128;
    o->mo = mq_measure_defaults();
    static const char *const flags[] = {"--explain", "--resume", "--warm", "--quiet"};
    static const char *const valued[] = {
        "--chip", "--chips", "--suite", "--m", "--shape", "--formats", "--group", "--space",
        "--candidate", "--out", "--budget", "--ci", "--max-reps", "--backend", "--threads"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        int flag = -1, known = 0;
        for (int k = 0; k < 4; k++)
            if (!strcmp(a, flags[k]))
                flag = k;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
            known |= !strcmp(a, valued[k]);
        if (flag == 0)
            o->explain = 1;
        else if (flag == 1)
            o->resume = 1;
        else if (flag == 2)
            o->warm = 1;
        else if (flag == 3)
            o->quiet = 1;
        if (flag >= 0)
            continue;
        if (!known)
            return mq_cli_fail("bench", "unknown option", a);
        if (i + 1 >= argc)
            return mq_cli_fail("bench", "missing value for", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--chip")) {
            o->chip = v;
        } else if (!strcmp(a, "--chips")) {
            o->chips = v;
        } else if (!strcmp(a, "--suite")) {
            o->suite = v;
        } else if (!strcmp(a, "--m")) {
            o->m = v;
        } else if (!strcmp(a, "--out")) {
            o->out = v;
        } else if (!strcmp(a, "--backend")) {
            o->backend = v;
        } else if (!strcmp(a, "--shape")) {
            mq_shape s = {"shape", "", 0, 0, 0};
            if (o->nshapes >= 64)
                return mq_cli_fail("bench", "too many shapes at", v);
            if (mq_cli_shape(v, &s.M, &s.N, &s.K))
                return mq_cli_fail("bench", "bad shape (expected MxNxK, positive)", v);
            snprintf(s.layer, sizeof s.layer, "%s", v);
            o->shapes[o->nshapes++] = s;
        } else if (!strcmp(a, "--formats")) {
            char why[256];
            if (mq_cli_formats(v, &o->formats, why, sizeof why)) {
                fprintf(stderr, "bench: %s\n", why);
                return 2;
            }
        } else if (!strcmp(a, "--group")) {
            if (mq_cli_int(v, 1, 1 << 20, &o->group))
                return mq_cli_fail("bench", "bad group size", v);
        } else if (!strcmp(a, "--space")) {
            if (mq_space_kind_parse(v, &o->space))
                return mq_cli_fail("bench", "bad --space (expected seed or full)", v);
        } else if (!strcmp(a, "--candidate")) {
            mq_candidate c;
            char why[512];
            if (o->ncands >= MAX_CANDS)
                return mq_cli_fail("bench", "too many candidates at", v);
            if (mq_cli_candidate(v, &c, why, sizeof why)) {
                fprintf(stderr, "bench: %s\n", why);
                return 2;
            }
            o->cands[o->ncands++] = c;
        } else if (!strcmp(a, "--budget")) {
            if (mq_cli_double(v, 1e-6, 3600, &o->mo.budget_s))
                return mq_cli_fail("bench", "bad --budget", v);
        } else if (!strcmp(a, "--ci")) {
            if (mq_cli_double(v, 0, 1, &o->mo.ci_rel))
                return mq_cli_fail("bench", "bad --ci", v);
        } else if (!strcmp(a, "--max-reps")) {
            if (mq_cli_int(v, 1, MQ_MAX_SAMPLES, &o->mo.max_reps))
                return mq_cli_fail("bench", "bad --max-reps", v);
        } else if (!strcmp(a, "--threads")) {
            if (mq_cli_int(v, 1, 1024, &o->threads))
                return mq_cli_fail("bench", "bad thread count", v);
        }
    }
    if (!o->formats)
        o->formats = 1u << MQ_FMT_FP4;
    if (o->mo.min_reps > o->mo.max_reps)
        o->mo.min_reps = o->mo.max_reps;
    return 0;
}

/* The progress bar on a terminal, plain lines otherwise (see report). */
static void progress(int done, int total, double elapsed, int tty)
{
    if (!tty || total <= 0)
        return;
    int width = 30, filled = (int)((double)width * done / total);
    double eta = done ? elapsed / done * (total - done) : 0;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < filled ? '#' : '-';
    bar[width] = '\0';
    fprintf(stderr, "\r[%s] %d/%d  ETA %d:%02d ", bar, done, total, (int)eta / 60,
            (int)eta % 60);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

static void print_result(const mq_result *r, int tty)
{
    char name[128];
    mq_candidate_str(&r->c, name, sizeof name);
    if (tty)
        fputs("\r\033[K", stderr);
    if (!strcmp(r->status, "ok"))
        printf("%-8s M=%-4d N=%-6d K=%-6d %-52s %9.4f ms +-%4.1f%% %4d reps %7.1f GFLOP/s\n",
               mq_format_name(r->p.format), r->p.M, r->p.N, r->p.K, name, r->st.median * 1e3,
               100 * mq_stats_ci_rel(&r->st), r->st.n, r->gflops);
    else
        printf("%-8s M=%-4d N=%-6d K=%-6d %-52s %s: %s\n", mq_format_name(r->p.format), r->p.M,
               r->p.N, r->p.K, name, r->status, r->error);
    fflush(stdout);
}

static void explain(const mq_problem *p, const mq_space *sp)
{
    printf("%s M=%d N=%d K=%d group %d: %d candidates, %d legal\n", mq_format_name(p->format),
           p->M, p->N, p->K, p->group, sp->n, sp->legal);
    for (int i = 0; i < sp->n; i++) {
        char name[128];
        mq_candidate_str(&sp->e[i].c, name, sizeof name);
        if (sp->e[i].legal)
            printf("  legal    %-52s %2d TGs x %4d threads, %5d B TG memory, %d dispatch%s\n",
                   name, sp->e[i].plan.threadgroups, sp->e[i].plan.threads_per_tg,
                   sp->e[i].plan.tg_mem_bytes, sp->e[i].plan.dispatches,
                   sp->e[i].plan.dispatches > 1 ? "es" : "");
        else
            printf("  rejected %-52s %s\n", name, sp->e[i].reason);
    }
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc;
    char err[1024];
    mq_chip chip; /* host is measured below; others come from the chips file */
    if (strcmp(o.chip, "host") && mq_chip_load_named(o.chips, o.chip, &chip, err, sizeof err)) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    /* problems: shapes or a suite, crossed with formats */
    mq_suite suite = {0};
    if (!o.nshapes) {
        int ms[MAX_MS];
        int nms = mq_suite_parse_ms(o.m, ms, MAX_MS, err, sizeof err);
        if (nms < 0 || mq_suite_load(o.suite, ms, nms, &suite, err, sizeof err)) {
            fprintf(stderr, "bench: %s\n", err);
            return 2;
        }
    }
    const mq_shape *shapes = o.nshapes ? o.shapes : suite.s;
    int nshapes = o.nshapes ? o.nshapes : suite.n;
    for (int f = 0; f < MQ_FMT_COUNT; f++)
        for (int s = 0; (o.formats & (1u << f)) && s < nshapes; s++) {
            mq_problem p = {(mq_format)f, shapes[s].M, shapes[s].N, shapes[s].K, o.group};
            mq_error e;
            if (mq_problem_check(&p, &e)) {
                fprintf(stderr, "bench: %s %s: %s\n", shapes[s].model, shapes[s].layer, e.msg);
                mq_suite_free(&suite);
                return 2;
            }
        }
    char why[512], note[512];
    mq_backend *be = NULL;
    /* notes wait until the output is open: a run refused for bad input says
     * one line */
    char notes[2048] = "";
    size_t nl = 0;
    if (!o.explain) {
        be = mq_backend_open(o.backend, o.threads, why, sizeof why, note, sizeof note);
        if (!be) {
            fprintf(stderr, "bench: backend %s\n", why);
            mq_suite_free(&suite);
            return 2;
        }
        if (note[0])
            nl += (size_t)snprintf(notes + nl, sizeof notes - nl, "bench: %s\n", note);
    }
    /* on Metal, the chip is the device's (read from its name and architecture) */
    if (be && strcmp(be->name, "cpu") && !strcmp(o.chip, "host")) {
        if (!be->chip[0] || mq_chip_load_named(o.chips, be->chip, &chip, err, sizeof err)) {
            fprintf(stderr, "bench: %s device %s is not a chip of %s: name one with --chip\n",
                    be->name, be->device, o.chips);
            mq_backend_destroy(be);
            mq_suite_free(&suite);
            return 2;
        }
        o.chip = be->chip;
        if (nl < sizeof notes)
            nl += (size_t)snprintf(notes + nl, sizeof notes - nl, "bench: %s on %s: chip %s\n",
                                   be->name, be->device, chip.name);
    }
    int threads = be && !strcmp(be->name, "cpu") ? mq_backend_cpu_threads(be) : o.threads;
    if (!strcmp(o.chip, "host") && mq_chip_find(NULL, "host", threads ? threads : 1, &chip, err,
                                                sizeof err)) {
        fprintf(stderr, "bench: %s\n", err);
        mq_backend_destroy(be);
        mq_suite_free(&suite);
        return 2;
    }
    if (!chip.is_host && be && !strcmp(be->name, "cpu") && nl < sizeof notes)
        nl += (size_t)snprintf(notes + nl, sizeof notes - nl,
                               "bench: %s's candidate space timed on the CPU model: the times "
                               "are the CPU's, not %s's\n",
                               chip.name, chip.name);
    char out_path[4096];
    if (o.out)
        snprintf(out_path, sizeof out_path, "%s", o.out);
    else
        snprintf(out_path, sizeof out_path, "results/%s/bench.csv", chip.name);
    mq_results old = {0};
    mq_results_writer w = {.fd = -1};
    if (!o.explain) {
        struct stat sb;
        char note[4400];
        err[0] = '\0';
        if ((o.resume && stat(out_path, &sb) == 0 &&
             mq_results_load(out_path, &old, err, sizeof err)) ||
            mq_make_parent_dirs(out_path, err, sizeof err) ||
            mq_results_open(out_path, &w, err, sizeof err)) {
            fprintf(stderr, "bench: %s\n", err);
            mq_results_free(&old);
            mq_backend_destroy(be);
            mq_suite_free(&suite);
            return 2;
        }
        fputs(notes, stderr);
        /* what a torn last line cost: said once, never a hand edit */
        if (mq_results_writer_note(&w, note, sizeof note))
            fprintf(stderr, "bench: %s\n", note);
        else if (mq_results_torn_note(&old, out_path, note, sizeof note))
            fprintf(stderr, "bench: %s\n", note);
        if (o.resume)
            fprintf(stderr, "bench: resuming: %d rows in %s\n", old.n, out_path);
    }
    int tty = isatty(fileno(stderr)) && !o.quiet;
    double t_start = mq_now(), kernel_s = 0;
    int counts[5] = {0}; /* ok, wrong, error, illegal, skipped */
    static mq_measurement m;
    static mq_bench_problem bp; /* zeroed: kept across problems that share weights */
    mq_limits lim = mq_chip_limits(&chip);
    /* total work for the progress bar */
    int total = 0, done = 0;
    for (int f = 0; f < MQ_FMT_COUNT && !o.explain; f++)
        for (int s = 0; (o.formats & (1u << f)) && s < nshapes; s++) {
            mq_problem p = {(mq_format)f, shapes[s].M, shapes[s].N, shapes[s].K, o.group};
            mq_space sp;
            if (o.ncands) {
                for (int c = 0; c < o.ncands; c++)
                    total += mq_variant_serves(o.cands[c].variant, p.format);
            } else if (mq_space_enumerate(&p, &chip, o.space, &sp) == 0) {
                total += sp.legal;
                mq_space_free(&sp);
            }
        }
    for (int f = 0; f < MQ_FMT_COUNT && rc == 0; f++)
        for (int s = 0; (o.formats & (1u << f)) && s < nshapes && rc == 0; s++) {
            mq_problem p = {(mq_format)f, shapes[s].M, shapes[s].N, shapes[s].K, o.group};
            mq_space sp = {0};
            if (o.ncands) {
                sp.e = calloc((size_t)o.ncands, sizeof *sp.e);
                for (int c = 0; sp.e && c < o.ncands; c++) {
                    if (!mq_variant_serves(o.cands[c].variant, p.format))
                        continue;
                    mq_space_entry *e = &sp.e[sp.n++];
                    e->c = o.cands[c];
                    e->legal = 1; /* measured anyway: mq_measure records a refusal */
                    sp.legal++;
                }
            } else if (mq_space_enumerate(&p, &chip, o.space, &sp)) {
                fprintf(stderr, "bench: out of memory enumerating candidates\n");
                rc = 2;
                break;
            }
            if (o.explain) {
                explain(&p, &sp);
                mq_space_free(&sp);
                continue;
            }
            mq_error e;
            int set_up = 0;
            for (int i = 0; i < sp.n && rc == 0; i++) {
                if (!sp.e[i].legal)
                    continue;
                mq_result r;
                memset(&r, 0, sizeof r);
                snprintf(r.chip, sizeof r.chip, "%s", chip.name);
                snprintf(r.backend, sizeof r.backend, "%s", be->name);
                r.p = p;
                r.c = sp.e[i].c;
                if (o.resume && mq_results_find_own(&old, &r)) {
                    counts[4]++;
                    progress(++done, total, mq_now() - t_start, tty);
                    continue;
                }
                if (!set_up) { /* weights and reference only when something runs */
                    int ms[64]; /* later Ms on the same weights share the pass */
                    int nms = mq_shapes_ms_sharing(shapes, nshapes, s, p.N, p.K, ms, 64);
                    if (mq_bench_problem_setup(&bp, &p, o.warm, ms, nms, &e)) {
                        fprintf(stderr, "bench: %s\n", e.msg);
                        rc = 2;
                        break;
                    }
                    set_up = 1;
                }
                mq_measure(be, &bp, &r.c, &lim, &o.mo, &m);
                kernel_s += m.kernel_s;
                mq_result_stamp(&r);
                snprintf(r.status, sizeof r.status, "%s", m.status);
                snprintf(r.error, sizeof r.error, "%s", m.error);
                r.st = m.st;
                r.gflops = m.gflops;
                r.weight_gbs = m.weight_gbs;
                r.samples = m.samples;
                r.nsamples = m.nsamples;
                if (mq_results_append(&w, &r, err, sizeof err)) {
                    /* the file keeps every row before this one, whole */
                    fprintf(stderr, "%sbench: %s\n", tty ? "\r\033[K" : "", err);
                    rc = 2;
                    break;
                }
                counts[!strcmp(m.status, "ok") ? 0 : !strcmp(m.status, "wrong") ? 1
                       : !strcmp(m.status, "error")                              ? 2
                                                                                 : 3]++;
                if (!o.quiet)
                    print_result(&r, tty);
                progress(++done, total, mq_now() - t_start, tty);
            }
            mq_space_free(&sp);
        }
    mq_bench_problem_free(&bp);
    double wall = mq_now() - t_start;
    if (!o.explain) {
        mq_results_close(&w);
        printf("\n%s on %s (%s backend): %d ok, %d wrong, %d error, %d illegal, %d skipped "
               "(--resume); results in %s\n",
               o.nshapes ? "shapes" : o.suite, chip.name, be->name, counts[0], counts[1],
               counts[2], counts[3], counts[4], out_path);
        if (wall > 0 && counts[0] + counts[1] + counts[2])
            printf("measurement overhead: %.1f%% of %.1f s (setup, references, checks, "
                   "bookkeeping; the rest ran kernels)\n",
                   100 * (1 - kernel_s / wall), wall);
        mq_results now;
        if (rc == 0 && mq_results_load(out_path, &now, err, sizeof err) == 0) {
            for (int f = 0; f < MQ_FMT_COUNT; f++)
                for (int s = 0; (o.formats & (1u << f)) && s < nshapes; s++) {
                    mq_problem p = {(mq_format)f, shapes[s].M, shapes[s].N, shapes[s].K,
                                    o.group};
                    const mq_result *b = mq_results_best(&now, chip.name, be->name, &p);
                    char name[128] = "none verified";
                    if (b)
                        mq_candidate_str(&b->c, name, sizeof name);
                    printf("best %-8s M=%-4d N=%-6d K=%-6d %-52s %s\n",
                           mq_format_name(p.format), p.M, p.N, p.K, name,
                           b ? "" : "(no ok row)");
                }
            mq_results_free(&now);
        }
    }
    mq_results_free(&old);
    mq_backend_destroy(be);
    mq_suite_free(&suite);
    /* a kernel that computed a wrong answer is a finding */
    if (rc == 0 && counts[1]) {
        fprintf(stderr, "bench: %d candidate%s computed wrong results (status wrong in %s)\n",
                counts[1], counts[1] == 1 ? "" : "s", out_path);
        rc = 1;
    }
    return rc;
}
