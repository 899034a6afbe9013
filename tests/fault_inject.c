/* fault_inject.c - an LD_PRELOAD library for tests/test_faults.sh: it makes
 * the failures a user's machine makes, on demand, inside the real tools.
 *   MQ_FAULT_KILL_AT_RENAME=N  the process dies by SIGKILL instead of making
 *                              its N-th rename(2) (a kill between the writes
 *                              of a set of files)
 *   MQ_FAULT_WRITE_MATCH=TEXT  write(2) on files whose path contains TEXT
 *   MQ_FAULT_WRITE_LIMIT=B     may put B bytes in all: the write that crosses
 *                              B is cut short, later ones fail with ENOSPC
 *                              (a full disk as write(2) reports it)
 * Built without sanitizers; run sanitizer builds under it with
 * ASAN_OPTIONS=verify_asan_link_order=0. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ssize_t write(int fd, const void *buf, size_t n)
{
    static ssize_t (*real)(int, const void *, size_t);
    static long used;
    if (!real)
        real = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    const char *match = getenv("MQ_FAULT_WRITE_MATCH");
    if (match && *match) {
        char link[64], path[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t l = readlink(link, path, sizeof path - 1);
        if (l > 0) {
            path[l] = '\0';
            if (strstr(path, match)) {
                const char *lim = getenv("MQ_FAULT_WRITE_LIMIT");
                long limit = lim ? atol(lim) : 0;
                if (used >= limit) {
                    errno = ENOSPC;
                    return -1;
                }
                if (used + (long)n > limit)
                    n = (size_t)(limit - used);
                ssize_t w = real(fd, buf, n);
                if (w > 0)
                    used += w;
                return w;
            }
        }
    }
    return real(fd, buf, n);
}

int rename(const char *from, const char *to)
{
    static int (*real)(const char *, const char *);
    static int count;
    if (!real)
        real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    const char *at = getenv("MQ_FAULT_KILL_AT_RENAME");
    if (at && ++count == atoi(at))
        raise(SIGKILL);
    return real(from, to);
}
