/* version.h - what build produced a result: the tool's version, the git
 * revision it was built from, and the machine it ran on. */
#ifndef MQ_VERSION_H
#define MQ_VERSION_H

#define MQ_TOOL_VERSION "0.2.0"

const char *mq_git_rev(void);   /* revision at build time ("-dirty" when modified) */
const char *mq_host_name(void); /* this machine's host name */

#endif
