#!/usr/bin/env bash
# device_amx.sh — issue #37's checks on an AMX CPU (the lent GPU machine's 16-core Xeon host), from
# the folder scripts/device_bundle.sh packed (its tests/test_model_amx and tests/test_model_kernels,
# its bin/maskpos): nothing is built there. About 2 minutes:
#   1. the CPU's flags (amx_bf16, amx_tile, avx512_bf16);
#   2. tests/test_model_amx (the instruction against mp_amx_matmul_ref bit for bit, the self-check's
#      line, auto's pick) and tests/test_model_kernels, with 16 OpenMP threads;
#   3. the probe's speed on a 2-layer bf16 model of dim 2048 (mkmodel there), 4 x 512 tokens, each
#      bf16 kernel class this CPU runs (MASKPOS_KERNEL=pairs, tiles, amx-hw) and f32, at 1 and 16
#      threads: the "ran ..." line's tokens/s and the "matmul:" line (which kernel ran);
#   4. the maps of the tiles and pairs classes against each other (scripts/compare_runs.sh-like:
#      max |difference| over max |value|, from numpy).
# Output: $OUT/device_amx.log (else ./device-amx-out), the last line one summary.
# usage (there, from the repository root): scripts/device_amx.sh [DIR]   (DIR: device-bundle)
set -u -o pipefail
cd "$(dirname "$0")/.."
B=$(cd "${1:-device-bundle}" && pwd)
OUTD=${OUT:-device-amx-out}
mkdir -p "$OUTD"
log=$OUTD/device_amx.log
: > "$log"
start=$(date +%s)
say() { echo "$*" | tee -a "$log"; }
export LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} OMP_WAIT_POLICY=passive
BIN=$B/bin/maskpos
# the tests run the binary they were built beside (build/maskpos of this checkout): the bundle's
[ -x build/maskpos ] || { mkdir -p build && ln -s "$BIN" build/maskpos; }
PY=${PY:-python3}
say "== device_amx $(date -u +%FT%TZ): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores"
for f in amx_bf16 amx_tile avx512_bf16; do say "  $f: $(grep -qw $f /proc/cpuinfo && echo yes || echo no)"; done
OMP_NUM_THREADS=16 timeout 120 "$B/tests/test_model_amx" 2>&1 | tee -a "$log"
rc_amx=${PIPESTATUS[0]}
OMP_NUM_THREADS=16 timeout 60 "$B/tests/test_model_kernels" 2>&1 | tail -n 3 | tee -a "$log"
rc_k=${PIPESTATUS[0]}

w=$(mktemp -d)
"$BIN" mkmodel --arch llama --layers 2 --dim 2048 --heads 16 --kv-heads 4 --ffn 5632 --vocab 4096 \
  --dtype bf16 --seed 1 "$w/m" > /dev/null
"$PY" -c 'import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(0).integers(0, 4096, size=(4, 512)).astype(np.int32))' "$w/ids.npy"
for t in 1 16; do
  for k in pairs tiles amx-hw f32; do
    c=bf16; kk=$k
    [ "$k" = f32 ] && { c=f32; kk=""; }
    o=$(MASKPOS_KERNEL=$kk timeout 60 "$BIN" probe "$w/m" --tokens "$w/ids.npy" --layers all --threads $t \
        --compute $c --out "$w/o_${k}_$t" --force 2>&1)
    say "  threads $t, $k: $(echo "$o" | grep -E '^(ran|matmul:)|rror' | tr '\n' ' ')"
  done
done
cmp=$("$PY" - "$w" <<'EOF' 2>&1
import numpy as np, sys, glob, os
w = sys.argv[1]
for k in ("tiles", "amx-hw", "f32"):
    for t in (1, 16):
        d = f"{w}/o_{k}_{t}"
        if not os.path.isdir(d): print(k, t, "missing"); continue
        worst = 0.0
        for f in sorted(glob.glob(f"{w}/o_pairs_1/*.npy")):
            g = os.path.join(d, os.path.basename(f))
            if not os.path.exists(g): continue
            a = np.load(f).astype(np.float64); b = np.load(g).astype(np.float64)
            s = max(float(np.nanmax(np.abs(a))), 1e-30); worst = max(worst, float(np.nanmax(np.abs(a - b))) / s)
        print(f"{k} {t} threads vs pairs 1 thread: max |diff|/max|value| {worst:.2e}")
if os.path.isdir(f"{w}/o_tiles_16"): print("tiles 1 vs 16 threads identical:", all(open(f, 'rb').read() == open(f.replace('o_tiles_1', 'o_tiles_16'), 'rb').read() for f in glob.glob(f"{w}/o_tiles_1/*.npy")))
EOF
)
say "$cmp"
rm -rf "$w"
say "device_amx: test_model_amx rc=$rc_amx, test_model_kernels rc=$rc_k, $(( $(date +%s) - start )) s"
