#!/usr/bin/env bash
# device_profile.sh — where the time of `probe --device cuda` goes, on the lent GPU machine, from
# the bundle of scripts/device_bundle.sh (nothing built there). About 1-2 minutes:
#   1. the Figure-5 model (Llama-3.1-8B shapes, 4 layers, bf16; mkmodel there) and N x 1024 ids;
#   2. the probe's forward seconds (meta.json's compute_time_s) for: the default (--layers 1-4, the
#      device's sums), --layers 4 (the same forward, one layer summed: the sums of one layer cost
#      (T(1-4) - T(4)) / 3, the forward T(4) minus that), MASKPOS_DEVICE_SUMS=host (each layer's
#      map to the host, summed there), and --per-head --probs (every head's sums and the
#      probabilities on the device);
#   3. the GPU's utilisation during the default run (nvidia-smi every 100 ms): low means the host
#      or the transfers hold the GPU up;
#   4. when Nsight Systems is there (nsys), one profiled default run: the GPU kernels' and the CUDA
#      API's time tables (cuda_gpu_kern_sum, cuda_api_sum), the top rows.
# Output: $OUT/device_profile.log (else ./device-profile-out); the last line one summary.
# usage (there, from the repository root): [N=64] scripts/device_profile.sh [DIR]   (DIR: device-bundle)
set -u -o pipefail
cd "$(dirname "$0")/.."
B=$(cd "${1:-device-bundle}" && pwd)
OUTD=${OUT:-device-profile-out}
N=${N:-64}
mkdir -p "$OUTD"
log=$OUTD/device_profile.log
: > "$log"
start=$(date +%s)
say() { echo "$*" | tee -a "$log"; }
. scripts/device_env.sh
BIN=$B/bin/maskpos
w=$(mktemp -d)
"$BIN" mkmodel --arch llama --layers 4 --dim 4096 --heads 32 --kv-heads 8 --head-dim 128 --ffn 14336 --vocab 128256 \
  --dtype bf16 --rope-scaling llama3 --rope-theta 500000 --tie --seed 1 "$w/m" > /dev/null
python3 -c 'import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(0).integers(0, 128256, size=(int(sys.argv[2]), 1024)).astype(np.int32))' "$w/ids.npy" "$N"
secs() { python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["compute_time_s"], m["device"] if isinstance(m["device"], str) else m["device"]["name"])' "$1/meta.json"; }
probe() { # name, env..., -- extra flags
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  if { TIMEFORMAT='%R %U %S'; time env "${envs[@]}" timeout 200 "$BIN" probe "$w/m" --tokens "$w/ids.npy" --compute bf16 \
       --device cuda --out "$w/o_$name" --force --quiet "$@" > "$w/err_$name" 2>&1; } 2> "$w/time_$name"; then
    say "  $name: $(secs "$w/o_$name") s for $N x 1024 tokens; the process: wall, user, sys $(tail -n 1 "$w/time_$name") s"
  else
    say "  $name: failed: $(tail -n 2 "$w/err_$name")"
  fi
}
say "== device_profile $(date -u +%FT%TZ), N=$N"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$log"
probe warm -- --layers 1-4 # the first run (the page cache, the GPU's clocks)
nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 > "$w/util.txt" 2>/dev/null &
smi=$!
probe default -- --layers 1-4
kill "$smi" 2>/dev/null
say "  GPU utilisation during the default run (nvidia-smi, every 100 ms): mean $(awk '{s += $1; n++} END {if (n) printf "%.0f%% of %d samples", s / n, n}' "$w/util.txt")"
probe layer4 -- --layers 4
probe hostsums MASKPOS_DEVICE_SUMS=host -- --layers 1-4
probe perhead_probs -- --layers 1-4 --per-head --probs
nsys=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -n 1)
if [ -n "$nsys" ]; then
  say "== $nsys"
  timeout 200 "$nsys" profile -t cuda --stats=false -o "$w/prof" "$BIN" probe "$w/m" --tokens "$w/ids.npy" --layers 1-4 \
    --compute bf16 --device cuda --out "$w/o_prof" --force --quiet > "$w/nsys.txt" 2>&1 || tail -n 5 "$w/nsys.txt" | tee -a "$log"
  for r in cuda_gpu_kern_sum cuda_api_sum cuda_gpu_mem_time_sum; do
    timeout 60 "$nsys" stats --report "$r" --format table "$w/prof.nsys-rep" 2>&1 | head -n 30 | tee -a "$log"
  done
else
  say "== no nsys here"
fi
rm -rf "$w" "$libs" "$libs.cache"
say "device_profile: $(( $(date +%s) - start )) s"
