/* atomic_file.c - see atomic_file.h. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"

FILE *mq_atomic_open(const char *path, char *tmp, size_t n, char *err, size_t errlen)
{
    snprintf(tmp, n, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
    return f;
}

int mq_atomic_commit(FILE *f, const char *tmp, const char *path, char *err, size_t errlen)
{
    int bad = ferror(f) != 0;
    bad |= fflush(f) != 0;
    bad |= fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno ? errno : EIO));
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
