#!/bin/sh
# cli_texts.sh — what every subcommand says about its flags: runs each line of a case list
# (arguments of `maskpos`, one invocation a line: every --help, and bad flags — unknown, missing
# values, values that are not numbers, out of range, words no choice knows, contradictions) and
# records each one's exit status, standard output and standard error.
#
#   scripts/cli_texts.sh BIN CASES OUTDIR
#     BIN     the maskpos binary (e.g. /work/baseline/build-main/maskpos, or build/maskpos)
#     CASES   the case list (tests/fixtures/cli/cases.txt)
#     OUTDIR  gets one file per subcommand, OUTDIR/<command>.txt, each case as
#               $ maskpos ARGS
#               [exit N]
#               --- stdout
#               ...
#               --- stderr
#               ...
# Every case runs in one empty scratch folder (removed after), so a case that would reach a file
# finds none; MASKPOS_CUDA_PLUGIN names a file that is not there, so --device cuda is refused the
# same way whether or not a CUDA plugin was built beside the binary. tests/fixtures/cli/*.txt were written by this script from the binary of main before
# the option tables (see tests/fixtures/cli/README.md); tests/test_cli_texts.c runs it on the
# binary under test and compares.
set -eu
bin=$1
cases=$2
out=$3
mkdir -p "$out"
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac
case "$out" in /*) ;; *) out="$(pwd)/$out" ;; esac
work=$(mktemp -d "${TMPDIR:-/tmp}/maskpos-test-cli.XXXXXX")
MASKPOS_CUDA_PLUGIN=/nonexistent/libmaskpos-cuda.so
export MASKPOS_CUDA_PLUGIN
trap 'rm -rf "$work"' EXIT
rm -f "$out"/*.txt
while IFS= read -r line; do
    [ -n "$line" ] || continue
    cmd=${line%% *}
    f="$out/$cmd.txt"
    rc=0
    # shellcheck disable=SC2086 # the line holds the arguments, quoted as a shell would take them
    (cd "$work" && eval "exec timeout 60 \"\$bin\" $line") >"$work/.o" 2>"$work/.e" </dev/null || rc=$?
    {
        printf '$ maskpos %s\n[exit %d]\n--- stdout\n' "$line" "$rc"
        cat "$work/.o"
        printf -- '--- stderr\n'
        cat "$work/.e"
    } >>"$f"
    rm -f "$work/.o" "$work/.e"
    if [ -n "$(ls -A "$work")" ]; then
        echo "cli_texts.sh: '$line' left files behind: $(ls -A "$work")" >&2
        exit 1
    fi
done <"$cases"
