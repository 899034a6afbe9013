#!/bin/sh
# nightly-history.sh DIR COMMITS AT VARIANT:FRACTION - a synthetic git history
# for testing the nightly bisect (tests/test_nightly.sh, nightly-eval.sh):
# in DIR (made afresh), a repository holding this project's scripts/ and
# Makefile, a commit "good", then COMMITS commits "step 1".."step COMMITS",
# of which step AT adds .nightly-plant with VARIANT:FRACTION (a PLANT build
# slows that variant in every later commit), and build/compare copied in.
# Run from the project's root; prints the planted commit's hash.
set -eu
[ $# -eq 4 ] || { echo "usage: nightly-history.sh DIR COMMITS AT VARIANT:FRACTION" >&2; exit 2; }
hist=$1 commits=$2 at=$3 spec=$4 root=$(pwd)
rm -rf "$hist" && mkdir -p "$hist"
(
    cd "$hist" && git init -q && git config user.email history@example.com &&
    git config user.name history && cp -r "$root/scripts" "$root/Makefile" . &&
    git add -A && git commit -qm good &&
    c=1 && while [ "$c" -le "$commits" ]; do
        echo "$c" > step.txt
        [ "$c" -eq "$at" ] && echo "$spec" > .nightly-plant
        git add -A && git commit -qm "step $c"
        c=$((c + 1))
    done
) > /dev/null 2>&1
mkdir -p "$hist/build" && cp "$root/build/compare" "$hist/build/compare"
git -C "$hist" log --format=%H -1 --grep="^step $at\$"
