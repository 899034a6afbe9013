/* gnuplot.c - see gnuplot.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "gnuplot.h"

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

/* Run `gnuplot VARS plots/SCRIPT.gp` for each image format, into
 * OUT/BASE.{png,svg} (OUT made when missing). 0, or -1 with gnuplot's first
 * complaint. */
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
    char slash[4200];
    snprintf(slash, sizeof slash, "%s/", outdir);
    if (mq_make_parent_dirs(slash, err, errlen))
        return -1;
    /* the output directory must take a file before gnuplot is blamed */
    char probe[4300];
    snprintf(probe, sizeof probe, "%s/.plot-probe.%d", outdir, (int)getpid());
    int pfd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (pfd < 0) {
        snprintf(err, errlen, "%s: cannot write there: %s", outdir, strerror(errno));
        return -1;
    }
    close(pfd);
    unlink(probe);
    for (int i = 0; i < 2; i++) {
        char out[4200], tmp[4300], vpath[400], logp[400];
        snprintf(out, sizeof out, "%s/%s.%s", outdir, base, fmts[i]);
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", out, (int)getpid());
        FILE *v = mq_scratch_open(s, fmts[i][0] == 'p' ? "vars-png.gp" : "vars-svg.gp", vpath,
                               sizeof vpath);
        if (!v) {
            snprintf(err, errlen, "%s: cannot write: %s", vpath, strerror(errno));
            return -1;
        }
        mq_gp_string(v, "plotdir", MQ_SOURCE_DIR "/plots");
        mq_gp_string(v, "fmt", fmts[i]);
        mq_gp_string(v, "out", tmp);
        fprintf(v, "width = %d\nheight = %d\n%s", width, height, vars_text);
        fclose(v);
        FILE *lg = mq_scratch_open(s, "gnuplot.log", logp, sizeof logp);
        if (lg)
            fclose(lg);
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
        int have = stat(tmp, &sb) == 0;
        int good = WIFEXITED(st) && WEXITSTATUS(st) == 0 && have && sb.st_size > 0;
        if (!good) {
            /* gnuplot's own complaint: the last line that names an error,
             * else its last line */
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
            int full = statvfs(outdir, &vs) == 0 &&
                       (double)vs.f_bavail * (double)vs.f_frsize < 1024 * 1024;
            char status[64];
            if (WIFEXITED(st))
                snprintf(status, sizeof status, "exit status %d", WEXITSTATUS(st));
            else
                snprintf(status, sizeof status, "killed by signal %d", WTERMSIG(st));
            if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
                snprintf(err, errlen, "cannot run %s (install gnuplot: make deps)", gp);
            else if (full)
                snprintf(err, errlen, "%s: no image written: the disk is full (%s; gnuplot: "
                                      "%s)",
                         out, status, said[0] ? said : "no message");
            else
                snprintf(err, errlen, "gnuplot failed on %s (%s; %s): %s", script_path, status,
                         have ? "its image is empty" : "no image written",
                         said[0] ? said : "no message");
            unlink(tmp);
            return -1;
        }
        if (rename(tmp, out)) {
            snprintf(err, errlen, "%s: cannot write: %s", out, strerror(errno));
            unlink(tmp);
            return -1;
        }
        printf("wrote %s\n", out);
    }
    return 0;
}

