/* gnuplot.h - running the gnuplot scripts of plots/: a scratch directory
 * for a plot's data and variables, gnuplot string literals, and the run
 * that draws PNG and SVG to temporary names and renames them into place. */
#ifndef MQ_GNUPLOT_H
#define MQ_GNUPLOT_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    char dir[256]; /* the temporary directory of this run */
    char names[16][64];
    int n;
} mq_scratch;

/* A fresh temporary directory ($TMPDIR or /tmp) for one plot's files. */
int mq_scratch_make(mq_scratch *s, char *err, size_t errlen);
/* Create NAME in it (its path to path); NULL when it cannot be written. */
FILE *mq_scratch_open(mq_scratch *s, const char *name, char *path, size_t n);
/* Remove the files and the directory. */
void mq_scratch_remove(mq_scratch *s);
/* `name = "value"` as a gnuplot string literal (\\, \" and newlines escaped). */
void mq_gp_string(FILE *f, const char *name, const char *value);
/* Run `gnuplot VARS plots/SCRIPT.gp` for PNG and SVG into OUTDIR/BASE.{png,svg}
 * (OUTDIR made when missing). gnuplot draws into the scratch directory; each
 * image is copied into a temporary file that this process made in OUTDIR
 * (mkstemp: never through a planted link), put on the disk, and renamed
 * once both are there and closed. An output that is a directory is refused
 * before anything is made or drawn. 0 ("wrote ..." on stdout), or -1 with
 * gnuplot's own complaint, or that the disk is full: then no image is
 * replaced, and the directories this call made are removed when empty.
 * $MQ_GNUPLOT names another gnuplot. */
int mq_gnuplot_draw(mq_scratch *s, int width, int height, const char *script,
                    const char *vars_text, const char *outdir, const char *base, char *err,
                    size_t errlen);

#endif
