#!/usr/bin/env bash
# gpu_check.sh — the GPU parts of issue 26 in one run (≤ 6 minutes on one H100), for a session
# that has a GPU machine (torch with CUDA, transformers, pytest; no network needed):
#   1. build (make -j, the library and the binary);
#   2. python/tests_gpu: the Accumulator on CUDA tensors against the host path;
#   3. python/tests_hf: maskpos.hf.probe on every mkmodel family loaded by transformers, on the GPU,
#      against `maskpos probe` (bounds in the file), bidirectional, bf16;
#   4. bench/accum_gpu.py: Llama-3.1-8B shapes, layers 1-4, 1000 × 1024, bf16, batch 8: HF eager
#      capture alone vs with the Accumulator vs plain PyTorch (target: accum ≤ 1.5 × capture).
# Writes everything under ${OUT:-gpu-check}/ (log.txt, bench.json) and ends with one line
# "gpu_check: tests_gpu rc=N, tests_hf rc=N, bench rc=N". PYTHON=... picks the interpreter.
#   scripts/gpu_check.sh                      (from the repository's root)
#   QUICK=1 scripts/gpu_check.sh              (bench with --n 200: about a fifth of the time)
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-gpu-check}
mkdir -p "$OUT"
log="$OUT/log.txt"
: > "$log"
say() { echo "$*" | tee -a "$log"; }
t0=$(date +%s)
say "== gpu_check $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$log"
"$PY" -c 'import torch, transformers, numpy, pytest; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__, "numpy", numpy.__version__, "pytest", pytest.__version__)' 2>&1 | tee -a "$log"
say "== build"
if ! make -j"$(nproc)" build/maskpos build/libmaskpos.so >> "$log" 2>&1; then
  say "gpu_check: the build failed (see $log)"; exit 1
fi
export MASKPOS_LIB=$PWD/build/libmaskpos.so MASKPOS_BIN=$PWD/build/maskpos PYTHONDONTWRITEBYTECODE=1
say "== python/tests_gpu ($(( $(date +%s) - t0 )) s)"
timeout 120 "$PY" -m pytest -q -s -p no:cacheprovider python/tests_gpu 2>&1 | tail -20 | tee -a "$log"
rc_gpu=${PIPESTATUS[0]}
say "== python/tests_hf ($(( $(date +%s) - t0 )) s)"
timeout 150 "$PY" -m pytest -q -s -p no:cacheprovider python/tests_hf 2>&1 | grep -E "max \||passed|failed|Error|error|assert" | tail -40 | tee -a "$log"
rc_hf=${PIPESTATUS[0]}
say "== bench/accum_gpu.py ($(( $(date +%s) - t0 )) s)"
n=1000
[ "${QUICK:-0}" = 1 ] && n=200
timeout 200 "$PY" bench/accum_gpu.py --n "$n" --out "$OUT/bench.json" 2>&1 | tail -40 | tee -a "$log"
rc_bench=${PIPESTATUS[0]}
say "gpu_check: tests_gpu rc=$rc_gpu, tests_hf rc=$rc_hf, bench rc=$rc_bench ($(( $(date +%s) - t0 )) s)"
