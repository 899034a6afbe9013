/* test_nvrtc.c - the cuda backend's programs through NVRTC itself, as the
 * backend compiles them on a GPU, on a machine with the CUDA toolkit and no
 * GPU (CI): each program's CUDA text from the backend's own translation
 * (mq_cuda_source), compiled by the backend's own NVRTC call
 * (mq_nvrtc_compile, backends/cuda/cuda_compile.c: the same options,
 * metal_stdlib as the one header; no cache, no driver, no context) for the
 * CUDA chips' architecture (sm_90 for h100/h200: a real architecture, so
 * ptxas runs and a cubin comes back), NVRTC reached through the backend's
 * dlopen wrapper (mq_nvrtc_api_load, backends/cuda/cuda_api.c; nothing
 * links against it): a program that only NVRTC or ptxas refuses fails here,
 * not on the GPU machine. tests/test_cuda_prelude.c compiles the same
 * programs with clang's CUDA mode, which needs no toolkit.
 *
 * Where NVRTC does not load (no CUDA toolkit: a Mac, a CI without CUDA) the
 * test says "skipped on OS: ..." and counts 1 skipped, unless a toolkit is
 * visibly installed (nvcc on PATH or /usr/local/cuda): then a missing NVRTC
 * is a failure. $MQ_NVRTC_REQUIRE=1 makes it a failure anywhere, =0 a skip
 * anywhere. NVRTC off the library path is looked for in /usr/local/cuda
 * ($MQ_NVRTC_LIB names another file). make sanitize and make portable
 * ($MQ_TEST_REPEAT) skip it, saying so: what it tests is NVRTC and ptxas,
 * the same whatever our build, and make test runs it.
 *
 * Which programs. NVRTC with ptxas takes 0.3-4 s a program (0.75 s of CPU
 * on average), so all 1157 distinct legal programs of h100/h200
 * (mq_test_programs: every format, group, M, five layer shapes, the full
 * candidate space) take ~10 minutes on 2 cores (measured: 605 s). make test
 * compiles a representative subset (mq_test_subset in testdata.c; 81
 * programs, ~40 s on 2 cores): per
 * kernel file, the programs with the smallest and the largest value of each
 * macro that varies (TILE_M, TILE_N, TILE_K, SG_M, SG_N, MQ_PLAN_THREADS,
 * MQ_PLAN_TG_BYTES), of the tile's volume (TILE_M x TILE_N x TILE_K), its
 * output area (TILE_M x TILE_N) and the volume per thread (where registers
 * peak); and per file and trellis width the smallest and largest tile, area
 * and thread count (the most threads: the tightest register
 * cap, __launch_bounds__); the first in enumeration order on a tie. A
 * module holds every kernel of its file (fp4 and u4 are two kernels of one
 * module, trellis 2/3/4 the TRELLIS_BITS macro), so every (file, kernel
 * function) pair and every format is compiled; split-K is no macro
 * (k_slices, stripes and the split are run-time parameters of the same
 * program), so every split-K setting of a kept program is covered. Also
 * compiled as the backend compiles them: the split-K reduction module
 * (MQ_MSL_REDUCE_FILE, no macros), the MMA probe, the MoE block (each
 * trellis width, the smallest and largest tile_n), and the FP32 mapping
 * (MQ_CUDA_MMA=fp32) of the first kept program of each file and of the
 * probe. MQ_NVRTC_ALL=1 compiles every legal program instead of the subset
 * (~10 minutes on 2 cores), MQ_NVRTC_FILE=lane_gemm.metal only one kernel
 * file's, MQ_NVRTC_VERBOSE=1 prints every kernel's ptxas figures. Workers:
 * one process per core (at most 8; $MQ_NVRTC_JOBS), each translating and
 * compiling the programs it takes from a shared queue.
 *
 * Also reported, from ptxas -v in NVRTC's log (--ptxas-options=-v: one
 * option more than the backend passes, which changes no code): per file,
 * the most registers of each kernel and whether any kernel spilled (spill
 * stores or loads > 0), one line per file. A spill is reported, not failed.
 * Planted: a typo fails in NVRTC's front end, a kernel with 64 KB of static
 * shared memory in ptxas, each naming why. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "chips.h"
#include "cuda_module.h"
#include "cuda_state.h"
#include "msl_program.h"
#include "testdata.h"

#define MAX_PROGRAMS 4096
#define MAX_WORKERS 8
#define REC_KERNELS MQ_CUDA_MAX_KERNELS

typedef struct {
    char file[64], defines[256];
    int mma_fp32;
} job;

/* ptxas's figures for one kernel entry (its MSL name) */
typedef struct {
    char name[96];
    int regs, stack, spill_st, spill_ld;
} kstat;

/* A worker's answer for one job, written into shared memory. */
typedef struct {
    int done, ok, nk;
    double secs;
    kstat k[REC_KERNELS];
    char msg[1024];
} record;

static double now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec * 1e-6;
}

/* "mq_cuda_entry_NAME" -> NAME */
static const char *short_name(const char *entry)
{
    return strncmp(entry, "mq_cuda_entry_", 14) ? entry : entry + 14;
}

static int find_kernel(const kstat *k, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(k[i].name, name))
            return i;
    return -1;
}

/* ptxas -v in NVRTC's log, per entry: "Compiling entry function 'E' for
 * 'sm_90'", "Function properties for E", "N bytes stack frame, N bytes
 * spill stores, N bytes spill loads", "Used N registers, ...". The entries
 * found (at most cap). */
static int parse_ptxas(const char *log, kstat *k, int cap)
{
    int n = 0, cur = -1;
    for (const char *l = log; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), l);
        l = e ? e + 1 : NULL;
        char *q;
        int a, b, c;
        if ((q = strstr(line, "Compiling entry function '"))) {
            q += strlen("Compiling entry function '");
            q[strcspn(q, "'")] = 0;
            cur = find_kernel(k, n, short_name(q));
            if (cur < 0 && n < cap) {
                cur = n++;
                memset(&k[cur], 0, sizeof k[cur]);
                snprintf(k[cur].name, sizeof k[cur].name, "%s", short_name(q));
            }
        } else if ((q = strstr(line, "Function properties for "))) {
            q += strlen("Function properties for ");
            q[strcspn(q, " \r")] = 0;
            cur = find_kernel(k, n, short_name(q)); /* a device function's: no entry */
        } else if (cur >= 0 &&
                   sscanf(line, " %d bytes stack frame, %d bytes spill stores, %d bytes spill loads",
                          &a, &b, &c) == 3) {
            k[cur].stack = a;
            k[cur].spill_st = b;
            k[cur].spill_ld = c;
        } else if (cur >= 0 && (q = strstr(line, "Used ")) && sscanf(q, "Used %d registers", &a) == 1) {
            k[cur].regs = a;
        }
    }
    return n;
}

/* One program: translated as the backend translates it, compiled as the
 * backend compiles it (plus ptxas -v), its cubin an ELF image, every kernel
 * of the file an entry ptxas compiled. */
static void compile_job(const mq_cuda_api *api, const char *arch_opt, const job *j, record *r)
{
    static const char *const extra[] = {"--ptxas-options=-v", NULL};
    char err[1024];
    mq_cuda_kernel ks[MQ_CUDA_MAX_KERNELS];
    int nks = 0;
    double t0 = now();
    char *cu = mq_cuda_source(j->file, NULL, j->defines, ks, &nks, err, sizeof err);
    if (!cu) {
        snprintf(r->msg, sizeof r->msg, "no CUDA source: %.900s", err);
        return;
    }
    size_t n = 0;
    char *log = NULL;
    char *cubin = mq_nvrtc_compile(api, arch_opt, j->mma_fp32, j->file, cu, j->defines, 1, extra,
                                   &n, &log, r->msg, sizeof r->msg);
    free(cu);
    r->secs = now() - t0;
    r->nk = parse_ptxas(log, r->k, REC_KERNELS);
    free(log);
    if (!cubin)
        return;
    int elf = n >= 64 && !memcmp(cubin, "\x7f" "ELF", 4);
    free(cubin);
    if (!elf) {
        snprintf(r->msg, sizeof r->msg, "NVRTC gave %zu bytes that are no ELF cubin", n);
        return;
    }
    for (int i = 0; i < nks; i++)
        if (find_kernel(r->k, r->nk, ks[i].name) < 0) {
            snprintf(r->msg, sizeof r->msg, "ptxas -v reported no entry mq_cuda_entry_%.95s",
                     ks[i].name);
            return;
        }
    r->ok = 1;
}

/* The workers: each takes job indices from the queue pipe (4-byte reads
 * and writes are atomic) and writes job i's record into rs[i], memory
 * shared with this process. */
static void run_jobs(const mq_cuda_api *api, const char *arch_opt, const job *js, int nj,
                     record *rs, int workers)
{
    int q[2];
    if (pipe(q)) {
        CHECK(0, "pipe: %s", strerror(errno));
        return;
    }
    /* the whole queue is written first: at most 16 KiB, within a pipe's buffer */
    for (int i = 0; i < nj; i++)
        if (write(q[1], &i, sizeof i) != (ssize_t)sizeof i) {
            CHECK(0, "expected to queue %d programs: %s", nj, strerror(errno));
            break;
        }
    close(q[1]);
    pid_t pids[MAX_WORKERS];
    int started = 0;
    fflush(NULL);
    for (int w = 0; w < workers; w++) {
        pid_t p = fork();
        if (p < 0)
            break;
        if (p == 0) {
            int i;
            while (read(q[0], &i, sizeof i) == (ssize_t)sizeof i)
                if (i >= 0 && i < nj) {
                    compile_job(api, arch_opt, &js[i], &rs[i]);
                    rs[i].done = 1;
                }
            _exit(0);
        }
        pids[started++] = p;
    }
    close(q[0]);
    CHECK(started > 0, "expected to start NVRTC workers: %s", strerror(errno));
    for (int w = 0; w < started; w++) {
        int st = 0;
        while (waitpid(pids[w], &st, 0) < 0 && errno == EINTR)
            ;
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "expected NVRTC worker %d to finish, it %s %d (its program has no answer)", w,
              WIFSIGNALED(st) ? "died of signal" : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
}

static int add_job(job *js, int n, const char *file, const char *defines, int mma_fp32)
{
    if (n >= MAX_PROGRAMS)
        return n;
    memset(&js[n], 0, sizeof js[n]);
    snprintf(js[n].file, sizeof js[n].file, "%s", file);
    snprintf(js[n].defines, sizeof js[n].defines, "%s", defines);
    js[n].mma_fp32 = mma_fp32;
    return n + 1;
}

/* The MoE block's programs (no GEMM candidate names them): each trellis
 * width at the smallest and the largest tile_n, with the first simdgroup
 * count that is legal, planned as the backend plans them. */
static int add_moe_jobs(job *js, int n)
{
    for (int bits = 2; bits <= 4; bits++) {
        mq_moe_problem mp = {(mq_format)(MQ_FMT_TRELLIS2 + bits - 2), 1, 2048, 768, 8, 2, 128};
        mq_moe_weights mw;
        mq_error e;
        if (mq_moe_weights_alloc(&mw, &mp, &e)) {
            CHECK(0, "MoE weights: %s", e.msg);
            continue;
        }
        for (int t = 0; t < 4; t += 3) {
            int tn = 16 << t, done = 0;
            for (int sg = 0; sg < 4 && !done; sg++) {
                mq_moe_candidate c;
                memset(&c, 0, sizeof c);
                c.inner.variant = MQ_VAR_GEMV_TRELLIS;
                c.inner.p = (mq_params){t ? 16 : 1, tn, (8 * (32 / (tn / 4))) << sg, 0, 1};
                c.i_split = 1;
                c.fuse_gate_up = 1;
                mq_msl_moe_plan plan;
                if (mq_msl_moe_plan_of(&mp, &mw, &c, NULL, &plan, &e))
                    continue;
                n = add_job(js, n, MQ_MSL_MOE_FILE, plan.defines, 0);
                done = 1;
            }
            CHECK(done, "expected a legal MoE block at trellis %d, tile_n %d", bits, tn);
        }
        /* the lane block's two kernels under h100's limits, gate/up and down */
        mq_chip chip;
        char err[512];
        mq_moe_candidate c;
        memset(&c, 0, sizeof c);
        c.inner.variant = MQ_VAR_LANE_TRELLIS;
        c.inner.p = (mq_params){8, 64, 128, 0, 1};
        c.i_split = 2;
        mq_msl_moe_plan plan;
        int ok = !mq_chip_load_named(mq_chips_default_path(), "h100", &chip, err, sizeof err) &&
                 mq_msl_moe_plan_of(&mp, &mw, &c, &chip.lim, &plan, &e) == MQ_OK;
        CHECK(ok, "expected the lane MoE block planned under h100's limits: %s", e.msg);
        for (int d = MQ_MSL_MOE_LANE_GATE_UP; ok && d <= MQ_MSL_MOE_LANE_DOWN; d++)
            n = add_job(js, n, MQ_MSL_MOE_LANE_FILE, plan.d[d].defines, 0);
        mq_moe_weights_free(&mw);
    }
    return n;
}

/* NVRTC refuses what it must, and says why: a typo in a real kernel (the
 * front end), 64 KB of static shared memory (ptxas: the static limit is 48
 * KB; clang's CUDA mode, which stops at PTX, passes it). */
static void test_planted(const mq_cuda_api *api, const char *arch_opt)
{
    char err[1024], msg[1024];
    size_t n = 0;
    char *src = mq_metal_source("marlin_gemm_fused.metal", err, sizeof err);
    char *at = src ? strstr(src, "simdgroup_multiply_accumulate(") : NULL;
    CHECK(at != NULL, "expected a simdgroup_multiply_accumulate in marlin_gemm_fused.metal: %s",
          src ? "none" : err);
    if (at) {
        memcpy(at, "simdgroup_multiply_acumulate ", 29);
        mq_cuda_kernel ks[MQ_CUDA_MAX_KERNELS];
        int nks = 0;
        char *cu = mq_cuda_source("marlin_gemm_fused.metal", src, "", ks, &nks, err, sizeof err);
        char *cubin = cu ? mq_nvrtc_compile(api, arch_opt, 0, "marlin_gemm_fused.metal", cu, "", 1,
                                            NULL, &n, NULL, msg, sizeof msg)
                         : NULL;
        CHECK(cu && !cubin && strstr(msg, "does not compile with NVRTC") && strstr(msg, "acumulate"),
              "expected a planted typo to fail NVRTC, naming it: %s", cu ? msg : err);
        free(cubin);
        free(cu);
    }
    free(src);
    static const char big_smem[] =
        "extern \"C\" __global__ void planted(float *p)\n"
        "{\n"
        "    __shared__ float s[16384];\n"
        "    s[threadIdx.x] = p[threadIdx.x];\n"
        "    __syncthreads();\n"
        "    p[threadIdx.x] = s[16383 - threadIdx.x];\n"
        "}\n";
    char *log = NULL;
    char *cubin = mq_nvrtc_compile(api, arch_opt, 0, "planted.cu", big_smem, "", 0, NULL, &n, &log,
                                   msg, sizeof msg);
    CHECK(!cubin && log && strstr(log, "ptxas") && strstr(log, "shared"),
          "expected ptxas to refuse 64 KB of static shared memory, naming it: %s (log: %.300s)",
          cubin ? "compiled" : msg, log ? log : "none");
    free(cubin);
    free(log);
    /* and the same kernel in bounds compiles to a cubin */
    char small[sizeof big_smem];
    memcpy(small, big_smem, sizeof big_smem);
    char *k = strstr(small, "16384"), *k2 = strstr(small, "16383");
    if (k && k2) {
        memcpy(k, " 4096", 5);
        memcpy(k2, " 4095", 5);
    }
    cubin = mq_nvrtc_compile(api, arch_opt, 0, "planted.cu", small, "", 0, NULL, &n, NULL, msg,
                             sizeof msg);
    CHECK(cubin && n >= 64 && !memcmp(cubin, "\x7f" "ELF", 4),
          "expected the same kernel with 16 KB of shared memory to compile to a cubin: %s",
          cubin ? "not an ELF image" : msg);
    free(cubin);
}

/* Per file: the most registers of each kernel, and spills. */
typedef struct {
    char file[64];
    int programs;
    kstat k[REC_KERNELS]; /* regs: the most; spill_*: of that worst spill */
    char regs_at[REC_KERNELS][300];
    int nk, spilled, worst_spill;
    char spill_at[400];
    double secs;
} file_sum;

static void summarize(file_sum *s, const job *j, const record *r)
{
    s->programs++;
    s->secs += r->secs;
    for (int i = 0; i < r->nk; i++) {
        const kstat *q = &r->k[i];
        int f = find_kernel(s->k, s->nk, q->name);
        if (f < 0 && s->nk < REC_KERNELS) {
            f = s->nk++;
            memset(&s->k[f], 0, sizeof s->k[f]);
            snprintf(s->k[f].name, sizeof s->k[f].name, "%s", q->name);
            s->k[f].regs = -1;
        }
        if (f < 0)
            continue;
        if (q->regs > s->k[f].regs) {
            s->k[f].regs = q->regs;
            snprintf(s->regs_at[f], sizeof s->regs_at[f], "%s%s",
                     j->defines[0] ? j->defines : "no macros", j->mma_fp32 ? ", fp32 mapping" : "");
        }
        int sp = q->spill_st + q->spill_ld;
        s->spilled += sp > 0;
        if (sp > s->worst_spill) {
            s->worst_spill = sp;
            snprintf(s->spill_at, sizeof s->spill_at, "%s (%s%s): %d B spill stores, %d B loads, %d B stack",
                     q->name, j->defines[0] ? j->defines : "no macros",
                     j->mma_fp32 ? ", fp32 mapping" : "", q->spill_st, q->spill_ld, q->stack);
        }
    }
}

static void print_summary(const file_sum *s)
{
    char line[2048];
    size_t u = (size_t)snprintf(line, sizeof line, "nvrtc ptxas %s (%d programs, %.1f s):", s->file,
                                s->programs, s->secs);
    int worst = 0;
    for (int i = 0; i < s->nk && u < sizeof line; i++) {
        u += (size_t)snprintf(line + u, sizeof line - u, "%s %s %d", i ? "," : "", s->k[i].name,
                              s->k[i].regs);
        if (s->k[i].regs > s->k[worst].regs)
            worst = i;
    }
    if (u < sizeof line)
        snprintf(line + u, sizeof line - u, " registers at most%s", s->spilled ? "" : "; no spills");
    printf("%s\n", line);
    if (s->nk)
        printf("    the most: %s, %d registers (%s)\n", s->k[worst].name, s->k[worst].regs,
               s->regs_at[worst]);
    if (s->spilled)
        printf("    SPILLS in %d kernel compiles; the worst: %s\n", s->spilled, s->spill_at);
}

/* NVRTC through the backend's wrapper; off the library path, the
 * toolkit's own copy. 0, or -1 and why. */
static int load_nvrtc(mq_cuda_api *api, char *why, size_t n)
{
    if (!mq_nvrtc_api_load(api, why, n))
        return 0;
    const char *env = getenv("MQ_NVRTC_LIB");
    if (env && *env)
        return -1;
    static const char *const at[] = {"/usr/local/cuda/lib64/libnvrtc.so",
                                     "/usr/local/cuda/lib/libnvrtc.so", NULL};
    char why2[512];
    for (int i = 0; at[i]; i++) {
        if (access(at[i], R_OK))
            continue;
        setenv("MQ_NVRTC_LIB", at[i], 1);
        int rc = mq_nvrtc_api_load(api, why2, sizeof why2);
        unsetenv("MQ_NVRTC_LIB");
        if (!rc)
            return 0;
    }
    return -1;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (mq_test_repeat()) { /* make sanitize, make portable: NVRTC is under test, not our build */
        check_skip(mq_test_repeat(), "the cuda backend's programs through NVRTC (what it tests is "
                                     "NVRTC and ptxas, not this build; make test runs it)");
        return check_done("test_nvrtc");
    }
    mq_cuda_api api;
    char why[1024];
    if (load_nvrtc(&api, why, sizeof why)) {
        const char *req = getenv("MQ_NVRTC_REQUIRE");
        int toolkit = system("command -v nvcc >/dev/null 2>&1") == 0 ||
                      access("/usr/local/cuda", F_OK) == 0;
        int required = req && *req ? strcmp(req, "0") != 0 : toolkit;
        if (required) {
            CHECK(0, "expected NVRTC where the CUDA toolkit is installed%s: %s",
                  req && *req ? " (MQ_NVRTC_REQUIRE)" : " (nvcc or /usr/local/cuda is)", why);
            return check_done("test_nvrtc");
        }
        struct utsname un;
        printf("skipped on %s: the cuda backend's programs through NVRTC (%s)\n",
               uname(&un) ? "this system" : un.sysname, why);
        printf("test_nvrtc: %d passed, %d failed, 1 skipped\n", check_passed, check_failed);
        return check_failed ? 1 : 0;
    }
    int vmaj = 0, vmin = 0;
    api.Version(&vmaj, &vmin);

    /* the architectures of the CUDA chips: sm_90 (h100, h200) */
    mq_chip_db db;
    char err[512], archs[4][32];
    int na = 0;
    if (mq_chips_load(mq_chips_default_path(), &db, err, sizeof err)) {
        CHECK(0, "chips: %s", err);
        return check_done("test_nvrtc");
    }
    for (int c = 0; c < db.n; c++) {
        int seen = strncmp(db.chips[c].arch, "sm_", 3) != 0;
        for (int a = 0; a < na; a++)
            seen |= !strcmp(archs[a], db.chips[c].arch);
        if (!seen && na < 4)
            snprintf(archs[na++], sizeof archs[0], "%.31s", db.chips[c].arch);
    }
    mq_chips_free(&db);
    CHECK(na >= 1, "expected CUDA chips (arch sm_XY) in the chips file");

    static mq_test_program ps[MAX_PROGRAMS];
    int missing = 0;
    int np = mq_test_programs("sm_", ps, MAX_PROGRAMS, NULL, &missing);
    CHECK(np >= 300 && missing == 0,
          "expected hundreds of distinct legal programs for the CUDA chips, each candidate with "
          "its program: %d programs, %d missing",
          np, missing);
    if (np < 0 || na < 1)
        return check_done("test_nvrtc");
    const char *all_env = getenv("MQ_NVRTC_ALL"), *only = getenv("MQ_NVRTC_FILE");
    int all = all_env && *all_env && strcmp(all_env, "0");
    static char keep[MAX_PROGRAMS];
    int kept = np;
    if (all)
        memset(keep, 1, (size_t)np);
    else
        kept = mq_test_subset(ps, np, keep);
    if (only && *only) /* one kernel file's programs only */
        for (int i = 0; i < np; i++)
            if (keep[i] && strcmp(ps[i].file, only)) {
                keep[i] = 0;
                kept--;
            }

    static job js[MAX_PROGRAMS];
    int nj = 0;
    for (int i = 0; i < np; i++)
        if (keep[i])
            nj = add_job(js, nj, ps[i].file, ps[i].defines, 0);
    int ngemm = nj;
    int extras = !(only && *only);
    if (extras) {
        nj = add_job(js, nj, MQ_MSL_REDUCE_FILE, "", 0);
        nj = add_job(js, nj, "mq_probe_mma.metal", "", 0);
        nj = add_moe_jobs(js, nj);
    }
    for (int i = 0; i < ngemm; i++) { /* the FP32 mapping: each file's first program */
        int first = 1;
        for (int k = 0; k < i && first; k++)
            first = strcmp(js[k].file, js[i].file) != 0;
        if (first)
            nj = add_job(js, nj, js[i].file, js[i].defines, 1);
    }
    if (extras)
        nj = add_job(js, nj, "mq_probe_mma.metal", "", 1);

    CHECK(nj > 0, "expected programs to compile (MQ_NVRTC_FILE=%s names no kernel file of a "
                  "legal program)", only ? only : "");
    if (nj == 0)
        return check_done("test_nvrtc");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const char *jenv = getenv("MQ_NVRTC_JOBS");
    int workers = jenv && atoi(jenv) > 0 ? atoi(jenv) : (int)(cpus > 0 ? cpus : 1);
    if (workers > MAX_WORKERS)
        workers = MAX_WORKERS;
    if (workers > nj)
        workers = nj;
    size_t rs_bytes = sizeof(record) * (size_t)nj;
    record *rs = mmap(NULL, rs_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (rs == MAP_FAILED) {
        CHECK(0, "mmap of %zu bytes: %s", rs_bytes, strerror(errno));
        return check_done("test_nvrtc");
    }
    const char *venv = getenv("MQ_NVRTC_VERBOSE");
    int verbose = venv && *venv && strcmp(venv, "0");
    static file_sum fs[32];
    int nfs = 0, bad = 0;
    double t0 = now(), cpu_secs = 0;
    for (int a = 0; a < na; a++) {
        char arch_opt[64];
        snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", archs[a]);
        if (a == 0)
            test_planted(&api, arch_opt);
        memset(rs, 0, rs_bytes);
        run_jobs(&api, arch_opt, js, nj, rs, workers);
        for (int i = 0; i < nj; i++) {
            const record *r = &rs[i];
            cpu_secs += r->secs;
            CHECK(r->ok, "expected metal/%s (%s%s) to compile with NVRTC %d.%d for %s to a cubin: %s",
                  js[i].file, js[i].defines[0] ? js[i].defines : "no macros",
                  js[i].mma_fp32 ? ", MQ_CUDA_MMA=fp32" : "", vmaj, vmin, archs[a],
                  r->done ? r->msg : "no answer (its worker died)");
            bad += !r->ok;
            int f = 0;
            while (f < nfs && strcmp(fs[f].file, js[i].file))
                f++;
            if (f == nfs && nfs < 32) {
                memset(&fs[nfs], 0, sizeof fs[nfs]);
                memcpy(fs[nfs].file, js[i].file, sizeof fs[nfs].file); /* both 64, 0-terminated */
                nfs++;
            }
            if (f < nfs)
                summarize(&fs[f], &js[i], r);
            if (verbose)
                for (int k = 0; k < r->nk; k++)
                    printf("nvrtc %s (%s%s): %s %d registers, %d B stack, %d/%d B spill "
                           "stores/loads, %.2f s\n",
                           js[i].file, js[i].defines, js[i].mma_fp32 ? ", fp32 mapping" : "",
                           r->k[k].name, r->k[k].regs, r->k[k].stack, r->k[k].spill_st,
                           r->k[k].spill_ld, r->secs);
        }
    }
    munmap(rs, rs_bytes);
    for (int f = 0; f < nfs; f++)
        print_summary(&fs[f]);
    printf("nvrtc: NVRTC %d.%d, %s: %d of %d distinct legal GEMM programs of h100/h200 (%s) and "
           "%d more (%s), %d failed; %.1f s on %d workers (%.1f s of compiling)\n",
           vmaj, vmin, archs[0], kept, np, all ? "MQ_NVRTC_ALL" : "a subset; MQ_NVRTC_ALL=1 for all",
           nj - ngemm,
           extras ? "the split-K reduction, the MMA probe, the MoE block, the FP32 mapping"
                  : "the FP32 mapping",
           bad, now() - t0, workers, cpu_secs);
    /* NVRTC stays loaded: dlclose would leave the 72 KB its libstdc++ keeps
     * for exceptions unreachable, which LeakSanitizer (make sanitize) calls
     * a leak */
    return check_done("test_nvrtc");
}
