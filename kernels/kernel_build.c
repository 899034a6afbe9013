/* kernel_build.c - which kernels this library holds: a checksum the
 * Makefile takes of the kernel sources (kernels/: the planner, the cost
 * model and the CPU model; metal/: the MSL) and of each backend's
 * translation of them (the preludes and translators), passed in as
 * MQ_KERNEL_BUILD. Results rows, tables and models record it, so a table
 * measured on other kernels is known for what it is (mq.h). */
#include "mq.h"

#ifndef MQ_KERNEL_BUILD
#define MQ_KERNEL_BUILD "unknown"
#endif

const char *mq_kernel_build(void) { return MQ_KERNEL_BUILD; }
