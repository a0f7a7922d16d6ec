#!/usr/bin/env bash
# Packs binaries and the shared libraries they load into a relocatable tarball:
#   bin/<binaries>   (linked with an $ORIGIN/../lib run path, so they find lib/ themselves)
#   lib/<libraries>  (everything ldd resolves but glibc itself and the NVIDIA driver)
#   MANIFEST         (each file with its origin)
# The result runs on any x86-64 Linux host with glibc >= the build host's and, for CUDA
# builds, only the NVIDIA driver installed.
#
# usage: bundle.sh OUTPUT.tar.gz [--without-cuda-libs] BINARY...
#   --without-cuda-libs  leave out the CUDA toolkit's libraries (cudart, cuBLAS, NCCL, cuDNN):
#                        for hosts that have the toolkit (they are about 800 MB).
set -euo pipefail

output=$1
shift
include_cuda=1
if [ "${1:-}" = "--without-cuda-libs" ]; then
  include_cuda=0
  shift
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
chmod 755 "$stage"  # the unpacked folder's mode: usable by any user, not only the packer
mkdir -p "$stage/bin" "$stage/lib"

# Always present on the target (glibc and the dynamic loader), or owned by the driver.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libcuda\.so|libnvidia-)'
cuda_libs='^(libcudart|libcublas|libcublasLt|libnccl|libcudnn)\.so'

# Copies one library into lib/ once, noting where it came from.
add_library() {
  local name=$1 path=$2
  if [ ! -e "$stage/lib/$name" ]; then
    cp -L "$path" "$stage/lib/$name"
    echo "lib/$name <- $path" >>"$stage/MANIFEST"
  fi
}

# cuDNN 9's libcudnn.so.9 is a shim that loads the graph API, its engines and heuristics
# at run time (dlopen, which ldd does not see), and its runtime-compiled engines (the
# fused attention's) load NVRTC: they travel with it, from the folder it came from.
add_cudnn_runtime() {
  local folder
  folder=$(dirname "$1")
  for library in "$folder"/libcudnn_graph.so.9 "$folder"/libcudnn_engines_precompiled.so.9 \
    "$folder"/libcudnn_engines_runtime_compiled.so.9 "$folder"/libcudnn_heuristic.so.9 \
    "$folder"/libnvrtc.so.[0-9]* "$folder"/libnvrtc-builtins.so.[0-9]*; do
    if [ -e "$library" ]; then add_library "$(basename "$library")" "$library"; fi
  done
}

for binary in "$@"; do
  cp -L "$binary" "$stage/bin/"
  echo "bin/$(basename "$binary") <- $binary" >>"$stage/MANIFEST"
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    if [[ $name =~ $skip ]]; then continue; fi
    if [ "$include_cuda" = 0 ] && [[ $name =~ $cuda_libs ]]; then continue; fi
    add_library "$name" "$path"
    if [[ $name =~ ^libcudnn\.so ]]; then add_cudnn_runtime "$path"; fi
  done
done

tar -C "$stage" -czf "$output" .
