/* metal_source.c - see metal_source.h. Apart from msl_program.c so that
 * what reads a kernel's source needs nothing of the planner (the test
 * suite's stand-in Metal runtime links the executor and this alone). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "metal_source.h"

#ifndef MQ_SOURCE_DIR
#define MQ_SOURCE_DIR "."
#endif

const char *mq_metal_source_dir(void)
{
    const char *d = getenv("MQ_METAL_DIR");
    return d && *d ? d : MQ_SOURCE_DIR "/metal";
}

static char *read_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read the Metal source", path);
        return NULL;
    }
    mq_strbuf b = {0};
    int rd = mq_sb_read(&b, f);
    fclose(f);
    if (rd) {
        snprintf(err, errlen, "%s reading %s", b.oom ? "out of memory" : "a read error", path);
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* Expand #include "x" lines (depth-limited: headers have include guards). */
static int expand(const char *file, int depth, mq_strbuf *out, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", mq_metal_source_dir(), file);
    if (depth > 8) {
        snprintf(err, errlen, "%s: #include nested too deeply", path);
        return -1;
    }
    char *text = read_file(path, err, errlen);
    if (!text)
        return -1;
    int rc = 0;
    for (char *line = text; rc == 0 && *line;) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) + 1 : strlen(line);
        char inc[256];
        if (sscanf(line, " #include \"%255[^\"]\"", inc) == 1)
            rc = expand(inc, depth + 1, out, err, errlen);
        else if (mq_sb_add(out, line, n))
            rc = -1, snprintf(err, errlen, "out of memory reading %s", path);
        line += n;
    }
    free(text);
    return rc;
}

char *mq_metal_source(const char *file, char *err, size_t errlen)
{
    mq_strbuf out = {0};
    int rc = expand(file, 0, &out, err, errlen);
    if (rc == 0 && mq_sb_add(&out, "", 0)) /* an empty file: still a string */
        rc = -1, snprintf(err, errlen, "out of memory reading %s", file);
    if (rc) {
        free(out.s);
        return NULL;
    }
    return out.s;
}
