/* csvfile.c - see csvfile.h. Each line is parsed on its own by libcsv in
 * strict mode, so a malformed line is reported with its own line number. */
#include <csv.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csvfile.h"
#include "grow.h"

typedef struct {
    char **fields;
    int n, cap;
    int oom;
} field_acc;

static void on_field(void *s, size_t len, void *data)
{
    field_acc *a = data;
    if (a->oom)
        return;
    if (mq_grow(&a->fields, &a->cap, a->n + 1, sizeof *a->fields, 16)) {
        a->oom = 1;
        return;
    }
    char *copy = malloc(len + 1);
    if (!copy) {
        a->oom = 1;
        return;
    }
    if (len)
        memcpy(copy, s, len);
    copy[len] = '\0';
    a->fields[a->n++] = copy;
}

static void on_row(int c, void *data)
{
    (void)c;
    (void)data;
}

static int push_row(mq_csv_table *t, field_acc *a, int line)
{
    if (mq_grow(&t->rows, &t->rows_cap, t->nrows + 1, sizeof *t->rows, 64))
        return -1;
    t->rows[t->nrows].fields = a->fields;
    t->rows[t->nrows].nfields = a->n;
    t->rows[t->nrows].line = line;
    t->nrows++;
    return 0;
}

static int push_comment(mq_csv_table *t, const char *text, size_t len)
{
    if (mq_grow(&t->comments, &t->comments_cap, t->ncomments + 1, sizeof *t->comments, 8))
        return -1;
    char **c = t->comments;
    c[t->ncomments] = malloc(len + 1);
    if (!c[t->ncomments])
        return -1;
    memcpy(c[t->ncomments], text, len);
    c[t->ncomments][len] = '\0';
    t->ncomments++;
    return 0;
}

static void free_fields(field_acc *a)
{
    for (int i = 0; i < a->n; i++)
        free(a->fields[i]);
    free(a->fields);
}

static int csv_read(const char *path, int torn_ok, mq_csv_table *out, char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    mq_strbuf text = {0};
    int rd = mq_sb_read(&text, f);
    fclose(f);
    if (rd) {
        free(text.s);
        snprintf(err, errlen, "%s: %s", path, text.oom ? "out of memory" : "read error");
        return -1;
    }
    char *buf = text.s;
    size_t len = text.len;
    int line = 0, rc = 0;
    size_t pos = 0;
    while (pos < len && rc == 0) {
        line++;
        size_t end = pos;
        while (end < len && buf[end] != '\n')
            end++;
        if (end == len) {
            if (torn_ok) { /* an append cut short: every whole line before it stands */
                out->torn_line = line;
                out->torn_bytes = len - pos;
                break;
            }
            snprintf(err, errlen, "%s:%d: truncated last line (no newline at the end)", path,
                     line);
            rc = -1;
            break;
        }
        size_t n = end - pos;
        if (memchr(buf + pos, '\0', n)) {
            /* a C string would end at it and cut the field short unseen */
            snprintf(err, errlen, "%s:%d: a NUL byte in the line (not a text CSV file)", path,
                     line);
            rc = -1;
            break;
        }
        if (n && buf[pos + n - 1] == '\r')
            n--;
        if (n == 0) {
            pos = end + 1;
            continue;
        }
        if (buf[pos] == '#') {
            if (push_comment(out, buf + pos + 1, n - 1)) {
                snprintf(err, errlen, "%s: out of memory", path);
                rc = -1;
            }
            pos = end + 1;
            continue;
        }
        struct csv_parser p;
        field_acc a = {0};
        csv_init(&p, CSV_STRICT | CSV_STRICT_FINI);
        size_t used = csv_parse(&p, buf + pos, n, on_field, on_row, &a);
        int bad = used != n || csv_fini(&p, on_field, on_row, &a) != 0;
        int perr = csv_error(&p);
        csv_free(&p);
        if (bad || a.oom) {
            snprintf(err, errlen, "%s:%d: malformed CSV (%s)", path, line,
                     a.oom ? "out of memory" : csv_strerror(perr));
            free_fields(&a);
            rc = -1;
        } else if (push_row(out, &a, line)) {
            free_fields(&a);
            snprintf(err, errlen, "%s: out of memory", path);
            rc = -1;
        }
        pos = end + 1;
    }
    free(buf);
    if (rc)
        mq_csv_free(out);
    return rc;
}

int mq_csv_read(const char *path, mq_csv_table *out, char *err, size_t errlen)
{
    return csv_read(path, 0, out, err, errlen);
}

int mq_csv_read_appended(const char *path, mq_csv_table *out, char *err, size_t errlen)
{
    return csv_read(path, 1, out, err, errlen);
}

void mq_csv_free(mq_csv_table *t)
{
    for (int i = 0; i < t->nrows; i++) {
        for (int j = 0; j < t->rows[i].nfields; j++)
            free(t->rows[i].fields[j]);
        free(t->rows[i].fields);
    }
    for (int i = 0; i < t->ncomments; i++)
        free(t->comments[i]);
    free(t->rows);
    free(t->comments);
    memset(t, 0, sizeof *t);
}

int mq_csv_parse_rows(const mq_csv_table *t, const char *path, int nfields,
                      mq_csv_row_parser parse, void *ctx, char *err, size_t errlen)
{
    for (int i = 1; i < t->nrows; i++) {
        const mq_csv_row *r = &t->rows[i];
        char why[400];
        if (r->nfields != nfields) {
            snprintf(err, errlen, "%s:%d: %d fields, expected %d", path, r->line, r->nfields,
                     nfields);
            return -1;
        }
        if (parse(r->fields, ctx, why, sizeof why)) {
            snprintf(err, errlen, "%s:%d: %s", path, r->line, why);
            return -1;
        }
    }
    return 0;
}

int mq_csv_column(const mq_csv_table *t, const char *name)
{
    if (t->nrows == 0)
        return -1;
    for (int i = 0; i < t->rows[0].nfields; i++)
        if (strcmp(t->rows[0].fields[i], name) == 0)
            return i;
    return -1;
}
