#!/usr/bin/env bash
# Installs what maskpos needs (run as root; a no-op when everything is present).
#   scripts/setup.sh          Debian packages to build maskpos, run it and build its tests
#   scripts/setup.sh --test   also the test-only tools: Debian's chromium (report.html check) and
#                             the npm test oracles (HF tokenizers, llama.cpp, playwright-core)
#   scripts/setup.sh --bench  also OpenBLAS for bench/probe's f32 PyTorch peer (the system BLAS
#                             stays the reference BLAS: only the peer process is pointed at it) and
#                             oneDNN's headers for bench/amx's engine peer (bench/matmul.c; never
#                             linked into maskpos)
set -euo pipefail
cd "$(dirname "$0")/.."
with_tests=0
with_bench=0
case "${1:-}" in
  --test) with_tests=1 ;;
  --bench) with_bench=1 ;;
  "") ;;
  *) echo "usage: scripts/setup.sh [--test|--bench]" >&2; exit 2 ;;
esac
pkgs=(
  build-essential pkg-config            # compiler, make
  libcmocka-dev                         # C test framework
  libjansson-dev                        # JSON (meta.json, HF config.json)
  libcairo2-dev                         # figures: PNG, PDF, SVG
  fonts-dejavu-core                     # figures: the font their text is set in (DejaVu Sans)
  libpcre2-dev libutf8proc-dev          # tokenizer pre-splitting (UTF+UCP) and NFC
  poppler-utils                         # pdfinfo/pdftoppm: tests check our PDFs
  fortunes                              # tokenizer test corpus: fortune texts (BSD), tests/test_tok.c
  bible-kjv bible-kjv-text              # training corpus of the embedded models: KJV text (public domain), docs/train.md
  python3-numpy python3-torch           # tests/ref reference implementations and bench peers
  libopenmpi-dev openmpi-bin            # make MPI=1: mpirun -np N maskpos probe|simulate|reproduce (docs/mpi.md)
)
test_pkgs=(
  chromium                              # headless browser check of report.html
  clang libclang-rt-14-dev              # libFuzzer runs of the parsers (tests/fuzz)
  strace                                # tests/test_core.c: atomic writes fsync file and folder
  python3-pytest python3-pip python3-setuptools  # python/tests (tests/test_pyapi.c), offline pip install (tests/test_install.c)
  python3-venv                          # tests/test_install.c: the README's install line in a fresh venv
  python3-pandas python3-xarray         # python/tests: Result.to_pandas() and to_xarray() (optional for users)
  python3-yaml                          # python/tests/test_release_files.py: CITATION.cff is valid YAML
  jupyter-nbconvert python3-ipykernel   # python/tests: the example notebook (examples/notebook.ipynb) executed
)
if [ "$with_tests" = 1 ]; then pkgs+=("${test_pkgs[@]}"); fi
if [ "$with_bench" = 1 ]; then pkgs+=(libopenblas0-pthread libdnnl-dev); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi
if [ "$with_bench" = 1 ]; then
  # installing OpenBLAS makes it the system libblas.so.3 (alternatives, priority 100): keep the
  # reference BLAS there, so tests and tests/ref compute as before; bench/probe uses LD_LIBRARY_PATH
  su=""
  [ "$(id -u)" -eq 0 ] || su="sudo"
  for l in blas/libblas.so.3 lapack/liblapack.so.3; do
    n=$(basename "$l")
    f=/usr/lib/x86_64-linux-gnu/$l
    [ -f "$f" ] && $su update-alternatives --quiet --set "$n-x86_64-linux-gnu" "$f" || true
  done
fi
if [ "$with_tests" = 1 ]; then
  # node and npm come with the machine image (Debian's npm package would replace its nodejs).
  command -v npm >/dev/null || { echo "setup: npm not found: install Node.js 20+ with npm" >&2; exit 1; }
  for s in scripts/setup_oracles.sh scripts/setup_oracle_llama.sh; do
    if [ -x "$s" ]; then "$s"; fi
  done
  if [ ! -d tests/browser/node_modules/playwright-core ]; then
    (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
  fi
  echo "setup: test tools ready"
fi
