#!/usr/bin/env bash
# Installs the test-only llama.cpp oracle into tests/oracle-llama/node_modules (issue 7):
#   node-llama-cpp   llama.cpp's prebuilt CPU backend as a Node binding (prebuilt binaries ship in
#                    its @node-llama-cpp/* npm packages; nothing is downloaded or compiled at install)
# Version pinned by tests/oracle-llama/package-lock.json. Idempotent: when the installed tree matches
# the lock file and the binding loads, it does nothing.
# Usage: scripts/setup_oracle_llama.sh      (needs node + npm and the npm registry)
# tests/test_model_oracle runs tests/oracle-llama/logits.mjs; without this setup it fails, naming this script.
set -euo pipefail
cd "$(dirname "$0")/../tests/oracle-llama"
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "setup_oracle_llama: '$tool' not found (install Node.js)" >&2; exit 1; }
done
stamp=node_modules/.maskpos-lock-sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
check() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
    node --input-type=module -e 'import("node-llama-cpp").then(m => { if (!m.getLlama) process.exit(1); })' >/dev/null 2>&1
}
if check; then
  echo "setup_oracle_llama: oracle present (tests/oracle-llama/node_modules)"
  exit 0
fi
echo "setup_oracle_llama: npm install in tests/oracle-llama (versions from package-lock.json)"
# The prebuilt CPU binary comes with the package; never fetch or build llama.cpp sources.
# `npm install`, not `npm ci`: the registry mirror serves the Linux binary packages of
# node-llama-cpp but not the Windows/macOS ones, which npm then leaves out of the lock file as
# failed optional dependencies, and `npm ci` refuses such a lock file.
NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --no-audit --no-fund --loglevel=error
echo "$want" > "$stamp"
check || { echo "setup_oracle_llama: installed, but node-llama-cpp does not load" >&2; exit 1; }
echo "setup_oracle_llama: done"
