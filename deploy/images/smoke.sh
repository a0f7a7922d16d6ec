#!/usr/bin/env bash
# Checks that each image's binaries start: every library they load is inside the image
# (or, for the CUDA image, is the driver's). Prints "images NAME passed|failed" lines.
#
# usage: deploy/images/smoke.sh CPU_IMAGE [CUDA_IMAGE]
set -uo pipefail

failures=0
result() {
  echo "images $1 $2${3:+ ($3)}"
  [ "$2" = failed ] && failures=$((failures + 1))
  return 0
}

# Each binary prints its usage (exit 0 or 1: absl's --help exits 1) rather than failing
# to load (127) or crashing.
starts() {  # starts IMAGE
  local binary status
  for binary in shardwise shardwise-coordinator shardwise-worker; do
    podman run --rm --network none "$1" "$binary" --help >/dev/null 2>&1
    status=$?
    if [ $status -gt 1 ]; then
      echo "$binary exited with $status" >&2
      return 1
    fi
  done
}

if starts "$1"; then result cpu passed; else result cpu failed "a binary does not start"; fi

if [ -n "${2:-}" ]; then
  # Without a GPU the CUDA worker loads the libraries it links (cudart, cuBLAS, NCCL,
  # cuDNN), then says the driver is missing: the image holds everything it links but the
  # driver. cuDNN's engines and NVRTC load only as a job runs, on a GPU node.
  said=$(podman run --rm --network none "$2" shardwise-worker --device=cuda \
    --coordinator=127.0.0.1:1 --name=smoke 2>&1)
  if starts "$2" && grep -q "no usable CUDA driver or GPU" <<<"$said"; then
    result cuda passed
  else
    result cuda failed "$said"
  fi
fi
exit $((failures > 0))
