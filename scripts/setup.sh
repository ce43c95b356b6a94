#!/usr/bin/env bash
# Installs the Debian packages maskpos needs to build, test and benchmark (run as root).
# A no-op when everything is present. Usage: scripts/setup.sh
set -euo pipefail
pkgs=(
  build-essential pkg-config            # compiler, make
  libcmocka-dev                         # C test framework
  libjansson-dev                        # JSON (meta.json, HF config.json)
  libcairo2-dev                         # figures: PNG, PDF, SVG
  fonts-dejavu-core                     # figures: the font their text is set in (DejaVu Sans)
  libpcre2-dev libutf8proc-dev          # tokenizer pre-splitting (UTF+UCP) and NFC
  poppler-utils                         # pdfinfo/pdftoppm: tests check our PDFs
  fortunes                              # tokenizer test corpus: fortune texts (BSD), tests/test_tok.c
  python3-numpy python3-torch           # tests/ref reference implementations and bench peers
)
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
