#!/usr/bin/env bash
# Runs every cmocka test program in BUILD/tests and prints one closing line "N passed, N failed".
# A program that crashes or exits non-zero without a cmocka summary counts as one failure.
set -u
build=${1:-build}
passed=0
failed=0
crashed=()
for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  echo "== $name"
  out=$("$t" 2>&1)
  rc=$?
  printf '%s\n' "$out" | grep -E '^\[ *(RUN|OK|FAILED|PASSED|SKIPPED|ERROR|=+) *\]|^maskpos|error|Error|FAIL' | grep -v '^\[ RUN' | grep -v '^\[       OK' || true
  p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
  f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
  passed=$((passed + p))
  failed=$((failed + f))
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "$name exited with status $rc without a cmocka failure summary:"
    printf '%s\n' "$out" | tail -n 20
    failed=$((failed + 1))
    crashed+=("$name")
  fi
done
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
