# device_env.sh — sourced by the scripts run on the lent GPU machine (device_check.sh,
# device_profile.sh): puts on LD_LIBRARY_PATH the libraries of the bundle $B (scripts/device_bundle.sh)
# that machine lacks — its own newer ones win — then the folder of the CUDA 13 libcublasLt it has
# (PyTorch's nvidia-* packages, or a CUDA install). Needs B (the bundle's absolute path) and say()
# (a logging echo); leaves libs (a temporary folder of links: the caller removes "$libs" "$libs.cache").
cublas=""
for d in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
  cublas=$(find "$d" -name 'libcublasLt.so.13*' 2>/dev/null | head -n 1)
  [ -n "$cublas" ] && break
done
[ -z "$cublas" ] && cublas=$(ls /usr/local/cuda*/lib64/libcublasLt.so.13* /usr/local/cuda*/targets/*/lib/libcublasLt.so.13* 2>/dev/null | head -n 1)
[ -z "$cublas" ] && cublas=$(timeout 30 find / -xdev -name 'libcublasLt.so.13*' 2>/dev/null | head -n 1)
say "cuBLASLt: ${cublas:-NOT FOUND}"
libs=$(mktemp -d)
ldconfig -p > "$libs.cache" 2>/dev/null
missing=""
for f in "$B"/lib/*; do
  n=$(basename "$f")
  case "$n" in
    libmaskpos*) ln -s "$f" "$libs/$n" ;;
    *) if ! grep -qF "	$n " "$libs.cache"; then ln -s "$f" "$libs/$n"; missing="$missing $n"; fi ;;
  esac
done
say "bundle libraries this machine lacks (from the bundle):${missing:- none}"
export LD_LIBRARY_PATH=$libs${cublas:+:$(dirname "$cublas")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
