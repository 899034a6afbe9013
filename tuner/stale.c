/* stale.c - see stale.h. */
#include <stdio.h>
#include <string.h>

#include "mq.h"
#include "stale.h"

int mq_stale_check(const char *tool, const char *what, const char *build, int strict)
{
    const char *now = mq_kernel_build();
    if (!strcmp(build, now))
        return 0;
    char was[96];
    if (build[0])
        snprintf(was, sizeof was, "kernel build %s", build);
    else
        snprintf(was, sizeof was, "a kernel build it does not record");
    fprintf(stderr, "%s: %s%s was measured on %s, not this build's %s: its picks may no longer "
                    "be the fastest (rerun tune%s)\n",
            tool, strict ? "" : "warning: ", what, was, now,
            strict ? "" : "; --strict makes this an error");
    return strict ? -1 : 0;
}
