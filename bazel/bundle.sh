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

for binary in "$@"; do
  cp -L "$binary" "$stage/bin/"
  echo "bin/$(basename "$binary") <- $binary" >>"$stage/MANIFEST"
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    if [[ $name =~ $skip ]]; then continue; fi
    if [ "$include_cuda" = 0 ] && [[ $name =~ $cuda_libs ]]; then continue; fi
    if [ ! -e "$stage/lib/$name" ]; then
      cp -L "$path" "$stage/lib/$name"
      echo "lib/$name <- $path" >>"$stage/MANIFEST"
    fi
  done
done

tar -C "$stage" -czf "$output" .
