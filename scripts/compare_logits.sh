#!/usr/bin/env bash
# compare_logits.sh — do two maskpos binaries compute the same bytes? logits of every family (HF
# and GGUF, f32 and bf16 weights, --compute f32 and bf16), generate and gram.
#
#   scripts/compare_logits.sh BEFORE_BIN AFTER_BIN [WORKDIR]
#
# Models are written once by BEFORE_BIN's `mkmodel` (random weights, 3 layers, vocab 300; every
# family of `mkmodel --help`, plus variants that reach other paths of the forward pass: llama3 and
# longrope RoPE scaling, partial rotary, a sliding window shorter than the sequence, no soft-cap,
# GQA 8/2, sequential gptneox, quantised GGUF). Each binary then writes `logits --out` (float64
# log-probabilities of every position of 40 tokens, 2 threads), `generate --out` (4 sequences of
# 24 sampled ids, 2 threads: the key/value cache and the sequence-parallel workers) and `gram`
# (the plain compute mode) for each, and the files are compared with cmp. A family that a format
# cannot hold (mkmodel refuses it) is listed as skipped.
# Exit status: 0 every file identical, 1 a file differs or a run failed, 2 bad arguments.
# Takes about 2-4 minutes on 2 cores.
set -u
if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
    echo "usage: scripts/compare_logits.sh BEFORE_BIN AFTER_BIN [WORKDIR]" >&2
    exit 2
fi
before=$1 after=$2
work=${3:-$(mktemp -d /tmp/maskpos-compare-logits.XXXXXX)}
mkdir -p "$work/models" "$work/a" "$work/b"
tokens=$(seq -s, 3 7 283) # 40 ids in [0, 300)
same=0 differ=0 failed=0 skipped=0

# name | gram (g: gram runs it: the Llama block, no window under 24) | mkmodel options (every
# model: vocab 300, seed 7, 3 layers unless it says)
models=(
    "llama|g|--arch llama --heads 8 --kv-heads 2"
    "llama3|g|--arch llama --rope-scaling llama3"
    "mistral|g|--arch mistral --sliding-window 16"
    "qwen2|g|--arch qwen2"
    "qwen2win|-|--arch qwen2 --sliding-window 16"
    "qwen3|g|--arch qwen3"
    "phi3|g|--arch phi3 --rope-scaling longrope"
    "phi3part|g|--arch phi3 --partial-rotary 0.5"
    "olmo2|-|--arch olmo2"
    "gptneox|-|--arch gptneox"
    "gptneoxseq|-|--arch gptneox --no-parallel-residual --partial-rotary 0.5"
    "gemma|g|--arch gemma"
    "gemma2|-|--arch gemma2 --sliding-window 16"
    "gemma2nocap|g|--arch gemma2 --attn-softcap 0 --final-softcap 0"
    "gemma3|-|--arch gemma3 --layers 6 --sliding-window 16"
    "mixtral|-|--arch mixtral"
    "qwen3moe|-|--arch qwen3moe --moe-ffn 64"
    "qwen2moe|-|--arch qwen2moe --moe-ffn 64"
)

# run TAG OUT CMD...: runs CMD with both binaries into a/OUT and b/OUT, compares them.
run() {
    local tag=$1 out=$2
    shift 2
    if ! "$before" "$@" --out "$work/a/$out" >"$work/a/$out.log" 2>&1; then
        echo "failed (before): $tag: $(tail -1 "$work/a/$out.log")"
        failed=$((failed + 1))
        return
    fi
    if ! "$after" "$@" --out "$work/b/$out" >"$work/b/$out.log" 2>&1; then
        echo "failed (after):  $tag: $(tail -1 "$work/b/$out.log")"
        failed=$((failed + 1))
        return
    fi
    local fa=$work/a/$out fb=$work/b/$out
    if [ -d "$fa" ]; then fa=$fa/gram.npy fb=$fb/gram.npy; fi
    if cmp -s "$fa" "$fb"; then
        same=$((same + 1))
    else
        echo "differs: $tag"
        differ=$((differ + 1))
    fi
}

for entry in "${models[@]}"; do
    name=${entry%%|*} rest=${entry#*|}
    gram=${rest%%|*} opts=${rest#*|}
    for fmt in hf gguf; do
        for dt in f32 bf16 q8_0; do
            [ "$fmt" = hf ] && [ "$dt" = q8_0 ] && continue
            m=$work/models/$name-$fmt-$dt
            [ "$fmt" = gguf ] && m=$m.gguf
            layers="--layers 3"
            case "$opts" in *--layers*) layers= ;; esac
            # shellcheck disable=SC2086
            if [ ! -e "$m" ] && ! "$before" mkmodel $opts $layers --vocab 300 --seed 7 --format "$fmt" --dtype "$dt" "$m" \
                >"$work/models/$name-$fmt-$dt.log" 2>&1; then
                [ "$dt" = f32 ] && echo "skipped: $name $fmt: $(tail -1 "$work/models/$name-$fmt-$dt.log")"
                skipped=$((skipped + 1))
                continue
            fi
            for comp in f32 bf16; do
                run "logits $name $fmt $dt --compute $comp" "logits-$name-$fmt-$dt-$comp.npy" \
                    logits "$m" --tokens "$tokens" --threads 2 --compute "$comp" --allow-long
            done
            if [ "$dt" = f32 ]; then
                run "generate $name $fmt" "gen-$name-$fmt.npy" generate "$m" --n 4 --len 24 --seed 3 --threads 2 --quiet \
                    --prompt-ids 1,2,3
                # gram reads sequences written by generate: the first model's ids serve every model (vocab 300)
                [ -f "$work/gen-tokens.npy" ] || cp "$work/a/gen-$name-$fmt.npy" "$work/gen-tokens.npy"
                [ "$gram" = g ] && run "gram $name $fmt" "gram-$name-$fmt" gram "$m" --layer 1 --tokens "$work/gen-tokens.npy" --seq 24 --n 4 \
                    --threads 2
            fi
        done
    done
done
echo "compared: $same identical, $differ differ, $failed failed runs, $skipped model files not written (format)"
[ "$differ" -eq 0 ] && [ "$failed" -eq 0 ]
