/* atomic_file.c - see atomic_file.h. */
#include <csv.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"

/* This host's mark in temporary names: 8 hex digits of a hash of its
 * name, so that on a directory shared between hosts (NFS, a Slurm sweep's
 * shards) a cleaner never takes another host's live writer for a dead one
 * of its own (process ids mean nothing across hosts). */
static const char *host_mark(void)
{
    static char mark[9];
    if (!mark[0]) {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        uint32_t h = 2166136261u;
        for (const char *c = host; *c; c++)
            h = (h ^ (unsigned char)*c) * 16777619u;
        snprintf(mark, sizeof mark, "%08x", (unsigned)h);
    }
    return mark;
}

/* Six characters nobody can guess ahead: a generator seeded once from
 * /dev/urandom (and the time, the process, an address where it has none),
 * stepped by splitmix64. */
static void tmp_suffix(char out[7])
{
    static uint64_t state;
    static int seeded;
    if (!seeded) {
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        uint64_t r = 0;
        if (fd >= 0) {
            if (read(fd, &r, sizeof r) != (ssize_t)sizeof r)
                r = 0;
            close(fd);
        }
        state = r ^ ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)&r;
        seeded = 1;
    }
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    for (int i = 0; i < 6; i++, z /= 36)
        out[i] = abc[z % 36];
    out[6] = '\0';
}

int mq_tmp_name(const char *path, char *tmp, size_t n)
{
    char sfx[7];
    tmp_suffix(sfx);
    return (size_t)snprintf(tmp, n, "%s.tmp.%s.%d.%s", path, host_mark(), (int)getpid(), sfx) <
                   n
               ? 0
               : -1;
}

/* The process id in a temporary file's name past "BASE.tmp.", when it is a
 * name this host's writers make: MARK.PID.XXXXXX with this host's mark (an
 * other host's: 0, never touched), or the older PID and PID.XXXXXX. 0 when
 * the name is not one of ours. */
static long tmp_name_pid(const char *rest)
{
    const char *dot = strchr(rest, '.');
    if (dot && strchr(dot + 1, '.')) { /* MARK.PID.XXXXXX */
        if (dot - rest != 8 || strncmp(rest, host_mark(), 8))
            return 0; /* another host's (or not a name of ours) */
        rest = dot + 1;
    }
    char *end;
    long pid = strtol(rest, &end, 10);
    if (end == rest || pid <= 0)
        return 0;
    if (*end == '.' && strlen(end + 1) == 6)
        return pid;
    return *end ? 0 : pid;
}

int mq_clean_stale_tmp(const char *path)
{
    char dir[4200];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (slash == path)
        snprintf(dir, sizeof dir, "/");
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t bl = strlen(base);
    int removed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, base, bl) || strncmp(e->d_name + bl, ".tmp.", 5))
            continue;
        long pid = tmp_name_pid(e->d_name + bl + 5);
        if (pid == 0 || pid == (long)getpid())
            continue;
        /* a live process may still be writing it; ESRCH: nobody will rename it */
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char p[4500];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        /* only what a writer of ours leaves: a file, or a link (table_set.c's) */
        if (lstat(p, &sb) == 0 && (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode)))
            removed += unlink(p) == 0;
    }
    closedir(d);
    return removed;
}

FILE *mq_atomic_open(const char *path, char *tmp, size_t n, char *err, size_t errlen)
{
    mq_clean_stale_tmp(path);
    /* a fresh unguessable name each try, O_CREAT|O_EXCL|O_NOFOLLOW: neither
     * an existing file nor a planted link is ever written through; mode
     * 0666 under the umask, as any new file (mkstemp's 0600 would carry
     * over the rename) */
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        if (mq_tmp_name(path, tmp, n)) {
            snprintf(err, errlen, "%.200s...: the path is too long", path);
            return NULL;
        }
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
    }
    return f;
}

/* The OS error behind a stream's error flag: stdio keeps none, and drops
 * the buffer that failed, so one byte more is written and flushed (the
 * temporary file is thrown away anyway): a full disk says ENOSPC again. */
static int stream_errno(FILE *f)
{
    clearerr(f);
    errno = 0;
    if (fputc('\n', f) != EOF && fflush(f) == 0)
        return EIO;
    return errno ? errno : EIO;
}

int mq_atomic_commit(FILE *f, const char *tmp, const char *path, char *err, size_t errlen)
{
    int e = 0;
    /* the first failure's errno: a full disk shows at fflush or fsync */
    if (ferror(f))
        e = stream_errno(f);
    if (fflush(f) && !e)
        e = errno;
    if (fsync(fileno(f)) && !e)
        e = errno;
    if (fclose(f) && !e)
        e = errno;
    if (e) {
        snprintf(err, errlen, "%s: cannot write: %s (the old file, if any, is kept)", path,
                 strerror(e));
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path)) {
        snprintf(err, errlen, "%s: cannot replace: %s (the old file, if any, is kept)", path,
                 strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

void mq_atomic_abort(FILE *f, const char *tmp)
{
    if (f)
        fclose(f);
    unlink(tmp);
}

/* Open (creating with O_EXCL when absent) and lock path once: the
 * descriptor, or -1 with *why (NULL: errno says why) and *locked_out when
 * another process holds the lock; *stale when the file locked is no longer
 * the one at path (removed or replaced while this call waited for it). */
static int open_and_lock(const char *path, int *created, const char **why, int *locked_out,
                         int *stale)
{
    int fd = open(path, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        *created = fd >= 0;
        if (fd < 0 && errno == EEXIST) /* made in between by another writer */
            fd = open(path, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0)
        return -1;
    struct stat sb, now;
    if (fstat(fd, &sb))
        *why = strerror(errno);
    else if (!S_ISREG(sb.st_mode))
        *why = "not a regular file";
    else if (flock(fd, LOCK_EX | LOCK_NB)) {
        *locked_out = errno == EWOULDBLOCK;
        *why = *locked_out ? "another process is appending to it (its lock is held); wait for "
                             "it or write another file"
                           : strerror(errno);
    } else if (lstat(path, &now) || now.st_dev != sb.st_dev || now.st_ino != sb.st_ino)
        *stale = 1; /* a writer that gave up removed it before its lock went */
    return fd;
}

int mq_append_open(const char *path, int *created, char *err, size_t errlen)
{
    int fd = -1;
    const char *why = NULL;
    int locked_out = 0, stale = 1;
    for (int tries = 0; stale && tries < 8; tries++) {
        if (fd >= 0)
            close(fd); /* not ours to remove: the path names another file now */
        *created = 0;
        why = NULL;
        locked_out = stale = 0;
        fd = open_and_lock(path, created, &why, &locked_out, &stale);
        if (fd < 0) {
            snprintf(err, errlen, "%s: cannot open for appending: %s", path,
                     /* O_NOFOLLOW on a link: ELOOP (Linux, macOS), EMLINK (FreeBSD) */
                     errno == ELOOP || errno == EMLINK ? "it is a symbolic link (not followed)"
                                                       : strerror(errno));
            return -1;
        }
    }
    if (stale)
        why = "it was replaced while this process waited for it";
    if (why) {
        snprintf(err, errlen, "%s: cannot open for appending: %s", path, why);
        /* a file this call created but another writer locked first is theirs */
        mq_append_abort(fd, path, *created && !locked_out && !stale);
        *created = 0;
        return -1;
    }
    return fd;
}

void mq_append_abort(int fd, const char *path, int created)
{
    if (created) /* still ours alone (locked): nothing of it may stay */
        unlink(path);
    if (fd >= 0)
        close(fd);
}

int mq_append_row(int fd, const char *path, const char *row, size_t len, char *err,
                  size_t errlen)
{
    struct stat sb;
    if (fstat(fd, &sb)) {
        snprintf(err, errlen, "%s: cannot append a row: %s", path, strerror(errno));
        return -1;
    }
    size_t done = 0;
    int e = 0;
    /* one write(2) in the usual case, so rows are never interleaved; a short
     * write is continued, and the next write reports why (ENOSPC, EFBIG...) */
    while (done < len) {
        ssize_t w = write(fd, row + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            e = w < 0 ? errno : ENOSPC;
            break;
        }
        done += (size_t)w;
    }
    if (!e)
        return 0;
    if (done == 0) {
        snprintf(err, errlen, "%s: cannot append a row: %s (the file is kept as it was)", path,
                 strerror(e));
    } else if (ftruncate(fd, sb.st_size) == 0) {
        snprintf(err, errlen,
                 "%s: cannot append a row: %s (the %zu bytes that went in were cut back off: "
                 "the file is kept as it was)",
                 path, strerror(e), done);
    } else {
        snprintf(err, errlen,
                 "%s: cannot append a row: %s, and the partial row could not be cut off: %s "
                 "(readers drop it as a torn last line)",
                 path, strerror(e), strerror(errno));
    }
    return -1;
}

long mq_cut_torn_tail(int fd, const char *path, char *err, size_t errlen)
{
    struct stat sb;
    if (fstat(fd, &sb)) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    off_t end = sb.st_size, pos = end;
    char buf[4096];
    /* back from the end to the last newline */
    while (pos > 0) {
        off_t from = pos > (off_t)sizeof buf ? pos - (off_t)sizeof buf : 0;
        ssize_t got = pread(fd, buf, (size_t)(pos - from), from);
        if (got != pos - from) {
            snprintf(err, errlen, "%s: cannot read: %s", path,
                     got < 0 ? strerror(errno) : "short read");
            return -1;
        }
        ssize_t i = got - 1;
        while (i >= 0 && buf[i] != '\n')
            i--;
        if (i >= 0) {
            pos = from + i + 1;
            break;
        }
        pos = from;
    }
    if (pos == end)
        return 0;
    if (ftruncate(fd, pos)) {
        snprintf(err, errlen, "%s: cannot cut off its torn last line: %s", path,
                 strerror(errno));
        return -1;
    }
    return (long)(end - pos);
}

int mq_append_csv_row(int fd, const char *path, const char *header, const char *const *fields,
                      int n, long *cut, char *err, size_t errlen)
{
    char row[8192];
    size_t len = 0;
    struct stat sb;
    long c = mq_cut_torn_tail(fd, path, err, errlen);
    if (cut)
        *cut = c;
    int bad = c < 0;
    if (!bad && fstat(fd, &sb) == 0 && sb.st_size == 0)
        len = (size_t)snprintf(row, sizeof row, "%s", header);
    for (int i = 0; !bad && i < n; i++) {
        size_t need = csv_write(NULL, 0, fields[i], strlen(fields[i]));
        if (len + need + 2 > sizeof row) {
            snprintf(err, errlen, "%s: a row of more than %zu bytes", path, sizeof row);
            bad = 1;
            break;
        }
        len += csv_write(row + len, sizeof row - len, fields[i], strlen(fields[i]));
        row[len++] = i == n - 1 ? '\n' : ',';
    }
    bad = bad || mq_append_row(fd, path, row, len, err, errlen);
    return bad ? -1 : 0;
}
