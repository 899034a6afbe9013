/* table_set.c - see table_set.h. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "cli.h"
#include "table_set.h"

const char *const mq_table_set_files[4] = {"table.csv", "table.h", "model.csv", "chip.csv"};

/* Is name one of ours: GEN (STAMP-PID) or GEN-before, as begin and
 * adopt_plain_files make them. Anything else in tables/ (a user's file, a
 * planted `current -> ..`) is never cleaned up, deleted through or
 * published over. */
static int is_generation_name(const char *name)
{
    /* YYYYMMDDTHHMMSSZ-PID, or that and "-before": nothing looser */
    static const char shape[] = "99999999T999999Z-";
    size_t n = strlen(name), i = 0;
    for (; i < sizeof shape - 1; i++)
        if (i >= n || (shape[i] == '9' ? !isdigit((unsigned char)name[i]) : name[i] != shape[i]))
            return 0;
    size_t digits = strspn(name + i, "0123456789");
    if (digits == 0 || digits > 10)
        return 0;
    return !name[i + digits] || !strcmp(name + i + digits, "-before");
}

/* Remove a generation directory: the set's files in it (and temporary files
 * of killed writers), never through a link, never a subdirectory; the
 * directory goes only when nothing else is left in it. */
static void remove_gen(const char *path)
{
    const char *slash = strrchr(path, '/');
    struct stat sb;
    if (!is_generation_name(slash ? slash + 1 : path) || lstat(path, &sb) ||
        !S_ISDIR(sb.st_mode))
        return;
    DIR *d = opendir(path);
    if (d) {
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            int ours = strstr(e->d_name, ".tmp.") != NULL;
            for (int i = 0; i < 4; i++)
                ours |= !strcmp(e->d_name, mq_table_set_files[i]);
            char p[4500];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            if (ours && lstat(p, &sb) == 0 && (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode)))
                unlink(p);
        }
        closedir(d);
    }
    rmdir(path);
}

/* The generation `current` names ("" when none); -1 when `current` is
 * there but is not a link to a generation of this directory. */
static int current_gen(const char *dir, char *gen, size_t n)
{
    char link[4200], path[4500];
    snprintf(link, sizeof link, "%s/tables/current", dir);
    ssize_t len = readlink(link, gen, n - 1);
    gen[len > 0 ? len : 0] = '\0';
    struct stat sb;
    if (len < 0)
        return lstat(link, &sb) == 0 ? -1 : 0; /* a file or directory in its place */
    snprintf(path, sizeof path, "%s/tables/%s", dir, gen);
    if (!is_generation_name(gen) || lstat(path, &sb) || !S_ISDIR(sb.st_mode))
        return -1;
    return 0;
}

static int fsync_path(const char *path, int flags)
{
    int fd = open(path, flags);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int mq_table_set_begin(const char *dir, mq_table_set *ts, char *err, size_t errlen)
{
    memset(ts, 0, sizeof *ts);
    ts->lock_fd = -1;
    snprintf(ts->dir, sizeof ts->dir, "%s", dir);
    char tables[4200], lock[4300];
    snprintf(tables, sizeof tables, "%s/tables/", dir);
    /* a `current` that is not ours: refused before anything is cleaned up
     * or measured, and never deleted through */
    char cur[256];
    if (current_gen(dir, cur, sizeof cur)) {
        snprintf(err, errlen, "%scurrent: not a link to a table generation of this directory "
                              "(it names '%s'); move it away or use another --out-dir",
                 tables, cur);
        return -1;
    }
    if (mq_make_parent_dirs(tables, err, errlen))
        return -1;
    snprintf(lock, sizeof lock, "%s/tables/.lock", dir);
    ts->lock_fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (ts->lock_fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", lock, strerror(errno));
        return -1;
    }
    if (flock(ts->lock_fd, LOCK_EX | LOCK_NB)) {
        snprintf(err, errlen, "%s: another tune is writing this directory (its lock %s is "
                              "held); wait for it or use another --out-dir",
                 dir, lock);
        close(ts->lock_fd);
        ts->lock_fd = -1;
        return -1;
    }
    if (current_gen(dir, cur, sizeof cur)) { /* planted in between: read again under the lock */
        snprintf(err, errlen, "%scurrent: not a link to a table generation of this directory",
                 tables);
        mq_table_set_end(ts);
        return -1;
    }
    /* what killed runs left: every generation but the published one */
    DIR *d = opendir(tables);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (!is_generation_name(e->d_name) || !strcmp(e->d_name, cur))
            continue;
        char p[4500];
        snprintf(p, sizeof p, "%s%s", tables, e->d_name);
        remove_gen(p);
    }
    if (d)
        closedir(d);
    for (int i = 0; i < 4; i++) { /* a stable name's link made by a killed run */
        char name[4400];
        snprintf(name, sizeof name, "%s/%s", dir, mq_table_set_files[i]);
        mq_clean_stale_tmp(name);
    }
    char cur_link[4300];
    snprintf(cur_link, sizeof cur_link, "%scurrent", tables);
    mq_clean_stale_tmp(cur_link);
    /* GEN: the start time and the process, unique on this host */
    time_t now = time(NULL);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", gmtime(&now));
    snprintf(ts->gen, sizeof ts->gen, "%s-%d", stamp, (int)getpid());
    snprintf(ts->gen_path, sizeof ts->gen_path, "%s%s", tables, ts->gen);
    if (mkdir(ts->gen_path, 0755)) {
        snprintf(err, errlen, "%s: cannot create: %s", ts->gen_path, strerror(errno));
        mq_table_set_end(ts);
        return -1;
    }
    return 0;
}

const char *mq_table_set_path(const mq_table_set *ts, const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", ts->gen_path, name);
    return buf;
}

/* Make `path` a symbolic link to `target` in one rename (a link of the
 * same target is left alone). */
static int link_into_place(const char *target, const char *path, char *err, size_t errlen)
{
    char have[4200];
    ssize_t len = readlink(path, have, sizeof have - 1);
    if (len >= 0) {
        have[len] = '\0';
        if (!strcmp(have, target))
            return 0;
    }
    /* a fresh unguessable name (mq_tmp_name): symlink(2) never replaces
     * what is there, so a name taken (planted) is passed over */
    char tmp[4300];
    int made = -1;
    for (int tries = 0; tries < 64 && made; tries++) {
        if (mq_tmp_name(path, tmp, sizeof tmp)) {
            errno = ENAMETOOLONG;
            break;
        }
        made = symlink(target, tmp);
        if (made && errno != EEXIST)
            break;
    }
    if (made || rename(tmp, path)) {
        snprintf(err, errlen, "%s: cannot link it to %s: %s", path, target, strerror(errno));
        if (!made)
            unlink(tmp);
        return -1;
    }
    return 0;
}

/* The stable names DIR/table.csv ... as links through `current` (those
 * already right are left alone; dangling until the first commit). */
static int link_stable_names(const mq_table_set *ts, char *err, size_t errlen)
{
    for (int i = 0; i < 4; i++) {
        char target[256], path[4400];
        snprintf(target, sizeof target, "tables/current/%s", mq_table_set_files[i]);
        snprintf(path, sizeof path, "%s/%s", ts->dir, mq_table_set_files[i]);
        if (link_into_place(target, path, err, errlen))
            return -1;
    }
    return 0;
}

/* The first commit into a DIR that holds a set as plain files (written
 * before this layout): those files become a generation of their own (hard
 * links, no copy), published, and the plain names are replaced by links to
 * the same contents; then the new set is published as usual. A kill at any
 * step leaves the old contents readable under the stable names. */
static int adopt_plain_files(mq_table_set *ts, char *prev, size_t prev_n, char *err,
                             size_t errlen)
{
    int plain[4], any = 0;
    for (int i = 0; i < 4; i++) {
        char path[4400];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", ts->dir, mq_table_set_files[i]);
        plain[i] = lstat(path, &sb) == 0 && S_ISREG(sb.st_mode);
        any |= plain[i];
    }
    if (!any)
        return 0;
    char gen[80], gpath[4300];
    snprintf(gen, sizeof gen, "%s-before", ts->gen);
    snprintf(gpath, sizeof gpath, "%s/tables/%s", ts->dir, gen);
    if (mkdir(gpath, 0755)) {
        snprintf(err, errlen, "%s: cannot create: %s", gpath, strerror(errno));
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        char from[4400], to[4400];
        snprintf(from, sizeof from, "%s/%s", ts->dir, mq_table_set_files[i]);
        snprintf(to, sizeof to, "%s/%s", gpath, mq_table_set_files[i]);
        if (plain[i] && link(from, to)) {
            snprintf(err, errlen, "%s: cannot link it into %s: %s", from, gpath,
                     strerror(errno));
            remove_gen(gpath);
            return -1;
        }
    }
    char cur[4300];
    snprintf(cur, sizeof cur, "%s/tables/current", ts->dir);
    if (fsync_path(gpath, O_RDONLY | O_DIRECTORY) || link_into_place(gen, cur, err, errlen)) {
        remove_gen(gpath);
        return -1;
    }
    if (link_stable_names(ts, err, errlen))
        return -1;
    snprintf(prev, prev_n, "%s", gen);
    return 0;
}

int mq_table_set_commit(mq_table_set *ts, char *err, size_t errlen)
{
    char p[4400];
    for (int i = 0; i < 4; i++) {
        struct stat sb;
        mq_table_set_path(ts, mq_table_set_files[i], p, sizeof p);
        if (stat(p, &sb)) {
            snprintf(err, errlen, "%s: missing from the new table set: %s", p, strerror(errno));
            return -1;
        }
    }
    /* the files are fsynced by their writers; the directory holds their names */
    if (fsync_path(ts->gen_path, O_RDONLY | O_DIRECTORY)) {
        snprintf(err, errlen, "%s: cannot sync: %s", ts->gen_path, strerror(errno));
        return -1;
    }
    char prev[256], cur[4300];
    if (current_gen(ts->dir, prev, sizeof prev)) { /* planted after begin */
        snprintf(err, errlen, "%s/tables/current: not a link to a table generation of this "
                              "directory (it names '%s'); nothing was published",
                 ts->dir, prev);
        return -1;
    }
    if (!prev[0] && adopt_plain_files(ts, prev, sizeof prev, err, errlen))
        return -1;
    snprintf(cur, sizeof cur, "%s/tables/current", ts->dir);
    /* the stable names first: links through `current`, dangling until the
     * first commit, so that the four files appear (or change) together */
    if (link_stable_names(ts, err, errlen))
        return -1;
    /* the commit: one rename */
    if (link_into_place(ts->gen, cur, err, errlen))
        return -1;
    snprintf(p, sizeof p, "%s/tables", ts->dir);
    fsync_path(p, O_RDONLY | O_DIRECTORY);
    if (prev[0] && strcmp(prev, ts->gen)) {
        snprintf(p, sizeof p, "%s/tables/%s", ts->dir, prev);
        remove_gen(p);
    }
    ts->gen_path[0] = '\0'; /* published: abort no longer removes it */
    return 0;
}

void mq_table_set_abort(mq_table_set *ts)
{
    if (ts->gen_path[0])
        remove_gen(ts->gen_path);
    ts->gen_path[0] = '\0';
}

void mq_table_set_end(mq_table_set *ts)
{
    if (ts->lock_fd >= 0)
        close(ts->lock_fd);
    ts->lock_fd = -1;
}
