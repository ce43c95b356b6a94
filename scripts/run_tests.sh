#!/usr/bin/env bash
# Runs every cmocka test program in BUILD/tests and prints one closing line
# "tests: N passed, N failed, N skipped (N expected, N unexpected)".
# A program that crashes or exits non-zero without a cmocka summary counts as one failure.
# A skipped test (cmocka's [  SKIPPED ]) is expected only when tests/expected_skips.txt allows it
# on this machine (a line "program test condition  # reason"); any other skip makes the run fail,
# like a failure: a test that cannot run here must say so and be allowed, never pass silently.
# Conditions: always | cpu-lacks:FLAG (a /proc/cpuinfo flag) | build-without-mpi | sanitizer-build |
# python-lacks:MODULE (/usr/bin/python3 cannot import it) | cannot-mount (not root, or no tmpfs can be mounted here) |
# no-gpu (nvidia-smi finds no NVIDIA GPU).
set -u
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
allow_file="$here/tests/expected_skips.txt"
passed=0
failed=0
skipped=0
unexpected=0
crashed=()
surprises=()
times=()

# Is condition $1 true for this machine and build?
skip_condition() {
  case "$1" in
    always) return 0 ;;
    cpu-lacks:*) ! grep -qw "${1#cpu-lacks:}" /proc/cpuinfo ;;
    build-without-mpi) ! ldd "$build/maskpos" 2>/dev/null | grep -q 'libmpi' ;;
    sanitizer-build) ldd "$build/maskpos" 2>/dev/null | grep -q 'libasan' ;;
    python-lacks:*) ! /usr/bin/python3 -c "import ${1#python-lacks:}" >/dev/null 2>&1 ;;
    no-gpu) ! nvidia-smi -L >/dev/null 2>&1 ;;
    cannot-mount) ! { [ "$(id -u)" = 0 ] && d=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs "$d" 2>/dev/null &&
                      umount "$d" && rmdir "$d"; } ;;
    *) echo "run_tests.sh: unknown condition '$1' in $allow_file" >&2; return 1 ;;
  esac
}

# Is the skip of test $2 in program $1 allowed here? Prints the reason.
skip_allowed() {
  [ -f "$allow_file" ] || return 1
  local prog t cond reason
  while read -r prog t cond reason; do
    case "$prog" in ''|'#'*) continue ;; esac
    [ "$prog" = "$1" ] || continue
    [ "$t" = "*" ] || [ "$t" = "$2" ] || continue
    if skip_condition "$cond"; then echo "${reason#\# }"; return 0; fi
  done < "$allow_file"
  return 1
}

for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  echo "== $name"
  t0=$(date +%s)
  out=$("$t" 2>&1)
  rc=$?
  secs=$(( $(date +%s) - t0 ))
  times+=("$secs $name")
  printf '%s\n' "$out" | grep -E '^\[ *(RUN|OK|FAILED|PASSED|SKIPPED|ERROR|=+) *\]|^maskpos|error|Error|FAIL' | grep -v '^\[ RUN' | grep -v '^\[       OK' || true
  p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
  f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
  passed=$((passed + p))
  failed=$((failed + f))
  # the skipped tests: cmocka's "[  SKIPPED ] N test(s), listed below:" and the N names after it
  names=$(printf '%s\n' "$out" | awk '/^\[  SKIPPED \] [0-9]+ test\(s\), listed below:/ {n = $4; next}
                                     n > 0 && /^\[  SKIPPED \] / {print $4; n--}')
  for s in $names; do
    skipped=$((skipped + 1))
    if why=$(skip_allowed "$name" "$s"); then
      echo "skipped (expected here: $why): $name $s"
    else
      unexpected=$((unexpected + 1))
      surprises+=("$name $s")
      echo "SKIPPED UNEXPECTEDLY: $name $s (not allowed on this machine by tests/expected_skips.txt)"
    fi
  done
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "$name exited with status $rc without a cmocka failure summary:"
    printf '%s\n' "$out" | tail -n 20
    failed=$((failed + 1))
    crashed+=("$name")
  fi
done
if [ "$unexpected" -gt 0 ]; then
  echo "unexpected skips (install what they need: scripts/setup.sh --test; or allow them in tests/expected_skips.txt with a reason):"
  printf '  %s\n' "${surprises[@]}"
fi
# the slowest programs, for the CI time budget
printf '%s\n' "${times[@]}" | sort -rn | head -n 5 | awk '{printf "slowest: %s %d s\n", $2, $1}'
echo "tests: $passed passed, $failed failed, $skipped skipped ($((skipped - unexpected)) expected, $unexpected unexpected)"
[ "$failed" -eq 0 ] && [ "$unexpected" -eq 0 ]
