#!/usr/bin/env bash
# device_bundle.sh — builds maskpos with the CUDA plugin here (make CUDA=1) and packs what the lent
# GPU machine lacks into one git-ignored folder that the device tool carries (docs/cuda.md, "the
# device check"): that machine has the NVIDIA driver, CUDA 13 (cuBLAS in its PyTorch's nvidia-*
# packages) and Python with torch and transformers, but no development packages of our
# dependencies (cairo, jansson, PCRE2, utf8proc) and no network, so `make` cannot run there.
#
#   DIR/bin/maskpos                 the ordinary binary
#   DIR/lib/libmaskpos.so*          the library (what Python's MASKPOS_LIB points at)
#   DIR/lib/libmaskpos-cuda.so      the plugin (beside libmaskpos.so, found by both)
#   DIR/lib/*.so*                   every shared library they resolve here but glibc's own and the
#                                   CUDA libraries (cuBLASLt is 516 MB: the GPU machine's is used)
#   DIR/tests/test_cuda             the kernels' test program, and the end-to-end comparisons
#   DIR/tests/test_backend_ops      every op of the CUDA instance against the CPU's (tests/test_backend_ops.c)
#   DIR/MANIFEST                    what was packed, from which commit, and the sizes
# scripts/device_check.sh, run there, puts only the libraries that machine does not have on the
# library path (its own newer ones win), then the CUDA 13 folder it finds.
#
# usage: scripts/device_bundle.sh [DIR]      (default: device-bundle, listed in .gitignore)
# Cost: the CUDA=1 build (about 3 minutes from clean on 2 cores), a few seconds to pack; the folder
# is about 20 MB (the device tool carries 64 MiB with the working tree).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-device-bundle}
JOBS=${JOBS:-$(nproc)}
make -s -j"$JOBS" CUDA=1 build/maskpos build/libmaskpos.so build/libmaskpos-cuda.so build/tests/test_cuda build/tests/test_backend_ops >/dev/null
rm -rf "$DIR"
mkdir -p "$DIR/bin" "$DIR/lib" "$DIR/tests"
cp build/maskpos "$DIR/bin/"
cp -P build/libmaskpos.so build/libmaskpos.so.* "$DIR/lib/"
cp build/libmaskpos-cuda.so "$DIR/lib/"
cp build/tests/test_cuda build/tests/test_backend_ops "$DIR/tests/"

# glibc's own libraries come with every Linux; the CUDA ones come with the GPU machine
skip_lib() {
  case "$1" in
    linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libutil.so*|libresolv.so*) return 0 ;;
    libcublas*|libcudart*|libcuda.so*|libnvidia*|libnvrtc*|libnvJitLink*) return 0 ;;
  esac
  return 1
}
for f in "$DIR/bin/maskpos" "$DIR/lib/libmaskpos.so" "$DIR/lib/libmaskpos-cuda.so" "$DIR"/tests/*; do
  ldd "$f" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    skip_lib "$name" && continue
    [ -e "$DIR/lib/$name" ] || cp -L "$path" "$DIR/lib/$name"
  done
done
{
  echo "# device-bundle of maskpos $(git describe --always --dirty 2>/dev/null || echo '?'), built $(date -u +%FT%TZ) on $(uname -n)"
  echo "# plugin: $(strings build/libmaskpos-cuda.so | grep '^CUDA [0-9]' | head -n 1 || true)"
  (cd "$DIR" && find . -type f -printf '%s %p\n' | sort -k2)
} > "$DIR/MANIFEST"
total=$(du -sm "$DIR" | cut -f1)
echo "device_bundle: $DIR ($total MiB, $(ls "$DIR/lib" | wc -l) libraries): run scripts/device_check.sh $DIR on the GPU machine (docs/cuda.md)"
[ "$total" -lt 48 ] || { echo "device_bundle: $DIR is $total MiB: too close to the device tool's 64 MiB" >&2; exit 1; }
