#!/usr/bin/env bash
# Writes a model card (README.md) and its figures for a model trained by `maskpos train`, from the
# run's own files: the training log (loss curve figure), the final checkpoint's config, and the
# measurements of models/evaluate.sh. Every number in the card is read from those files.
#   models/card.sh NAME RUN_DIR EXPORT_DIR EVAL_DIR WALL_SECONDS THREADS DEST_DIR [FINDINGS.md]
# FINDINGS.md, if given, is a written summary of the tables, inserted under "Findings".
set -euo pipefail
name=$1 run=$2 export=$3 eval=$4 wall=$5 threads=$6 dest=$7 findings=${8:-}
here=$(cd "$(dirname "$0")/.." && pwd)
mp=${MASKPOS:-$here/build/maskpos}
mkdir -p "$dest"
cp "$export/config.json" "$export/model.safetensors" "$dest/"
cp "$run/log.csv" "$dest/train_log.csv"
"$mp" plot --curve "$run/log.csv" --title "$name: training and validation loss (nats per byte)" -o "$dest/loss.png"
cp "$eval/gram/gram.png" "$dest/gram_layer1to2.png"
cp "$eval/probe/scores_diagnorm.png" "$dest/scores_diagnorm.png"
last=$(tail -n 1 "$run/log.csv")
lastval=$(awk -F, 'NR > 1 && $5 != "" {v = $5; s = $1} END {print s " " v}' "$run/log.csv")
steps=$(echo "$last" | cut -d, -f1)
loss=$(echo "$last" | cut -d, -f3)
if grep -q '"bos_token_id": 256' "$dest/config.json"; then
  tok="bytes and a BOS (vocabulary 257: token id = byte value, 256 = BOS; \`maskpos train --bos\`: every training window starts with BOS, as every document does for an LLM tokenizer)"
  window="BOS + 127 bytes" gwin="BOS + 49 bytes"
else
  tok="bytes (vocabulary 256: token id = byte value)"
  window="128 bytes" gwin="50 bytes"
fi
pos=$(grep -q '"no_rope_layers"' "$dest/config.json" && echo "none (NoPE: no positional encoding; model_type \"smollm3\", \"no_rope_layers\": all 0)" || echo "RoPE (theta 10000, HF rotate-half)")
{
  echo "# maskpos embedded model: $name"
  echo
  echo "A small Llama-style decoder trained by \`maskpos train\` for the paper's §4.2 (NoPE) and §5 (RoPE)"
  echo "experiments. The table and the measurements are read from this run's files (models/card.sh);"
  echo "the findings paragraph summarises them."
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| positional encoding | $pos |"
  info=$("$mp" inspect "$dest")
  field() { echo "$info" | sed -n "s/^$1: *//p"; }
  echo "| architecture | $(field layers) layers, hidden $(field 'hidden size'), heads $(field heads), FFN $(field 'ffn size') (SwiGLU), RMSNorm, tied embedding: $(field 'tied embedding') |"
  echo "| parameters | $(field parameters) |"
  echo "| tokenizer | $tok |"
  echo "| data | the King James Bible from Debian's bible-kjv-text (its copyright file: the copyright of the 1611 translation has expired; the \`bible\` program of bible-kjv that prints it is GPL-2+), 4,137,850 bytes printed by \`bible -f \"Gen1:1-Rev22:21\"\` without verse labels; last 5 % held out |"
  echo "| training | $steps steps of 16 windows of $window, AdamW (β 0.9/0.95, weight decay 0.1), peak lr 3e-3, 100 warm-up steps, cosine to 3e-4, clip 1.0, seed 0, $threads thread(s) |"
  echo "| wall time | $wall s on this project's 2-core machine |"
  echo "| final training loss | $loss nats/byte (step $steps) |"
  echo "| final validation loss | $(echo "$lastval" | cut -d' ' -f2) nats/byte (step $(echo "$lastval" | cut -d' ' -f1)) |"
  echo "| weights | model.safetensors: $(field dtypes) |"
  echo
  echo "![loss curve](loss.png)"
  echo
  echo "## What it shows (models/evaluate.sh)"
  echo
  echo "Mean pre-softmax scores over 400 held-out sequences of $window (\`maskpos probe\`), causal"
  echo "and with the mask removed; then the parameter-free decoder at the same S for comparison."
  echo "\"rising rows\": share of query rows whose score rises toward the query; \"mean slope\": score"
  echo "per position (docs/metrics.md)."
  echo
  echo '```'
  cat "$eval/summary.txt"
  echo '```'
  echo
  if [ -n "$findings" ]; then
    echo "## Findings"
    echo
    cat "$findings"
    echo
  fi
  echo "![diagonal-normalised maps](scores_diagnorm.png)"
  echo
  echo "The nine Gram matrices of layer 1 → 2 (paper Figure 3), 400 held-out sequences of $gwin:"
  echo
  echo "![gram](gram_layer1to2.png)"
  echo
  echo "Load it with \`maskpos inspect|probe|gram models/$(basename "$dest")\`."
} > "$dest/README.md"
echo "card: $dest/README.md"
