#!/usr/bin/env bash
# Builds what a GPU host with the CUDA toolkit needs for every GPU check into .device/
# (which git ignores): the GPU test binaries, the GPU tools and the daemons in one tarball
# without the toolkit's libraries (//tests/gpu:gpu_kit), and checks that it fits what the
# device tool carries (64 MiB with the working tree). Then, on the GPU host:
# tests/gpu/device_run.sh.
#
# usage: tests/gpu/prepare_device_run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bazel build --config=cuda //tests/gpu:gpu_kit
rm -rf .device
mkdir -p .device
cp -f bazel-bin/tests/gpu/gpu-kit.tar.gz .device/
chmod u+w .device/*.tar.gz
# The commit it was built from, for device_run.sh's summary: a kit older than the code
# under test is seen at once.
changed=$(git status --porcelain --untracked-files=no | wc -l)
echo "$(git rev-parse --short HEAD)${changed:+ with $changed changed files}" | sed 's/ with 0 changed files//' >.device/commit
bytes=$(du -cb .device/*.tar.gz | tail -1 | cut -f1)
echo ".device/: $((bytes / 1048576)) MiB (carry it: carry [\".device\"])"
if [ "$bytes" -ge $((60 * 1048576)) ]; then
  echo "too large to carry beside the working tree" >&2
  exit 1
fi
