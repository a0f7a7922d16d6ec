#!/usr/bin/env bash
# Builds a Shardwise container image from scratch with buildah: no base image, no registry,
# no pull. The image holds the relocatable bundle (bazel build [--config=cuda] //:bundle:
# the coordinator, the worker, the CLI and every library they load) under /opt/shardwise,
# the few glibc files the bundle leaves to the host, a non-root user, and nothing else: no
# shell, no package manager.
#
# usage: deploy/images/build.sh BUNDLE.tar.gz IMAGE_NAME
#   e.g. deploy/images/build.sh bazel-bin/shardwise-bundle.tar.gz localhost/shardwise-cpu:dev
#
# The glibc files are taken from this (Debian 12) machine: the bundle's binaries were linked
# against exactly that glibc. A CUDA bundle's libcuda comes from the GPU host's driver
# (the NVIDIA container toolkit mounts it); the image carries cudart, cuBLAS, NCCL, and
# cuDNN with the engine libraries and NVRTC it loads at run time.
set -euo pipefail

bundle=$1
image=$2
readonly UID_GID=65532  # "shardwise"; any non-root id the cluster's policy accepts works

# The image's data and state folders belong to that user: giving them needs root (rootless
# buildah would need subordinate ids this script does not set up).
if [ "$(id -u)" -ne 0 ]; then
  echo "deploy/images/build.sh: needs root (the image's folders are chowned to uid $UID_GID);" \
    "run it as root or with sudo" >&2
  exit 1
fi

stage=$(mktemp -d)
container=""
cleanup() {
  [ -n "$container" ] && buildah rm "$container" >/dev/null 2>&1
  rm -rf "$stage"
}
trap cleanup EXIT

mkdir -p "$stage/opt/shardwise" "$stage/usr/lib/x86_64-linux-gnu" "$stage/usr/lib64" \
  "$stage/etc" "$stage/tmp" "$stage/data" "$stage/var/lib/shardwise"
tar -C "$stage/opt/shardwise" -xzf "$bundle"
chmod 755 "$stage/opt/shardwise"  # bundles packed before bundle.sh set it were 700
ln -s usr/lib "$stage/lib"
ln -s usr/lib64 "$stage/lib64"

# Every library the bundle's files need that the bundle does not hold: glibc's, and for a
# CUDA bundle the driver's (left to the host). Anything else means the bundle is broken.
missing_libraries() {
  find "$stage/opt/shardwise/bin" "$stage/opt/shardwise/lib" -type f -print0 |
    LD_LIBRARY_PATH="$stage/opt/shardwise/lib" xargs -0 ldd 2>/dev/null |
    awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\/.*ld-linux/ {print $1}' |
    grep -v "^$stage/opt/shardwise/" | sort -u
}
for path in $(missing_libraries); do
  name=$(basename "$path")
  case "$name" in
    ld-linux-x86-64.so.2)
      cp -L "$path" "$stage/usr/lib/x86_64-linux-gnu/$name"
      ln -sf ../lib/x86_64-linux-gnu/"$name" "$stage/usr/lib64/$name"
      ;;
    libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | librt.so.1 | libresolv.so.2)
      cp -L "$path" "$stage/usr/lib/x86_64-linux-gnu/$name"
      ;;
    libcuda.so* | libnvidia-*) ;;  # the GPU host's driver
    *)
      echo "build.sh: the bundle needs $path, which it does not hold" >&2
      exit 1
      ;;
  esac
done

cat >"$stage/etc/passwd" <<EOF
root:x:0:0:root:/root:/sbin/nologin
shardwise:x:$UID_GID:$UID_GID:shardwise:/var/lib/shardwise:/sbin/nologin
EOF
cat >"$stage/etc/group" <<EOF
root:x:0:
shardwise:x:$UID_GID:
EOF
echo "hosts: files dns" >"$stage/etc/nsswitch.conf"
chmod 1777 "$stage/tmp"
chown "$UID_GID:$UID_GID" "$stage/data" "$stage/var/lib/shardwise"

container=$(buildah from scratch)
buildah copy --quiet "$container" "$stage" / >/dev/null
buildah config \
  --user "$UID_GID:$UID_GID" \
  --workingdir /var/lib/shardwise \
  --env PATH=/opt/shardwise/bin \
  --cmd shardwise-coordinator \
  --label org.opencontainers.image.title=shardwise \
  --label "org.opencontainers.image.description=$(basename "$bundle")" \
  "$container"
buildah commit --quiet --rm "$container" "$image" >/dev/null
container=""
echo "built $image"
