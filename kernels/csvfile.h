/* csvfile.h - reading CSV files through libcsv, one physical line per
 * record, with the line number of every row kept for error messages.
 * Lines starting with '#' and blank lines are skipped. A NUL byte in a line
 * is an error. A file whose last line has no newline is truncated: an
 * error for files written whole, a torn row to drop for appended ones. */
#ifndef MQ_CSVFILE_H
#define MQ_CSVFILE_H

#include <stddef.h>

typedef struct {
    char **fields;
    int nfields;
    int line;
} mq_csv_row;

typedef struct {
    mq_csv_row *rows;
    int nrows;
    char **comments; /* the text after '#' of comment lines, in order */
    int ncomments;
    int rows_cap, comments_cap; /* allocated room (the reader's) */
    int torn_line;     /* mq_csv_read_appended: the dropped last line, or 0 */
    size_t torn_bytes; /* and its length */
} mq_csv_table;

/* 0 on success; -1 with a one-line message "PATH:LINE: problem" in err. */
int mq_csv_read(const char *path, mq_csv_table *out, char *err, size_t errlen);
/* For files appended row by row (results, history): a last line without its
 * newline (a write cut short) is dropped and reported in torn_line and
 * torn_bytes instead of failing the whole file. */
int mq_csv_read_appended(const char *path, mq_csv_table *out, char *err, size_t errlen);
void mq_csv_free(mq_csv_table *t);

/* Parse the rows after the header (rows 1..) in order: a row without
 * nfields fields, or one that parse rejects (saying why in why), stops the
 * walk with "PATH:LINE: ..." in err. 0, or -1. */
typedef int (*mq_csv_row_parser)(char **fields, void *ctx, char *why, size_t whylen);
int mq_csv_parse_rows(const mq_csv_table *t, const char *path, int nfields,
                      mq_csv_row_parser parse, void *ctx, char *err, size_t errlen);

/* Index of a header name in row 0, or -1. */
int mq_csv_column(const mq_csv_table *t, const char *name);

#endif
