/* fault_inject.c - a preloaded library for tests/test_faults.sh: it makes
 * the failures a user's machine makes, on demand, inside the real tools.
 * Linux loads it with LD_PRELOAD (write and rename defined here, the real
 * ones found with dlsym(RTLD_NEXT)); macOS with DYLD_INSERT_LIBRARIES (dyld
 * interposing: the __DATA,__interpose section pairs each replacement with
 * the function it replaces, and the replacement calls the original by name,
 * as calls from this library itself are not redirected).
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
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __APPLE__
#include <fcntl.h>
#include <sys/param.h>
#else
#include <dlfcn.h>
#endif

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef int (*rename_fn)(const char *, const char *);

/* The path of the file open on fd, 0 when it has one: Linux reads the
 * /proc/self/fd link, macOS asks fcntl(F_GETPATH). */
static int fd_path(int fd, char *path, size_t size)
{
#ifdef __APPLE__
    char buf[MAXPATHLEN];
    if (fcntl(fd, F_GETPATH, buf) == -1 || strlen(buf) >= size)
        return -1;
    strcpy(path, buf);
    return 0;
#else
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t l = readlink(link, path, size - 1);
    if (l <= 0)
        return -1;
    path[l] = '\0';
    return 0;
#endif
}

/* write(2) through `real`, cut short or failed once MQ_FAULT_WRITE_LIMIT
 * bytes went to files matching MQ_FAULT_WRITE_MATCH */
static ssize_t limited_write(write_fn real, int fd, const void *buf, size_t n)
{
    static long used;
    const char *match = getenv("MQ_FAULT_WRITE_MATCH");
    if (match && *match) {
        char path[4096];
        if (fd_path(fd, path, sizeof path) == 0 && strstr(path, match)) {
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
    return real(fd, buf, n);
}

/* rename(2) through `real`, unless it is the MQ_FAULT_KILL_AT_RENAME-th */
static int killing_rename(rename_fn real, const char *from, const char *to)
{
    static int count;
    const char *at = getenv("MQ_FAULT_KILL_AT_RENAME");
    if (at && ++count == atoi(at))
        raise(SIGKILL);
    return real(from, to);
}

#ifdef __APPLE__
/* dyld reads (replacement, replaced) address pairs from this section of a
 * library it inserts, and points every other image's calls at the first */
struct interpose_pair {
    const void *replacement;
    const void *replaced;
};

static ssize_t fault_write(int fd, const void *buf, size_t n)
{
    return limited_write(write, fd, buf, n);
}

static int fault_rename(const char *from, const char *to)
{
    return killing_rename(rename, from, to);
}

__attribute__((used, section("__DATA,__interpose"))) static const struct interpose_pair
    interpose_pairs[] = {
        {(const void *)fault_write, (const void *)write},
        {(const void *)fault_rename, (const void *)rename},
};
#else
ssize_t write(int fd, const void *buf, size_t n)
{
    static write_fn real;
    if (!real)
        real = (write_fn)dlsym(RTLD_NEXT, "write");
    return limited_write(real, fd, buf, n);
}

int rename(const char *from, const char *to)
{
    static rename_fn real;
    if (!real)
        real = (rename_fn)dlsym(RTLD_NEXT, "rename");
    return killing_rename(real, from, to);
}
#endif
