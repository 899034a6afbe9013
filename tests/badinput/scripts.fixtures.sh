# scripts.fixtures.sh - what scripts.cases needs in the scratch directory
# (sourced by test_badinput.sh with $B the build directory): files where
# nightly.sh and install.sh would make a directory, a file that is not a
# program, and build directories without the built tools.
printf 'a file, not a directory\n' > nightly-file
printf '#!/bin/sh\n' > nightly-notexec                         # not executable
printf 'a file, not a directory\n' > inst-file
mkdir -p inst-blocked/bin/mq-bench                              # a directory where a tool goes
mkdir -p inst-emptybuild inst-partbuild
for f in libmq.a kernel-bench bench merge tune compare; do     # every tool but plot
    printf 'x\n' > "inst-partbuild/$f"
done
