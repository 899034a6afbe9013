/* atomic_file.h - writing files so that nothing already written is lost or
 * half-overwritten, and nothing is written through a link:
 *  - whole files: written to PATH.tmp.HOST.PID.XXXXXX (a fresh unguessable
 *    name opened O_CREAT|O_EXCL|O_NOFOLLOW, so never an existing file or a
 *    planted link; HOST marks this host), fsynced, renamed over PATH, so
 *    readers see the old contents or the new, never half of either; the
 *    temporary files of processes that died before their rename are removed
 *    by the next writer of the same file;
 *  - appended files are opened without following a link, must be regular
 *    files, and are locked (flock) so that a second writer is refused;
 *  - files appended row by row (results, history): each row goes in whole or
 *    not at all (a failed or short write is cut back off), and a torn last
 *    row left by a crash is cut off before the next row is appended. */
#ifndef MQ_ATOMIC_FILE_H
#define MQ_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

/* A fresh temporary name beside path, PATH.tmp.HOST.PID.XXXXXX (HOST: 8
 * hex digits of this host's name; XXXXXX unguessable): 0, or -1 when it
 * does not fit in n. For writers that make something other than a file
 * (table_set.c's links), with the same cleanup. */
int mq_tmp_name(const char *path, char *tmp, size_t n);
/* Create a temporary file beside path (mq_tmp_name; O_CREAT|O_EXCL|
 * O_NOFOLLOW, mode 0666 under the umask) for writing; its name goes to tmp.
 * NULL and a message naming the file when it cannot be created. */
FILE *mq_atomic_open(const char *path, char *tmp, size_t n, char *err, size_t errlen);
/* Flush, fsync, close and rename over path. On any failure the temporary
 * file is removed, path is untouched, and -1 comes back with a message
 * naming the file and the OS error. */
int mq_atomic_commit(FILE *f, const char *tmp, const char *path, char *err, size_t errlen);
/* Give up: close and remove the temporary file. */
void mq_atomic_abort(FILE *f, const char *tmp);

/* Open path for appending rows, as its only writer: O_APPEND, never through
 * a symbolic link (O_NOFOLLOW), created (O_EXCL) when absent (*created = 1),
 * refused when it is not a regular file, and locked with flock(LOCK_EX |
 * LOCK_NB): a second writer gets "PATH: cannot open for appending: another
 * process is appending to it ...". The lock lasts until the descriptor is
 * closed. The descriptor, or -1 with a message naming the file. */
int mq_append_open(const char *path, int *created, char *err, size_t errlen);
/* Close fd (-1: nothing) and remove path when this process created it. */
void mq_append_abort(int fd, const char *path, int created);

/* Remove the temporary files and links next to path that this host's
 * writers made (PATH.tmp.HOST.PID.XXXXXX with this host's mark, or the
 * older PATH.tmp.PID[.XXXXXX]) whose process is gone (a writer killed
 * between its write and its rename); another host's are never touched.
 * Returns how many were removed. */
int mq_clean_stale_tmp(const char *path);

/* Append one row (len bytes, ending in '\n') to fd, opened with O_APPEND on
 * path, by this process alone. All of it lands or none: after a failed or
 * short write the file is truncated back to its size before the call. -1
 * and "PATH: cannot append a row: OS ERROR (...)" on failure. */
int mq_append_row(int fd, const char *path, const char *row, size_t len, char *err,
                  size_t errlen);

/* If the file ends in a row without its newline (a write cut short by a
 * crash or a full disk), truncate it back to its last newline. Returns the
 * bytes removed (0: the file was whole), or -1 with a message. */
long mq_cut_torn_tail(int fd, const char *path, char *err, size_t errlen);

/* Append one CSV row of n fields (quoted as libcsv quotes them) to fd,
 * opened by mq_append_open on path: a torn last row is cut off first (its
 * bytes go to *cut when cut is given), the header line (ending in '\n')
 * goes first into an empty file, and the row lands whole or not at all. fd
 * stays open, and locked: the caller closes it, or on failure gives up with
 * mq_append_abort while still holding the lock. -1 with a message naming
 * the file on failure. */
int mq_append_csv_row(int fd, const char *path, const char *header, const char *const *fields,
                      int n, long *cut, char *err, size_t errlen);
#endif
