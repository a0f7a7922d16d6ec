#!/usr/bin/env bash
# Shardwise's developer entry point. On a fresh Debian 12 machine each command installs
# what is missing (Debian packages, through apt-get), builds with Bazel and runs.
#
#   ./dev.sh demo     a local coordinator and 4 CPU workers train a small GPT
#                     (examples/demo.yaml), then sample text from it
#   ./dev.sh test     the whole test suite
#   ./dev.sh build    build everything
#   ./dev.sh deps     only install the Debian packages
set -euo pipefail
cd "$(dirname "$0")"

# Everything the build and the tests need; nothing else is assumed on the machine.
DEBIAN_PACKAGES=(
  bazel-bootstrap g++ python3
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgloo-dev libsqlite3-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libopenblas-dev
  libcpp-httplib-dev  # the Prometheus metrics endpoints
  libssl-dev openssl  # token hashes; the security tests make their certificates
  python3-torch  # tests/pytorch_parity_test: PyTorch itself as the reference
  python3-grpcio python3-protobuf python3-yaml  # the Python client (client/python)
  clang-14 libclang-rt-14-dev make  # tests/fuzz/run.sh: libFuzzer with ASan and UBSan
)

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

deps() {
  local missing=()
  for pkg in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

build() {
  deps
  log "building"
  bazel build //... 2>&1 | grep -vE '^(Loading|Analyzing|INFO: (Found|Analyzed|From))' >&2
}

# Counts the test cases of every test target from the JUnit XML Bazel wrote for it (only
# the targets that exist now, so results left from older runs are not counted), and
# prints the closing line CI reads ("N passed, N failed, N skipped"). GPU tests (tag
# "gpu") are read from the CUDA configuration's run when it was built ($1 = 1), and
# otherwise count as one skipped case each. Each fuzz target's run (the lines
# tests/fuzz/run.sh wrote to $2) counts as one case.
summarize_tests() {
  local cuda_built=${1:-0} fuzz_results=${2:-/dev/null}
  local testlogs cuda_testlogs
  testlogs=$(bazel info bazel-testlogs 2>/dev/null)
  cuda_testlogs=$(bazel info --config=cuda bazel-testlogs 2>/dev/null)
  local gpu_tests
  gpu_tests=$(bazel query 'attr(tags, "\bgpu\b", tests(//...))' 2>/dev/null | tr '\n' ' ')
  bazel query 'tests(//...)' 2>/dev/null | python3 -c '
import sys, pathlib, xml.etree.ElementTree as ET
testlogs, cuda_testlogs = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
gpu_tests, cuda_built = set(sys.argv[3].split()), sys.argv[4] == "1"
passed = failed = skipped = 0
for label in sys.stdin.read().split():
    if label in gpu_tests and not cuda_built:
        skipped += 1  # not built: no CUDA toolkit on this machine
        continue
    package, name = label.lstrip("/").split(":")
    xml = (cuda_testlogs if label in gpu_tests else testlogs) / package / name / "test.xml"
    try:
        cases = list(ET.parse(xml).getroot().iter("testcase"))
    except (OSError, ET.ParseError):
        cases = []
    if not cases:  # never ran, or crashed before writing its cases
        failed += 1
        continue
    for case in cases:
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.get("result") == "skipped" or case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
for line in pathlib.Path(sys.argv[5]).read_text().splitlines():
    if line.startswith("fuzz "):
        if line.split()[2] == "passed":
            passed += 1
        else:
            failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
' "$testlogs" "$cuda_testlogs" "$gpu_tests" "$cuda_built" "$fuzz_results"
}

# Seconds each fuzz target runs in ./dev.sh test (tests/fuzz/run.sh); its corpus replays
# in the Bazel tests besides.
FUZZ_SECONDS="${SHARDWISE_FUZZ_SECONDS:-30}"

# The CUDA toolkit the --config=cuda build uses (third_party/cuda/cuda_configure.bzl).
CUDA_PATH="${SHARDWISE_CUDA_PATH:-/usr/local/cuda}"

test_all() {
  deps
  log "building and running every test"
  local status=0
  bazel test //... 2>&1 | grep -vE '^(Loading|Analyzing|INFO: (Found|Analyzed|From))' || status=$?
  # The CUDA configuration: everything compiles and links with nvcc, cuBLAS and NCCL, and
  # the GPU tests run (each case reports SKIPPED where there is no GPU). It needs the CUDA
  # toolkit, which Debian does not package; without it the GPU tests count as skipped.
  local cuda_built=0
  if [ -x "$CUDA_PATH/bin/nvcc" ]; then
    log "building the CUDA configuration (toolkit at $CUDA_PATH) and running the GPU tests"
    bazel test --config=cuda --test_tag_filters=gpu //... 2>&1 |
      grep -vE '^(Loading|Analyzing|INFO: (Found|Analyzed|From))' || status=$?
    cuda_built=1
  else
    log "no CUDA toolkit at $CUDA_PATH: the CUDA configuration is not built; GPU tests skipped"
  fi
  log "fuzzing each input parser for ${FUZZ_SECONDS}s (libFuzzer, ASan, UBSan)"
  local fuzz_results
  fuzz_results=$(mktemp)
  FUZZ_RESULTS="$fuzz_results" tests/fuzz/run.sh "$FUZZ_SECONDS" || status=$?
  summarize_tests "$cuda_built" "$fuzz_results"
  rm -f "$fuzz_results"
  return $status
}

# Where examples/demo.yaml reads its tokens and writes its model.
DEMO_DATA=/tmp/shardwise-demo

# Processes the demo started; global so that the EXIT trap still sees them.
DEMO_PIDS=()
stop_demo_processes() {
  [ ${#DEMO_PIDS[@]} -eq 0 ] && return 0
  kill "${DEMO_PIDS[@]}" 2>/dev/null || true
  wait "${DEMO_PIDS[@]}" 2>/dev/null || true
}

demo() {
  deps
  log "building"
  bazel build //server:shardwise-coordinator //worker:shardwise-worker //client:shardwise \
    2>&1 | grep -E 'ERROR|error:' >&2 || true
  local bin
  bin=$(bazel info bazel-bin 2>/dev/null)
  local dir
  dir=$(mktemp -d -t shardwise-demo.XXXXXX)
  trap stop_demo_processes EXIT

  log "starting a coordinator (state in $dir/state.db, logs in $dir)"
  # Jobs read their tokens and write their model under $DEMO_DATA only (the path policy).
  mkdir -p "$DEMO_DATA"
  "$bin/server/shardwise-coordinator" --address=127.0.0.1:0 --port_file="$dir/port" \
    --state_file="$dir/state.db" --allowed_input_paths="$DEMO_DATA" \
    --allowed_output_paths="$DEMO_DATA" 2>"$dir/coordinator.log" &
  DEMO_PIDS+=($!)
  for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
  [ -s "$dir/port" ] || { cat "$dir/coordinator.log" >&2; exit 1; }
  export SHARDWISE_COORDINATOR="127.0.0.1:$(cat "$dir/port")"

  log "starting 4 CPU workers"
  for rank in 0 1 2 3; do
    "$bin/worker/shardwise-worker" --name="demo-worker-$rank" 2>"$dir/worker-$rank.log" &
    DEMO_PIDS+=($!)
  done
  for _ in $(seq 100); do
    [ "$("$bin/client/shardwise" get workers 2>/dev/null | grep -c IDLE)" -ge 4 ] && break
    sleep 0.1
  done
  "$bin/client/shardwise" get workers

  # The text: the licenses every Debian system ships (base-files), bytes as tokens.
  log "tokenizing /usr/share/common-licenses into $DEMO_DATA/tokens"
  "$bin/client/shardwise" tokenize $(find /usr/share/common-licenses -maxdepth 1 -type f | sort) \
    -o "$DEMO_DATA/tokens"

  log "submitting examples/demo.yaml (a 4-layer GPT, FULL_SHARD over the 4 workers)"
  local status=0
  "$bin/client/shardwise" submit examples/demo.yaml --watch || status=$?
  "$bin/client/shardwise" get jobs
  if [ $status -eq 0 ]; then
    log "sampling from the trained model ($DEMO_DATA/gpt.safetensors)"
    "$bin/client/shardwise" sample "$DEMO_DATA/gpt.safetensors" --prompt "The Program" \
      --tokens 300 --temperature 0.8 --seed 1
  fi
  log "done; logs and state in $dir"
  return $status
}

case "${1:-}" in
  demo) demo ;;
  test) test_all ;;
  build) build ;;
  deps) deps ;;
  *)
    echo "usage: ./dev.sh demo|test|build|deps" >&2
    exit 2
    ;;
esac
