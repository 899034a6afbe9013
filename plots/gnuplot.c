/* gnuplot.c - see gnuplot.h. gnuplot itself writes only into the run's
 * private scratch directory (mkdtemp, 0700: nobody can plant a link there);
 * each image is then copied into a temporary file of the output directory
 * that this process made (mkstemp: O_EXCL, never a planted link), put on
 * the disk, and renamed: no file is ever written through a link the tool
 * did not make, and a failure leaves the output directory as it was. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "atomic_file.h"
#include "cli.h"
#include "gnuplot.h"
#include "run_compare.h"

#ifndef MQ_SOURCE_DIR
#define MQ_SOURCE_DIR "."
#endif


/* A fresh temporary directory ($TMPDIR or /tmp) for one plot's files. */
int mq_scratch_make(mq_scratch *s, char *err, size_t errlen)
{
    const char *tmpd = getenv("TMPDIR");
    snprintf(s->dir, sizeof s->dir, "%s/mq-plot-XXXXXX", tmpd && *tmpd ? tmpd : "/tmp");
    if (!mkdtemp(s->dir)) {
        snprintf(err, errlen, "cannot make a temporary directory: %s", strerror(errno));
        return -1;
    }
    return 0;
}

FILE *mq_scratch_open(mq_scratch *s, const char *name, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", s->dir, name);
    if (s->n < 16)
        snprintf(s->names[s->n++], sizeof s->names[0], "%s", name);
    return fopen(path, "w");
}

void mq_scratch_remove(mq_scratch *s)
{
    char path[400];
    for (int i = 0; i < s->n; i++) {
        snprintf(path, sizeof path, "%s/%s", s->dir, s->names[i]);
        unlink(path);
    }
    rmdir(s->dir);
}

/* A gnuplot string literal: double quotes, with \ and " escaped and
 * newlines as \n. */
void mq_gp_string(FILE *f, const char *name, const char *value)
{
    fprintf(f, "%s = \"", name);
    for (const char *c = value; *c; c++) {
        if (*c == '\n')
            fputs("\\n", f);
        else if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else
            fputc(*c, f);
    }
    fputs("\"\n", f);
}

/* The directories of dir, made where missing: m->len[] gets the length
 * of each prefix of m->path this call made (the deepest last), so that a
 * failure later can remove them again. Every one is recorded: a prefix
 * ends at a '/' after a character that is not one, so a path of the
 * buffer's size has fewer prefixes than the table has room for. On failure
 * what it made is removed, and -1 comes back with a message naming the
 * part in the way. */
#define MADE_PATH 4200
typedef struct {
    char path[MADE_PATH];
    int len[MADE_PATH / 2 + 1], n;
} made_dirs;

static void unmake_dirs(made_dirs *m)
{
    /* deepest first; rmdir removes only an empty directory, so anything
     * written there since (by anyone) keeps its directory */
    while (m->n > 0) {
        int l = m->len[--m->n];
        char c = m->path[l];
        m->path[l] = '\0';
        rmdir(m->path);
        m->path[l] = c;
    }
}

static int make_dirs(const char *dir, made_dirs *m, char *err, size_t errlen)
{
    m->n = 0;
    size_t dl = strlen(dir);
    if (dl >= sizeof m->path - 1) {
        snprintf(err, errlen, "%.60s...: path too long", dir);
        return -1;
    }
    snprintf(m->path, sizeof m->path, "%s/", dir);
    for (char *p = m->path + 1; *p; p++) {
        if (*p != '/' || p[-1] == '/')
            continue;
        *p = '\0';
        struct stat sb;
        int e = mkdir(m->path, 0755) ? errno : 0;
        if (!e) {
            m->len[m->n++] = (int)(p - m->path);
        } else if (e && (e != EEXIST || stat(m->path, &sb) || !S_ISDIR(sb.st_mode))) {
            snprintf(err, errlen, "%s: cannot create the directory: %s", m->path,
                     e == EEXIST ? "a file of that name is in the way" : strerror(e));
            *p = '/';
            unmake_dirs(m);
            return -1;
        }
        *p = '/';
    }
    return 0;
}

/* A disk out of room, as the OS says it. */
static int disk_full(int e)
{
    return e == ENOSPC || e == EDQUOT || e == EFBIG;
}

/* Run gnuplot once: VARS (the size, the format and vars_text) and
 * plots/SCRIPT.gp, drawing into image, a file of the scratch directory.
 * 0, or -1 with gnuplot's own complaint (the last line that names an
 * error, else its last line), or that it could not be run. */
static int run_gnuplot(mq_scratch *s, const char *gp, const char *script_path,
                       const char *vars_text, int width, int height, const char *fmt,
                       const char *image, char *err, size_t errlen)
{
    char vpath[400], logp[400], vname[32];
    snprintf(vname, sizeof vname, "vars-%s.gp", fmt);
    FILE *v = mq_scratch_open(s, vname, vpath, sizeof vpath);
    if (!v) {
        snprintf(err, errlen, "%s: cannot write: %s", vpath, strerror(errno));
        return -1;
    }
    mq_gp_string(v, "plotdir", MQ_SOURCE_DIR "/plots");
    mq_gp_string(v, "fmt", fmt);
    mq_gp_string(v, "out", image);
    fprintf(v, "width = %d\nheight = %d\n%s", width, height, vars_text);
    int bad = ferror(v);
    if (fclose(v) || bad) {
        snprintf(err, errlen, "%s: cannot write: %s", vpath, strerror(errno));
        return -1;
    }
    FILE *lg = mq_scratch_open(s, "gnuplot.log", logp, sizeof logp);
    if (lg)
        fclose(lg);
    fflush(stdout); /* nothing buffered is written twice by the child */
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "cannot start gnuplot: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int fd = open(logp, O_WRONLY | O_TRUNC);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
            close(fd);
        }
        execlp(gp, gp, vpath, script_path, (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    struct stat sb;
    int have = stat(image, &sb) == 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && have && sb.st_size > 0)
        return 0;
    char line[512] = "", last[512] = "", said[512] = "";
    FILE *l = fopen(logp, "r");
    while (l && fgets(line, sizeof line, l)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || strspn(line, " ^") == strlen(line))
            continue;
        snprintf(last, sizeof last, "%s", line);
        if (strstr(line, "rror") || strstr(line, "annot"))
            snprintf(said, sizeof said, "%s", line);
    }
    if (l)
        fclose(l);
    if (!said[0])
        snprintf(said, sizeof said, "%s", last);
    struct statvfs vs;
    int full = statvfs(s->dir, &vs) == 0 && (double)vs.f_bavail * (double)vs.f_frsize < 1024 * 1024;
    char status[64];
    if (WIFEXITED(st))
        snprintf(status, sizeof status, "exit status %d", WEXITSTATUS(st));
    else
        snprintf(status, sizeof status, "killed by signal %d", WTERMSIG(st));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        snprintf(err, errlen, "cannot run %s (install gnuplot: make deps)", gp);
    else if (full)
        snprintf(err, errlen, "%s: no image drawn: the disk is full (%s; gnuplot: %s)", s->dir,
                 status, said[0] ? said : "no message");
    else
        snprintf(err, errlen, "gnuplot failed on %s (%s; %s): %s", script_path, status,
                 have ? "its image is empty" : "no image written", said[0] ? said : "no message");
    return -1;
}

/* The image drawn in the scratch directory into to (a temporary file of
 * the output directory, for out, with nothing buffered in its stream),
 * through write(2) and on the disk. -1 with a message: a full disk is said
 * to be. */
static int copy_image(const char *image, FILE *to, const char *out, char *err, size_t errlen)
{
    int from = open(image, O_RDONLY | O_CLOEXEC);
    if (from < 0) {
        snprintf(err, errlen, "%s: cannot read the drawn image: %s", image, strerror(errno));
        return -1;
    }
    char buf[65536];
    int e = 0, fd = fileno(to);
    for (ssize_t n; !e && (n = read(from, buf, sizeof buf)) != 0;) {
        if (n < 0) {
            e = errno == EINTR ? 0 : errno;
            continue;
        }
        for (ssize_t done = 0, w; !e && done < n; done += w > 0 ? w : 0) {
            w = write(fd, buf + done, (size_t)(n - done));
            if (w < 0 && errno != EINTR)
                e = errno;
            else if (w == 0)
                e = ENOSPC;
        }
    }
    close(from);
    if (!e && fsync(fd))
        e = errno;
    if (!e)
        return 0;
    if (disk_full(e))
        snprintf(err, errlen, "%s: no image written: the disk is full (%s)", out, strerror(e));
    else
        snprintf(err, errlen, "%s: cannot write: %s", out, strerror(e));
    return -1;
}

/* Draw PNG and SVG (see gnuplot.h): both outputs checked first (neither
 * may be a directory: a rename onto it would fail after the other image
 * was replaced), the output directory made, both temporary files made in
 * it (it must take a file before gnuplot is blamed), both images drawn and
 * copied in, both files flushed, on the disk and closed, and only then
 * both renamed. On failure the temporary files go, and so do the
 * directories this call made when they are empty. */
int mq_gnuplot_draw(mq_scratch *s, int width, int height, const char *script,
                    const char *vars_text, const char *outdir, const char *base, char *err,
                    size_t errlen)
{
    static const char *const fmts[] = {"png", "svg"};
    const char *gp = getenv("MQ_GNUPLOT");
    if (!gp || !*gp)
        gp = "gnuplot";
    char script_path[4200];
    snprintf(script_path, sizeof script_path, "%s/plots/%s.gp", MQ_SOURCE_DIR, script);
    if (access(script_path, R_OK)) {
        snprintf(err, errlen, "%s: cannot read the plot script: %s", script_path,
                 strerror(errno));
        return -1;
    }
    char out[2][4200], tmp[2][4400], image[2][400];
    for (int i = 0; i < 2; i++) {
        if ((size_t)snprintf(out[i], sizeof out[i], "%s/%s.%s", outdir, base, fmts[i]) >=
            sizeof out[i]) {
            snprintf(err, errlen, "%.200s...: path too long", out[i]);
            return -1;
        }
        if (mq_output_replaceable(out[i], err, errlen))
            return -1;
    }
    static made_dirs made;
    if (make_dirs(outdir, &made, err, errlen))
        return -1;
    FILE *img[2] = {NULL, NULL};
    int have_tmp[2] = {0, 0};
    int rc = 0;
    for (int i = 0; rc == 0 && i < 2; i++) {
        if (!(img[i] = mq_atomic_open(out[i], tmp[i], sizeof tmp[i], err, errlen)))
            rc = -1;
        have_tmp[i] = img[i] != NULL;
    }
    for (int i = 0; rc == 0 && i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "image.%s", fmts[i]);
        FILE *f = mq_scratch_open(s, name, image[i], sizeof image[i]); /* listed for removal */
        if (f)
            fclose(f);
        unlink(image[i]); /* gnuplot makes it: "no image written" when it does not */
        rc = run_gnuplot(s, gp, script_path, vars_text, width, height, fmts[i], image[i], err,
                         errlen);
    }
    for (int i = 0; rc == 0 && i < 2; i++)
        rc = copy_image(image[i], img[i], out[i], err, errlen);
    /* both settled (flushed, on the disk, closed) before either is renamed:
     * a failure here leaves both old images */
    for (int i = 0; rc == 0 && i < 2; i++) {
        errno = 0;
        int e = fflush(img[i]) || ferror(img[i]) ? (errno ? errno : EIO) : 0;
        if (!e && fsync(fileno(img[i])))
            e = errno;
        FILE *f = img[i];
        img[i] = NULL;
        if (fclose(f) && !e)
            e = errno;
        if (e) {
            if (disk_full(e))
                snprintf(err, errlen, "%s: no image written: the disk is full (%s)", out[i],
                         strerror(e));
            else
                snprintf(err, errlen, "%s: cannot write: %s (the old file, if any, is kept)",
                         out[i], strerror(e));
            rc = -1;
        }
    }
    for (int i = 0; rc == 0 && i < 2; i++) {
        if (rename(tmp[i], out[i])) {
            snprintf(err, errlen, "%s: cannot replace: %s (%s)", out[i], strerror(errno),
                     i ? "the new PNG is in place, the old SVG is kept"
                       : "the old files, if any, are kept");
            rc = -1;
        } else {
            have_tmp[i] = 0;
        }
    }
    for (int i = 0; i < 2; i++) {
        if (img[i])
            fclose(img[i]);
        if (have_tmp[i])
            unlink(tmp[i]);
    }
    if (rc) {
        unmake_dirs(&made);
        return -1;
    }
    for (int i = 0; i < 2; i++)
        printf("wrote %s\n", out[i]);
    return 0;
}
