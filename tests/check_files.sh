#!/bin/sh
# check_files.sh - two lists that make test keeps true, so a new reader or
# writer of files cannot slip in unguarded:
#  1. readers: every source file of the floors that reads a file a user can
#     hand a tool (mq_csv_read, mq_csv_read_appended, fopen for reading) is
#     in tests/fuzz/readers.txt, with the reader function and the fuzz target
#     that covers it; that target's source exists and calls the function,
#     the Makefile's FUZZ_TARGETS builds it and scripts/fuzz.sh runs it (or
#     the line says, after "-", why the file read is not the user's);
#  2. writers: every place that creates a file does it exclusively (mkstemp,
#     mkdtemp, open with O_CREAT|O_EXCL), so no planted file or link is ever
#     written through, or is in tests/file_writers.txt with why it is safe.
# It first proves itself on a copy with a planted unlisted reader and a
# planted fopen(..., "w").
floors="kernels metal backends harness tuner plots"
# the .c files of the floors under ROOT, subfolders (backends/cuda, ...)
# included, relative to ROOT
sources() { (cd "$1" && find $floors -name '*.c' | sort); }

readers_unlisted() { # ROOT: "FILE: reads files but is not in readers.txt"
    for rel in $(sources "$1"); do
        f=$1/$rel
        [ "$rel" = kernels/csvfile.c ] && continue # the reader the others call
        grep -Eq 'mq_csv_read(_appended)?\(|fopen\([^)]*"rb?"\)' "$f" || continue
        grep -q "^$rel|" "$1/tests/fuzz/readers.txt" ||
            echo "$rel: reads files but is not in tests/fuzz/readers.txt (add it with its fuzz target)"
    done
}

# the words of a line starting with $2 in file $1 and of the lines that
# continue it (a backslash at the end): FUZZ_TARGETS in the Makefile, the
# loop of fuzz.sh
listed_words() {
    awk -v start="$2" 'index($0, start) == 1 { on = 1 }
        on { print; last = substr($0, length($0)); if (last != "\\") exit }' "$1" |
        tr -d '\\;' | tr ' =' '\n\n' | grep -v '^do$'
}

readers_unfuzzed() { # ROOT: every listed target exists, calls its reader, is built and run
    built=$(listed_words "$1/Makefile" "FUZZ_TARGETS")
    run=$(listed_words "$1/scripts/fuzz.sh" "for t in")
    grep -v '^#' "$1/tests/fuzz/readers.txt" | while IFS='|' read -r rel fn target; do
        [ -n "$rel" ] || continue
        [ -f "$1/$rel" ] || { echo "$rel: listed in readers.txt but not there"; continue; }
        case $target in -*) continue ;; esac
        src="$1/tests/fuzz/fuzz_$target.c"
        if [ ! -f "$src" ]; then
            echo "$rel: its fuzz target tests/fuzz/fuzz_$target.c does not exist"
        elif ! grep -q "$fn(" "$src"; then
            echo "$rel: tests/fuzz/fuzz_$target.c does not call $fn"
        fi
        printf '%s\n' "$built" | grep -qx "$target" ||
            echo "$rel: fuzz target '$target' is not in the Makefile's FUZZ_TARGETS"
        printf '%s\n' "$run" | grep -qx "$target" ||
            echo "$rel: fuzz target '$target' is not run by scripts/fuzz.sh"
    done
}

# every open(...) and fopen(...) call of a C file, one per line as
# "LINE:TEXT", a call spread over several lines joined into one
calls() {
    awk '{
        if (buf != "") { buf = buf " " $0 }
        else if ($0 ~ /(^|[^a-z_])f?open\(/) { buf = $0; start = NR }
        if (buf != "") {
            t = buf; o = gsub(/\(/, "", t); t = buf; c = gsub(/\)/, "", t)
            if (o <= c) { print start ":" buf; buf = "" }
        }
    }' "$1"
}

writers_unsafe() { # ROOT: creating opens that are neither exclusive nor listed
    for rel in $(sources "$1"); do
        f=$1/$rel
        calls "$f" | grep -E 'fopen\([^,]*, *("[wa]|"r[b]?\+|[^" ])|[^a-z_]open\(.*O_CREAT' |
        while IFS= read -r hit; do
            case $hit in *O_EXCL*) continue ;; esac
            line=${hit#*:}
            listed=0
            while IFS='|' read -r lf pat why; do
                [ "$lf" = "$rel" ] || continue
                case $line in *"$pat"*) listed=1 ;; esac
            done < "$1/tests/file_writers.txt"
            [ $listed -eq 1 ] ||
                echo "$rel:${hit%%:*}: creates a file without O_EXCL (use mq_atomic_open, mq_append_open or mkstemp; or list it in tests/file_writers.txt with why it is safe): $(echo "$line" | sed 's/^ *//')"
        done
    done
}

passed=0; failed=0
check_tree() { # ROOT: the findings, one per line
    readers_unlisted "$1"; readers_unfuzzed "$1"; writers_unsafe "$1"
}

# the check proves itself: a planted reader and a planted writer are found
t=$(mktemp -d)
for dir in $floors tests tests/fuzz scripts; do mkdir -p "$t/$dir"; done
cp Makefile "$t/"; cp scripts/fuzz.sh "$t/scripts/"; cp tests/fuzz/*.c "$t/tests/fuzz/"
cp tests/fuzz/readers.txt "$t/tests/fuzz/"; cp tests/file_writers.txt "$t/tests/"
for rel in $(sources .); do mkdir -p "$t/${rel%/*}"; cp "$rel" "$t/$rel"; done
if [ -n "$(check_tree "$t")" ]; then
    echo "FAIL: the tree's copy should be clean before anything is planted:" >&2
    check_tree "$t" >&2
    failed=$((failed + 1))
else
    passed=$((passed + 1))
fi
printf 'int planted(void) { mq_csv_table t; return mq_csv_read("x", &t, 0, 0); }\n' > "$t/tuner/planted_reader.c"
printf 'void planted(void) { FILE *f = fopen("out.csv", "w"); }\n' > "$t/plots/planted_writer.c"
printf 'int planted2(const char *p)\n{\n    return open(p,\n                O_WRONLY | O_CREAT, 0644);\n}\n' > "$t/tuner/planted_open.c"
found=$(check_tree "$t")
for want in "tuner/planted_reader.c: reads files but is not in" "plots/planted_writer.c:1: creates a file without O_EXCL" \
    "tuner/planted_open.c:3: creates a file without O_EXCL"; do
    case $found in
    *"$want"*) passed=$((passed + 1)) ;;
    *) failed=$((failed + 1)); echo "FAIL: expected the planted file found: '$want' in '$found'" >&2 ;;
    esac
done
sed -i.bak 's/ routing / /' "$t/scripts/fuzz.sh" && rm -f "$t/scripts/fuzz.sh.bak"
case $(check_tree "$t") in
*"fuzz target 'routing' is not run by scripts/fuzz.sh"*) passed=$((passed + 1)) ;;
*) failed=$((failed + 1)); echo "FAIL: expected a target dropped from fuzz.sh found" >&2 ;;
esac
rm -rf "$t"

# the real tree
findings=$(check_tree .)
if [ -n "$findings" ]; then
    printf 'FAIL: %s\n' "$findings" >&2
    failed=$((failed + $(printf '%s\n' "$findings" | grep -c .)))
else
    passed=$((passed + 1))
fi
echo "check_files: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
