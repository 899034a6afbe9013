/* csvfile.c - see csvfile.h. Each line is parsed on its own by libcsv in
 * strict mode, so a malformed line is reported with its own line number. */
#include <csv.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csvfile.h"

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
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 16;
        char **f = realloc(a->fields, sizeof *f * (size_t)cap);
        if (!f) {
            a->oom = 1;
            return;
        }
        a->fields = f;
        a->cap = cap;
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
    mq_csv_row *rows = realloc(t->rows, sizeof *rows * (size_t)(t->nrows + 1));
    if (!rows)
        return -1;
    t->rows = rows;
    rows[t->nrows].fields = a->fields;
    rows[t->nrows].nfields = a->n;
    rows[t->nrows].line = line;
    t->nrows++;
    return 0;
}

static int push_comment(mq_csv_table *t, const char *text, size_t len)
{
    char **c = realloc(t->comments, sizeof *c * (size_t)(t->ncomments + 1));
    if (!c)
        return -1;
    t->comments = c;
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
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 65536 > cap) {
            cap = cap ? 2 * cap : 1 << 20;
            char *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                snprintf(err, errlen, "%s: out of memory", path);
                return -1;
            }
            buf = b;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    int rd_err = ferror(f);
    fclose(f);
    if (rd_err) {
        free(buf);
        snprintf(err, errlen, "%s: read error", path);
        return -1;
    }
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

int mq_csv_column(const mq_csv_table *t, const char *name)
{
    if (t->nrows == 0)
        return -1;
    for (int i = 0; i < t->rows[0].nfields; i++)
        if (strcmp(t->rows[0].fields[i], name) == 0)
            return i;
    return -1;
}
