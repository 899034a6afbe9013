/* test_resume.c - a bench run killed with SIGKILL midway, then resumed,
 * ends with every row exactly once: the results file is never left with a
 * partial row, and --resume skips exactly what was already measured. */
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "results.h"

static char bench[4096];

static pid_t start_bench(const char *out, int resume)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
            _exit(127);
        /* --ci 0 and up to 4096 reps: every candidate runs tens of ms, so the
         * kill lands midway */
        char *args[] = {bench,       "--chip",    "m4max",   "--suite",  "smoke",
                        "--m",       "1,2",       "--formats", "fp4,u4", "--budget",
                        "0.05",      "--ci",      "0",       "--max-reps", "4096", "--warm",    "--quiet", "--out",    (char *)out,
                        resume ? "--resume" : NULL, NULL};
        execv(bench, args);
        _exit(127);
    }
    return pid;
}

static int rows_in(const char *path)
{
    mq_results rs;
    char err[1024];
    if (mq_results_load(path, &rs, err, sizeof err))
        return -1;
    int n = rs.n;
    mq_results_free(&rs);
    return n;
}

static int wait_exit(pid_t pid)
{
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv)
{
    (void)argc;
    char self[4096];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(bench, sizeof bench, "%s/../bench", dirname(self));
    char dir[] = "/tmp/mq-test-resume-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char ref[4200], run[4200], err[1024];
    snprintf(ref, sizeof ref, "%s/ref.csv", dir);
    snprintf(run, sizeof run, "%s/run.csv", dir);

    CHECK(wait_exit(start_bench(ref, 0)) == 0, "an uninterrupted run (%s) exits 0", bench);
    int expected = rows_in(ref);
    CHECK(expected == 40, "smoke x M {1,2} x fp4 (6 seed variants) and u4 (4): 40 rows, got %d",
          expected);

    pid_t pid = start_bench(run, 0);
    struct timespec nap = {0, 2000000};
    int seen = 0;
    for (int i = 0; i < 20000 && seen < 5; i++) { /* up to 40 s */
        nanosleep(&nap, NULL);
        seen = rows_in(run);
    }
    kill(pid, SIGKILL);
    int rc = wait_exit(pid);
    int after_kill = rows_in(run);
    CHECK(rc == 128 + SIGKILL, "the run was killed by SIGKILL midway (exit %d)", rc);
    CHECK(after_kill >= 5 && after_kill < expected,
          "the killed run left a loadable file with part of the rows: %d of %d", after_kill,
          expected);

    CHECK(wait_exit(start_bench(run, 1)) == 0, "the resumed run exits 0");
    mq_results a, b;
    if (mq_results_load(ref, &a, err, sizeof err) || mq_results_load(run, &b, err, sizeof err)) {
        CHECK(0, "load results: %s", err);
        return check_done("resume");
    }
    CHECK(b.n == expected, "after resuming: %d rows, expected %d", b.n, expected);
    int missing = 0, dup = 0;
    for (int i = 0; i < a.n; i++) {
        int times = 0;
        for (int j = 0; j < b.n; j++)
            times += mq_result_same_key(&a.r[i], &b.r[j]);
        missing += times == 0;
        dup += times > 1;
    }
    CHECK(missing == 0 && dup == 0, "every row exactly once: %d missing, %d duplicated",
          missing, dup);
    mq_results_free(&a);
    mq_results_free(&b);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_done("resume");
}
