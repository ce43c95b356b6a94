#!/usr/bin/env bash
# compare_runs.sh — are two `maskpos reproduce` folders the same, .npy by .npy?
#
#   scripts/compare_runs.sh BEFORE AFTER
#
# Every .npy under BEFORE must exist under AFTER with the same bytes (cmp). Files that only AFTER
# has are listed as new (a new stage adds files; the old ones must not change). With --rows, the
# verdict rows of the two report.md files are compared too, as sorted sets with the wall times
# and "(reused)" marks left out (a changed order is not a difference; a changed number is).
# Exit status: 0 identical, 1 a file differs or is missing, 2 bad arguments.
set -u
rows=0
if [ "${1:-}" = "--rows" ]; then rows=1; shift; fi
if [ $# -ne 2 ] || [ ! -d "$1" ] || [ ! -d "$2" ]; then
    echo "usage: scripts/compare_runs.sh [--rows] BEFORE_DIR AFTER_DIR" >&2
    exit 2
fi
before=$1 after=$2
same=0 differ=0 missing=0 new=0
while IFS= read -r -d '' f; do
    rel=${f#"$before"/}
    if [ ! -f "$after/$rel" ]; then
        echo "missing: $rel"
        missing=$((missing + 1))
    elif cmp -s "$f" "$after/$rel"; then
        same=$((same + 1))
    else
        echo "differs: $rel"
        differ=$((differ + 1))
    fi
done < <(find "$before" -name '*.npy' -print0 | sort -z)
while IFS= read -r -d '' f; do
    rel=${f#"$after"/}
    if [ ! -f "$before/$rel" ]; then
        echo "new:     $rel"
        new=$((new + 1))
    fi
done < <(find "$after" -name '*.npy' -print0 | sort -z)
echo "npy: $same identical, $differ differ, $missing missing, $new new"
status=0
[ $((differ + missing)) -eq 0 ] || status=1
if [ $rows -eq 1 ]; then
    # verdict rows: "| what | expected | measured | verdict |" lines of the first table
    extract() { awk '/^\| quantity \|/{t=1} t&&/^\|/{print} t&&!/^\|/&&NF{exit}' "$1/report.md" | grep -v '^|---' | sort; }
    if diff <(extract "$before") <(extract "$after") > /tmp/compare_runs.$$ 2>&1; then
        echo "report rows: the same set ($(extract "$before" | wc -l) rows)"
    else
        echo "report rows differ (< before, > after):"
        cat /tmp/compare_runs.$$
        status=1
    fi
    rm -f /tmp/compare_runs.$$
fi
exit $status
