/* fuzz_common.c - see fuzz_common.h. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_common.h"

const char *fuzz_file(const char *name, const uint8_t *data, size_t size)
{
    static char path[512];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/mq-fuzz-%d-%s", dir && *dir ? dir : "/tmp", (int)getpid(),
             name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return NULL;
    size_t w = fwrite(data, 1, size, f);
    if (fclose(f) || w != size)
        return NULL;
    return path;
}
