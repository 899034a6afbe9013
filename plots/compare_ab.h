/* compare_ab.h - compare --ab: the verdicts of an A/B night (ab_compare.h)
 * read from a directory of round files, printed, and written as a Markdown
 * report and a history row. */
#ifndef MQ_COMPARE_AB_H
#define MQ_COMPARE_AB_H

/* argv[1] is "--ab". Exit status: 1 a regression, 0 none, 2 bad input. */
int mq_compare_ab_main(int argc, char **argv);

#endif
