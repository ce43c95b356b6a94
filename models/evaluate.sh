#!/usr/bin/env bash
# Regenerates the measurements quoted in the model cards (models/*/README.md) with maskpos alone.
#   models/evaluate.sh MODEL_DIR CORPUS.txt OUT_DIR
# MODEL_DIR: a checkpoint written by `maskpos train` (config.json + model.safetensors);
# CORPUS.txt: the training text (its last 5 % is the held-out split the trainer never saw).
# Writes into OUT_DIR: probe maps of 400 held-out sequences of 128 tokens (bytes, after BOS for
# a model trained with --bos), causal and bidirectional; the nine Gram matrices of layer 1 -> 2 on 50-byte sequences (figure gram.png);
# the same statistics for the parameter-free decoder at S = 128 for comparison; and prints the
# per-layer tables (NRI, residue, rising rows, mean slope).
set -euo pipefail
model=$1 corpus=$2 out=$3
here=$(cd "$(dirname "$0")/.." && pwd)
mp=${MASKPOS:-$here/build/maskpos}
mkdir -p "$out"
{ # everything printed below also goes to OUT_DIR/summary.txt
# held-out split: the bytes after the first 95 % (the split the trainer never saw), read as one
# document and cut into consecutive rows (--whole --pack); a model trained with --bos gets
# BOS + 127 bytes per row, as in training
size=$(stat -c %s "$corpus")
start=$(( size * 95 / 100 + 1 ))
tail -c +"$((start + 1))" "$corpus" > "$out/heldout.txt"
export OMP_WAIT_POLICY=passive
echo "== probe, causal (400 x 128 held-out bytes)"
"$mp" probe "$model" --data "$out/heldout.txt" --whole --pack --seq 128 --n 400 --layers all --quiet --plot --out "$out/probe" | sed -n '/ layer/,/^wrote/p' | grep -v '^wrote'
echo "== probe, bidirectional (counterfactual)"
"$mp" probe "$model" --data "$out/heldout.txt" --whole --pack --seq 128 --n 400 --layers all --bidirectional --quiet --out "$out/probe-bidir" | sed -n '/ layer/,/^wrote/p' | grep -v '^wrote'
echo "== gram, layer 1 -> 2 (400 x 50 held-out bytes)"
"$mp" gram "$model" --layer 1 --data "$out/heldout.txt" --seq 50 --n 400 --plot --out "$out/gram" > "$out/gram.log"
sed -n '/(a)/,/(i)/p' "$out/gram.log"
echo "== parameter-free decoder at S = 128 (B = 20000), for comparison"
"$mp" simulate --batch 20000 --seq 128 --quiet --out "$out/simulate" | sed -n '/ layer/,/^wrote/p' | grep -v '^wrote'
} 2>&1 | tee "$out/summary.txt"
