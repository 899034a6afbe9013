/* bench_run.c - see bench_run.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_run.h"
#include "probes.h"

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
    else if (!strcmp(r->status, "verified"))
        printf("%-8s M=%-4d N=%-6d K=%-6d %-52s verified (not timed)\n",
               mq_format_name(r->p.format), r->p.M, r->p.N, r->p.K, name);
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

/* The problems of a job, every shape crossed with every format asked for:
 * the next one from *i on into p (s: its shape's index), 0 after the last.
 * for (int i = 0; next_problem(j, &i, &p, &s);) visits them all. */
static int next_problem(const mq_bench_job *j, int *i, mq_problem *p, int *s)
{
    for (; j->nshapes > 0 && *i < MQ_FMT_COUNT * j->nshapes; (*i)++) {
        int f = *i / j->nshapes;
        *s = *i % j->nshapes;
        if (!(j->formats & (1u << f)))
            continue;
        *p = (mq_problem){(mq_format)f, j->shapes[*s].M, j->shapes[*s].N, j->shapes[*s].K,
                          j->group};
        (*i)++;
        return 1;
    }
    return 0;
}

/* The candidates of a problem: the listed ones that serve its format
 * (measured anyway: mq_measure records a refusal), else the chip's space. */
static int candidates(const mq_bench_job *j, const mq_problem *p, const mq_chip *chip,
                      mq_space *sp)
{
    memset(sp, 0, sizeof *sp);
    if (!j->ncands)
        return mq_space_enumerate(p, chip, j->space, sp);
    sp->e = calloc((size_t)j->ncands, sizeof *sp->e);
    if (!sp->e)
        return -1;
    for (int c = 0; c < j->ncands; c++) {
        if (!mq_variant_serves(j->cands[c].variant, p->format))
            continue;
        mq_space_entry *e = &sp->e[sp->n++];
        e->c = j->cands[c];
        e->legal = 1;
        sp->legal++;
    }
    return 0;
}

int mq_bench_explain(const mq_bench_job *j, const mq_chip *chip)
{
    mq_problem p;
    int s;
    for (int i = 0; next_problem(j, &i, &p, &s);) {
        mq_space sp;
        if (candidates(j, &p, chip, &sp)) {
            fprintf(stderr, "bench: out of memory enumerating candidates\n");
            return 2;
        }
        explain(&p, &sp);
        mq_space_free(&sp);
    }
    return 0;
}

/* Whether problem p comes before index upto of the job's problems (a
 * shape listed twice, two layers of one shape, is one problem). */
static int seen_before(const mq_bench_job *j, int upto, const mq_problem *p)
{
    mq_problem q;
    int s;
    for (int i = 0; i < upto && next_problem(j, &i, &q, &s);) {
        if (i > upto)
            break;
        if (!memcmp(&q, p, sizeof q))
            return 1;
    }
    return 0;
}

int mq_bench_work(const mq_bench_job *j, const mq_chip *chip, mq_work_list *w)
{
    mq_problem p;
    int s;
    memset(w, 0, sizeof *w);
    for (int i = 0; next_problem(j, &i, &p, &s);) {
        mq_space sp;
        if (seen_before(j, i - 1, &p)) /* i - 1: p's own index */
            continue;
        if (candidates(j, &p, chip, &sp))
            return -1;
        int64_t setup = mq_work_setup_cost_us(&p), each = mq_work_candidate_cost_us(&p, &j->mo);
        for (int e = 0; e < sp.n; e++) {
            if (!sp.e[e].legal)
                continue;
            mq_work_unit u = {
                .p = p, .c = sp.e[e].c, .rows = 1, .cost_us = each, .setup_us = setup};
            if (mq_work_add(w, &u)) {
                mq_space_free(&sp);
                return -1;
            }
        }
        mq_space_free(&sp);
    }
    return 0;
}

/* The device's probes, when its backend has them: printed, and kept for
 * the summary's shares (the better of the runs before and after). */
static void run_probe(const mq_target *t, const char *when, mq_device_probe *keep)
{
    mq_device_probe pr;
    mq_error e;
    if (mq_probes_skip())
        return;
    if (!t->be->probe && t->chip.is_host && t->be->threads > 0 && !t->be->verify_only) {
        /* the CPU model on chip host: the probes that described the chip at
         * the start of this run, on the model's own threads */
        if (strcmp(when, "before"))
            return;
        pr.read_gbs = t->chip.v[MQ_CHIP_MEM_BW_GBS];
        pr.fma_gflops = t->chip.v[MQ_CHIP_FP32_TFLOPS] * 1000;
        pr.read_bytes = MQ_PROBE_READ_BYTES;
        pr.mma_gflops = 0;
    } else if (!t->be->probe) {
        return;
    } else if (t->be->probe(t->be, &pr, &e)) {
        fprintf(stderr, "bench: the device probes failed (%s): no shares reported\n", e.msg);
        return;
    }
    char mma[64] = "";
    if (pr.mma_gflops > 0)
        snprintf(mma, sizeof mma, ", simdgroup MMA %.0f GFLOP/s", pr.mma_gflops);
    printf("%s probes %s: read %.0f GB/s (%zu MiB streamed), FP32 FMA %.0f GFLOP/s%s\n",
           t->be->probe ? "device" : "machine", t->be->probe ? when : "(chip host)", pr.read_gbs,
           pr.read_bytes >> 20, pr.fma_gflops, mma);
    if (pr.read_gbs > keep->read_gbs)
        keep->read_gbs = pr.read_gbs;
    if (pr.fma_gflops > keep->fma_gflops)
        keep->fma_gflops = pr.fma_gflops;
    if (pr.mma_gflops > keep->mma_gflops)
        keep->mma_gflops = pr.mma_gflops;
}

/* The best row against a cold read of its weights' own size, timed the
 * same way (one launch): the share a kernel of that size could reach,
 * launch cost included. */
static void same_size_read(const mq_target *t, const mq_problem *p, const mq_result *b)
{
    mq_weights w;
    memset(&w, 0, sizeof w);
    w.format = p->format;
    w.K = p->K;
    w.N = p->N;
    w.group = p->group;
    w.n_levels = mq_format_is_trellis(p->format) ? 1 << mq_format_bits(p->format) : 0;
    size_t bytes = mq_weights_bytes(&w);
    double gbs = 0, empty_s = 0;
    mq_error e;
    if (t->be->probe_read_at(t->be, bytes, &gbs, &empty_s, &e)) {
        fprintf(stderr, "bench: the sized read probe failed (%s)\n", e.msg);
        return;
    }
    printf("     a cold read of the same %.1f MB, one launch: %.0f GB/s (an empty launch %.1f us); "
           "the kernel reaches %.1f%% of it\n",
           bytes / 1e6, gbs, empty_s * 1e6, 100 * b->weight_gbs / gbs);
}

static void summary(const mq_bench_job *j, const mq_target *t, const char *out,
                    const int counts[5], double wall, double kernel_s, int whole,
                    const mq_device_probe *probe, const mq_work_list *work, int shard)
{
    char of[64] = "";
    if (work->nshards > 1)
        snprintf(of, sizeof of, " shard %d/%d", shard, work->nshards);
    printf("\n%s%s on %s (%s backend): %d %s, %d wrong, %d error, %d illegal, %d skipped "
           "(--resume); results in %s\n",
           j->label, of, t->chip.name, t->be->name, counts[0],
           t->be->verify_only ? "verified" : "ok", counts[1], counts[2], counts[3],
           counts[4], out);
    if (wall > 0 && counts[0] + counts[1] + counts[2])
        printf("measurement overhead: %.1f%% of %.1f s (setup, references, checks, "
               "bookkeeping; the rest ran kernels)\n",
               100 * (1 - kernel_s / wall), wall);
    mq_results now;
    char err[4400];
    if (!whole || t->be->verify_only || mq_results_load(out, &now, err, sizeof err))
        return;
    for (int i = 0; i < work->n; i++) {
        const mq_problem p = work->u[i].p;
        if (work->u[i].shard != shard || (i > 0 && work->u[i - 1].shard == shard &&
                                          !memcmp(&work->u[i - 1].p, &p, sizeof p)))
            continue; /* once per problem of this shard */
        const mq_result *b = mq_results_best(&now, t->chip.name, t->be->name, &p);
        char name[128] = "none verified";
        if (b)
            mq_candidate_str(&b->c, name, sizeof name);
        printf("best %-8s M=%-4d N=%-6d K=%-6d %-52s ", mq_format_name(p.format), p.M, p.N,
               p.K, name);
        if (!b)
            printf("(no ok row)\n");
        else if (probe->read_gbs > 0 && probe->fma_gflops > 0) {
            char mma[48] = "";
            if (probe->mma_gflops > 0)
                snprintf(mma, sizeof mma, ", %.1f%% of the MMA probe",
                         100 * b->gflops / probe->mma_gflops);
            printf("%.4f ms: weights %.0f GB/s = %.1f%% of the read probe, %.0f GFLOP/s = %.1f%% "
                   "of the FMA probe%s\n",
                   b->st.median * 1e3, b->weight_gbs, 100 * b->weight_gbs / probe->read_gbs,
                   b->gflops, 100 * b->gflops / probe->fma_gflops, mma);
        } else {
            printf("%.4f ms\n", b->st.median * 1e3);
        }
        if (b && b->idle_s > 0)
            printf("     queued launches; one launch on an idle device: %.4f ms\n",
                   b->idle_s * 1e3);
        if (b && t->be->probe_read_at && !j->warm && !mq_probes_skip()) /* cold, like the rows */
            same_size_read(t, &p, b);
    }
    mq_results_free(&now);
}

int mq_bench_run(const mq_bench_job *j, const mq_target *t, mq_results_writer *w,
                 const mq_results *old, const char *out, const mq_work_list *work, int shard)
{
    int tty = isatty(fileno(stderr)) && !j->quiet, rc = 0;
    double t_start = mq_now(), kernel_s = 0;
    int counts[5] = {0}; /* ok or verified, wrong, error, illegal, skipped */
    static mq_measurement m;
    static mq_bench_problem bp; /* zeroed: kept across problems that share weights */
    int total = 0, done = 0, set_up = 0;
    mq_device_probe probe = {0};
    /* each shape's cold copies reuse the pages of the shape before (a set
     * is a little over twice the last-level cache: 1 GB where sysfs reports
     * a 480 MiB L3) instead of faulting in fresh ones */
    mq_weights_cache_limit((size_t)4 << 30);
    run_probe(t, "before", &probe);
    for (int i = 0; i < work->n; i++) /* the work, for the progress bar */
        total += work->u[i].shard == shard;
    for (int i = 0; i < work->n && rc == 0; i++) {
        const mq_work_unit *u = &work->u[i];
        if (u->shard != shard)
            continue;
        if (i > 0 && memcmp(&work->u[i - 1].p, &u->p, sizeof u->p))
            set_up = 0; /* a new problem */
        mq_result r;
        memset(&r, 0, sizeof r);
        snprintf(r.chip, sizeof r.chip, "%s", t->chip.name);
        snprintf(r.backend, sizeof r.backend, "%s", t->be->name);
        r.p = u->p;
        r.c = u->c;
        if (j->resume && mq_results_find_own(old, &r)) {
            counts[4]++;
            progress(++done, total, mq_now() - t_start, tty);
            continue;
        }
        if (!set_up) { /* weights and reference only when something runs */
            int ms[64]; /* the other Ms on the same weights share the pass */
            int nms = mq_shapes_ms_sharing(j->shapes, j->nshapes, 0, r.p.N, r.p.K, ms, 64);
            mq_error e;
            if (mq_bench_problem_setup(&bp, &r.p, j->warm, ms, nms, &e)) {
                fprintf(stderr, "bench: %s\n", e.msg);
                rc = 2;
                break;
            }
            set_up = 1;
        }
        mq_measure(t->be, &bp, &r.c, &t->chip.lim, &j->mo, &m);
        kernel_s += m.kernel_s;
        mq_result_from_measurement(&r, &m);
        char err[4400];
        if (mq_results_append(w, &r, err, sizeof err)) {
            /* the file keeps every row before this one, whole */
            fprintf(stderr, "%sbench: %s\n", tty ? "\r\033[K" : "", err);
            rc = 2;
            break;
        }
        counts[!strcmp(m.status, "ok") || !strcmp(m.status, "verified") ? 0
               : !strcmp(m.status, "wrong") ? 1
               : !strcmp(m.status, "error") ? 2
                                            : 3]++;
        if (!j->quiet)
            print_result(&r, tty);
        progress(++done, total, mq_now() - t_start, tty);
    }
    mq_bench_problem_free(&bp);
    mq_weights_cache_limit(0);
    if (rc == 0)
        run_probe(t, "after", &probe);
    summary(j, t, out, counts, mq_now() - t_start, kernel_s, rc == 0, &probe, work, shard);
    /* a kernel that computed a wrong answer is a finding */
    if (rc == 0 && counts[1]) {
        fprintf(stderr, "bench: %d candidate%s computed wrong results (status wrong in %s)\n",
                counts[1], counts[1] == 1 ? "" : "s", out);
        rc = 1;
    }
    return rc;
}
