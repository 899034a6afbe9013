/* version.c - see version.h. MQ_GIT_REV is passed by the Makefile, which
 * rebuilds this file on every build. */
#include <stdio.h>
#include <unistd.h>

#include "version.h"

#ifndef MQ_GIT_REV
#define MQ_GIT_REV "unknown"
#endif

const char *mq_git_rev(void) { return MQ_GIT_REV; }

const char *mq_host_name(void)
{
    static char name[256];
    if (!name[0] && gethostname(name, sizeof name - 1) != 0)
        snprintf(name, sizeof name, "unknown");
    return name;
}
