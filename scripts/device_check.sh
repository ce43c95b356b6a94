#!/usr/bin/env bash
# device_check.sh — the GPU checks of issue #36 in one call on the lent GPU machine, from the
# folder scripts/device_bundle.sh packed here (nothing is built there: it has no -dev packages and
# no network). Within 8 minutes (QUICK=1: about 3):
#   1. the machine: GPU, driver, torch, transformers; the CUDA 13 cuBLASLt it has (PyTorch's
#      nvidia-* packages or a CUDA install) and which of the bundle's libraries it lacks;
#   2. the CUDA tests: DIR/tests/test_backend_ops (every op of the CUDA instance against the CPU's,
#      238 shapes) and DIR/tests/test_cuda (every kernel against the CPU's; every family's probe
#      and logits with --device cuda against the CPU's; a run resumed on the GPU);
#   3. compute-sanitizer memcheck on a small probe with --device cuda (on test_cuda's kernels while
#      the plugin has no forward pass);
#   4. the Python GPU tests and the transformers tests of the torch bridge (python/tests_gpu,
#      python/tests_hf) against this bundle's library and binary;
#   5. the speed bench, bench/probe_gpu.py (Figure 5's job: maskpos --device cuda, HF eager capture
#      and lean PyTorch side by side; QUICK: 200 of the 1000 sequences).
# Everything goes to $OUT/device_check.log (OUT: the device tool's folder that comes back; else
# ./device-check-out) and the bench's JSON to $OUT/bench.json; the last line is one summary:
#   device_check: test_backend_ops rc=0, test_cuda rc=0 (P passed, F failed, S skipped), memcheck rc=0, tests_gpu rc=0,
#   tests_hf rc=0, bench rc=0, 412 s
# An rc of 124 means the step ran out of its time.
#
# usage (from the repository root, there): [QUICK=1] scripts/device_check.sh [DIR]   (DIR: device-bundle)
# The device tool's call that runs it is in docs/cuda.md ("the device check").
set -u -o pipefail
cd "$(dirname "$0")/.."
B=${1:-device-bundle}
OUTD=${OUT:-device-check-out}
QUICK=${QUICK:-0}
mkdir -p "$OUTD"
log=$OUTD/device_check.log
: > "$log"
start=$(date +%s)
LIMIT=470
[ "$QUICK" = 1 ] && LIMIT=175
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
say() { echo "$*" | tee -a "$log"; }
elapsed() { echo $(( $(date +%s) - start )); }
# step NAME MAX_SECONDS COMMAND...: runs it under timeout (at most what is left), output to the log
step() {
  local name=$1 max=$2 left
  shift 2
  left=$(( LIMIT - $(elapsed) ))
  if [ "$left" -lt 15 ]; then say "== $name: not run (no time left)"; return 124; fi
  [ "$max" -gt "$left" ] && max=$left
  say "== $name (up to ${max} s; at $(elapsed) s)"
  timeout -k 5 "$max" "$@" 2>&1 | tee -a "$log"
  return "${PIPESTATUS[0]}"
}

[ -x "$B/bin/maskpos" ] || { say "device_check: no $B/bin/maskpos: run scripts/device_bundle.sh here first and carry $B"; exit 2; }
B=$(cd "$B" && pwd)
BIN=$B/bin/maskpos
say "== device_check $(date -u +%FT%TZ) on $(uname -n), QUICK=$QUICK"
head -2 "$B/MANIFEST" | tee -a "$log"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$log" || say "no nvidia-smi"
python3 -c 'import torch, transformers, numpy, pytest; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available(), "transformers", transformers.__version__, "numpy", numpy.__version__)' 2>&1 | tee -a "$log"

# ---- the library path (scripts/device_env.sh): the bundle's libraries this machine lacks, then its CUDA 13 cuBLASLt
. scripts/device_env.sh
export MASKPOS_LIB=$B/lib/libmaskpos.so MASKPOS_BIN=$BIN
"$BIN" --version 2>&1 | tee -a "$log"

# ---- 2. the CUDA tests
step "test_backend_ops" 60 "$B/tests/test_backend_ops"
rc_ops=$?
mark=$(wc -l < "$log")
step "test_cuda" $([ "$QUICK" = 1 ] && echo 80 || echo 150) "$B/tests/test_cuda"
rc_cuda=$?
counts=$(tail -n +"$mark" "$log" | grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' | awk '{print $4, tolower($2)}' | tr '\n' ' ')

# ---- 3. compute-sanitizer memcheck on a small probe with --device cuda
work=$(mktemp -d)
"$BIN" mkmodel --arch llama --layers 2 --dim 64 --heads 4 --kv-heads 2 --vocab 300 "$work/tiny" > /dev/null 2>&1
python3 -c 'import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(0).integers(0, 300, size=(2, 48)).astype(np.int32))' "$work/ids.npy"
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
if [ -z "$san" ]; then
  say "== memcheck: no compute-sanitizer here"; rc_mem=127
elif "$BIN" probe "$work/tiny" --tokens "$work/ids.npy" --out "$work/p0" --device cuda --quiet > "$work/probe_try.txt" 2>&1; then
  step "memcheck: probe --device cuda" 120 "$san" --tool memcheck --error-exitcode 9 --leak-check no \
    "$BIN" probe "$work/tiny" --tokens "$work/ids.npy" --out "$work/p1" --device cuda --probs --per-head --quiet
  rc_mem=$?
else
  say "probe --device cuda is refused ($(cat "$work/probe_try.txt")): memcheck runs test_cuda's kernels instead"
  step "memcheck: test_cuda" 120 "$san" --tool memcheck --error-exitcode 9 --leak-check no "$B/tests/test_cuda"
  rc_mem=$?
fi

# ---- 4. the Python GPU and transformers tests
step "python/tests_gpu" 90 python3 -m pytest -q -s -p no:cacheprovider python/tests_gpu
rc_gpu=$?
step "python/tests_hf" $([ "$QUICK" = 1 ] && echo 60 || echo 150) python3 -m pytest -q -p no:cacheprovider python/tests_hf
rc_hf=$?

# ---- 5. the speed bench
n=1000
[ "$QUICK" = 1 ] && n=200
step "bench/probe_gpu.py --n $n" 400 python3 bench/probe_gpu.py --bin "$BIN" --n "$n" --work "$work/bench" --out "$OUTD/bench.json"
rc_bench=$?
rm -rf "$work" "$libs" "$libs.cache"
say "device_check: test_backend_ops rc=$rc_ops, test_cuda rc=$rc_cuda (${counts% }), memcheck rc=$rc_mem, tests_gpu rc=$rc_gpu, tests_hf rc=$rc_hf, bench rc=$rc_bench, $(elapsed) s"
