/* from_results.h - tune --from-results: the rows of several results files
 * in one set, checked to be one chip's rows of one backend and one build,
 * and the suite of their shapes when none is given. */
#ifndef MQ_FROM_RESULTS_H
#define MQ_FROM_RESULTS_H

#include <stddef.h>

#include "results.h"
#include "suites.h"

/* Every file's rows in one set (each loaded and validated as any results
 * file). 0 or -1 with a message. */
int mq_from_results_load(const char *const *files, int nfiles, mq_results *all, char *err,
                         size_t errlen);
/* The chip's rows of the group: their backend and kernel build into
 * backend and kbuild; -1 with a message when the chip has no rows, or its
 * rows mix backends or builds (merge says which). */
int mq_from_results_check(const mq_results *all, const char *chip, int group,
                          const char *first_file, int nfiles, const char **backend,
                          const char **kbuild, char *err, size_t errlen);
/* The distinct shapes of the chip's rows of backend (of *formats when
 * formats_given; else their formats go to *formats). -1 on out of memory. */
int mq_from_results_suite(const mq_results *all, const char *chip, const char *backend,
                          int formats_given, unsigned *formats, mq_suite *suite);

#endif
