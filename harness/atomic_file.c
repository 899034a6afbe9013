/* atomic_file.c - see atomic_file.h. */
#include <csv.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"

/* The process id in a temporary file's name past "BASE.tmp.": PID alone
 * (links made by table_set.c) or PID.XXXXXX (mkstemp's); 0 when the name is
 * not one of ours. */
static long tmp_name_pid(const char *rest)
{
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
    if ((size_t)snprintf(tmp, n, "%s.tmp.%d.XXXXXX", path, (int)getpid()) >= n) {
        snprintf(err, errlen, "%.200s...: the path is too long", path);
        return NULL;
    }
    /* mkstemp: a name nobody can guess ahead, opened O_EXCL, so neither an
     * existing file nor a planted link is ever written through */
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
        return NULL;
    }
    mode_t mask = umask(0); /* mkstemp's 0600 would carry over the rename */
    umask(mask);
    FILE *f = fchmod(fd, 0666 & ~mask) == 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
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

int mq_append_open(const char *path, int *created, char *err, size_t errlen)
{
    *created = 0;
    int fd = open(path, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        *created = fd >= 0;
        if (fd < 0 && errno == EEXIST) /* made in between by another writer */
            fd = open(path, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open for appending: %s", path,
                 /* O_NOFOLLOW on a link: ELOOP (Linux, macOS), EMLINK (FreeBSD) */
                 errno == ELOOP || errno == EMLINK ? "it is a symbolic link (not followed)"
                                                   : strerror(errno));
        return -1;
    }
    struct stat sb;
    const char *why = NULL;
    int locked_out = 0;
    if (fstat(fd, &sb))
        why = strerror(errno);
    else if (!S_ISREG(sb.st_mode))
        why = "not a regular file";
    else if (flock(fd, LOCK_EX | LOCK_NB)) {
        locked_out = errno == EWOULDBLOCK;
        why = locked_out ? "another process is appending to it (its lock is held); wait for "
                           "it or write another file"
                         : strerror(errno);
    }
    if (why) {
        snprintf(err, errlen, "%s: cannot open for appending: %s", path, why);
        /* a file this call created but another writer locked first is theirs */
        mq_append_abort(fd, path, *created && !locked_out);
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
    if (close(fd) && !bad) {
        snprintf(err, errlen, "%s: cannot append a row: %s", path, strerror(errno));
        bad = 1;
    }
    return bad ? -1 : 0;
}
