/* atomic_file.h - writing a file so that readers see the old contents or
 * the new, never half of either: write to PATH.tmp.PID, fsync, rename. */
#ifndef MQ_ATOMIC_FILE_H
#define MQ_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

/* Open PATH.tmp.PID for writing (its name goes to tmp). NULL and a message
 * naming the file when it cannot be created. */
FILE *mq_atomic_open(const char *path, char *tmp, size_t n, char *err, size_t errlen);
/* Flush, fsync, close and rename over path. On any failure the temporary
 * file is removed, path is untouched, and -1 comes back with a message. */
int mq_atomic_commit(FILE *f, const char *tmp, const char *path, char *err, size_t errlen);
/* Give up: close and remove the temporary file. */
void mq_atomic_abort(FILE *f, const char *tmp);

#endif
