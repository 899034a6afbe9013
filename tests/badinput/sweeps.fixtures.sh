# sweeps.fixtures.sh - what sweeps.cases needs in the scratch directory
# (sourced by test_badinput.sh with $B the build directory): a file where a
# sweep directory would go. The cases pass --build $B (BUILD=$B to
# sweep-scaling) themselves: the scripts run from the repository.
printf 'a file, not a directory\n' > sweepfile
