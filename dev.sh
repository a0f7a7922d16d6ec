#!/usr/bin/env bash
# Shardwise's developer entry point. On a fresh Debian 12 machine each command installs
# what is missing (Debian packages, through apt-get), builds with Bazel and runs.
#
#   ./dev.sh demo     a local coordinator and 4 CPU workers train a small GPT
#                     (examples/demo.yaml) on text through a SentencePiece tokenizer
#                     trained on it, then sample text from it
#   ./dev.sh test     the whole test suite, the Kubernetes manifests' checks, the
#                     images and their local run (./dev.sh kube) included
#   ./dev.sh build    build everything
#   ./dev.sh images   the container images (deploy/images): localhost/shardwise-cpu:dev,
#                     and localhost/shardwise-cuda:dev where the CUDA toolkit is
#   ./dev.sh kube     the images, then deploy/k8s/overlays/local on podman (deploy/local)
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
  libspdlog-dev  # the daemons' logs (common/log.h): time, level, text or JSON lines
  libssl-dev openssl  # token hashes; the security tests make their certificates
  libxxhash-dev  # the checksum of a state healed from a live rank (XXH3-128)
  libsentencepiece-dev sentencepiece libpcre2-dev nlohmann-json3-dev  # shardwise tokenize
  libicu-dev  # Hugging Face tokenizers' normalizers (NFC, NFKC, lowercase)
  python3-torch  # tests/pytorch_parity_test: PyTorch itself as the reference
  python3-grpcio python3-protobuf python3-yaml  # the Python client (client/python)
  clang-14 libclang-rt-14-dev make  # tests/fuzz/run.sh: libFuzzer with ASan and UBSan
  iproute2 iptables  # tests/multihost_test: hosts in network namespaces (ip netns, veth,
  # bridge), one whose firewall drops its data-plane connections
  clang-format-14 clang-tidy-14 git universal-ctags  # tools/check_format.sh, clang_tidy.sh,
  # check_docs.sh, function_lengths.sh
)

# What deploy/ needs besides: image building and running (buildah, podman and what it
# runs with here), and the manifests' rendering and validation (kubectl, npm). netavark
# sets up the pods' network with iptables, which it only suggests and a new machine lacks.
DEPLOY_PACKAGES=(buildah podman runc netavark aardvark-dns catatonit iptables)

# What the profiles under bench/ need besides (bench/gpt_profile.sh: perf).
BENCH_PACKAGES=(linux-perf)

# The programs each step runs and their packages: check_prerequisites STEP... names the
# missing ones before a step starts.
source tools/prerequisites.sh

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

install_packages() {
  [ $# -eq 0 ] && return 0
  log "installing Debian packages: $*"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  # A new machine may be running its first unattended upgrade: wait for its lock.
  local wait_for_lock=(-o DPkg::Lock::Timeout=600)
  "${sudo[@]}" apt-get "${wait_for_lock[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get "${wait_for_lock[@]}" install -y -qq \
    --no-install-recommends "$@" >/dev/null
}

missing_packages() {
  local pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
      echo "$pkg"
  done
}

deps() {
  # shellcheck disable=SC2046
  install_packages $(missing_packages "${DEBIAN_PACKAGES[@]}")
}

# kubectl and npm are taken from wherever the machine has them; where it has none,
# Debian's (kubernetes-client's kubectl 1.20 renders deploy/k8s as well).
deploy_deps() {
  deps
  local missing
  missing=$(missing_packages "${DEPLOY_PACKAGES[@]}")
  command -v kubectl >/dev/null || missing+=" kubernetes-client"
  command -v npm >/dev/null || missing+=" npm"
  # shellcheck disable=SC2086
  install_packages $missing
}

build() {
  deps
  check_prerequisites build
  log "building"
  bazel build //... 2>&1 | grep -vE '^(Loading|Analyzing|INFO: (Found|Analyzed|From))' >&2
}

# Counts the test cases of every test target from the JUnit XML Bazel wrote for it (only
# the targets that exist now, so results left from older runs are not counted), and
# prints the closing line CI reads ("N passed, N failed, N skipped"). GPU tests (tag
# "gpu") and the CUDA configuration's CPU tests (tag "cuda") are read from the CUDA
# configuration's run when it was built ($1 = 1), and otherwise count as one skipped
# case each. Each line "SUITE NAME passed|failed|skipped"
# in $2 (from tools/check_layers.sh, check_docs.sh, check_format.sh, function_lengths.sh,
# tests/fuzz/run.sh, deploy/check.sh, tests/tokenizers/check.sh and deploy/local/run.sh)
# counts as one case.
summarize_tests() {
  local cuda_built=${1:-0} other_results=${2:-/dev/null}
  local testlogs cuda_testlogs
  testlogs=$(bazel info bazel-testlogs 2>/dev/null)
  cuda_testlogs=$(bazel info --config=cuda bazel-testlogs 2>/dev/null)
  local gpu_tests
  # Exactly the tags "gpu" and "cuda", as --test_tag_filters matches them.
  gpu_tests=$(bazel query 'attr(tags, "[\[ ](gpu|cuda)[,\]]", tests(//...))' 2>/dev/null |
    tr '\n' ' ')
  bazel query 'tests(//...)' 2>/dev/null | /usr/bin/python3 -c '
import sys, pathlib, xml.etree.ElementTree as ET
testlogs, cuda_testlogs = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
gpu_tests, cuda_built = set(sys.argv[3].split()), sys.argv[4] == "1"
passed = failed = skipped = 0
for label in sys.stdin.read().split():
    if label in gpu_tests and not cuda_built:
        skipped += 1  # not built: no CUDA toolkit on this machine
        continue
    package, name = label.lstrip("/").split(":")
    folder = (cuda_testlogs if label in gpu_tests else testlogs) / package / name
    # A sharded test (shard_count) writes one file per shard instead.
    xmls = [folder / "test.xml"] if (folder / "test.xml").exists() else sorted(
        folder.glob("shard_*_of_*/test.xml"))
    cases = []
    for xml in xmls:
        try:
            cases += list(ET.parse(xml).getroot().iter("testcase"))
        except (OSError, ET.ParseError):
            pass
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
    fields = line.split()
    if len(fields) >= 3 and fields[2] in ("passed", "failed", "skipped"):
        passed += fields[2] == "passed"
        failed += fields[2] == "failed"
        skipped += fields[2] == "skipped"
print(f"{passed} passed, {failed} failed, {skipped} skipped")
' "$testlogs" "$cuda_testlogs" "$gpu_tests" "$cuda_built" "$other_results"
}

# Seconds each fuzz target runs in ./dev.sh test (tests/fuzz/run.sh); its corpus replays
# in the Bazel tests besides.
FUZZ_SECONDS="${SHARDWISE_FUZZ_SECONDS:-30}"

# The CUDA toolkit the --config=cuda build uses (third_party/cuda/cuda_configure.bzl).
CUDA_PATH="${SHARDWISE_CUDA_PATH:-/usr/local/cuda}"

test_all() {
  deps
  check_prerequisites build test checks fuzz
  log "building and running every test"
  local status=0
  bazel test //... 2>&1 | grep -vE '^(Loading|Analyzing|INFO: (Found|Analyzed|From))' || status=$?
  # The CUDA configuration: the CUDA data plane and the GPU kits (the GPU tests and
  # benchmarks with the coordinator, worker and CLI a GPU host runs) compile and link with
  # nvcc, cuBLAS, cuDNN and NCCL; the GPU tests run (each case reports SKIPPED where there
  # is no GPU), and so do the tests that need the toolkit but no GPU (tag "cuda": cuDNN's
  # deviceless plans). The CPU tests are not built again there: their sources compile the
  # same in both configurations (only the worker's main differs, and the kit holds it).
  # It needs the CUDA toolkit, which Debian does not package; without it the GPU tests
  # count as skipped.
  local cuda_built=0
  if [ -x "$CUDA_PATH/bin/nvcc" ]; then
    log "building the CUDA configuration (toolkit at $CUDA_PATH) and running the GPU tests"
    bazel build --config=cuda //worker/cuda/... //tests/gpu/... 2>&1 |
      grep -vE '^(Loading|Analyzing|INFO: (Found|Analyzed|From))' || status=$?
    bazel test --config=cuda --build_tests_only --test_tag_filters=gpu,cuda //... 2>&1 |
      grep -vE '^(Loading|Analyzing|INFO: (Found|Analyzed|From))' || status=$?
    cuda_built=1
  else
    log "no CUDA toolkit at $CUDA_PATH: the CUDA configuration is not built; GPU tests skipped"
  fi
  local other_results fuzz_results
  other_results=$(mktemp)
  fuzz_results=$(mktemp)
  # The tree's checks: the build graph's layers, the docs' code names and paths, the C++
  # formatting, clang-tidy, no function over 80 lines.
  local check
  for check in check_layers.sh check_docs.sh check_format.sh clang_tidy.sh \
    "function_lengths.sh 80"; do
    log "checking: tools/$check"
    # shellcheck disable=SC2086  # the check's name and its argument
    tools/$check | tee -a "$other_results" || status=$?
  done
  log "fuzzing each input parser for ${FUZZ_SECONDS}s (libFuzzer, ASan, UBSan)"
  FUZZ_RESULTS="$fuzz_results" tests/fuzz/run.sh "$FUZZ_SECONDS" || status=$?
  cat "$fuzz_results" >>"$other_results"
  log "rendering and validating the Kubernetes manifests (deploy/check.sh)"
  deploy_deps
  check_prerequisites manifests images kube
  deploy/check.sh | tee -a "$other_results" || status=$?
  log "checking the tokenizers against published ids (npm's encoders, llama.cpp's vectors)"
  tests/tokenizers/check.sh | tee -a "$other_results" || status=$?
  if [ "$(id -u)" -ne 0 ]; then
    # Images and the local cluster need root (deploy/images/build.sh, podman's networks):
    # said as skipped, as deploy/local/run.sh says it, not as a failure.
    log "skipping the images and the local Kubernetes run: they need root"
    echo "kube images skipped" | tee -a "$other_results"
  elif images; then
    local cuda_image=()
    [ -x "$CUDA_PATH/bin/nvcc" ] && cuda_image=(localhost/shardwise-cuda:dev)
    deploy/images/smoke.sh localhost/shardwise-cpu:dev "${cuda_image[@]}" |
      tee -a "$other_results" || status=$?
    deploy/local/run.sh | tee -a "$other_results" || status=$?
  else
    echo "kube images failed" | tee -a "$other_results"
    status=1
  fi
  summarize_tests "$cuda_built" "$other_results"
  rm -f "$other_results" "$fuzz_results"
  return $status
}

# podman and buildah read deploy/local/containers.conf, not the machine's settings.
export CONTAINERS_CONF="$PWD/deploy/local/containers.conf"

# Builds the bundle in the configuration given (none, or --config=cuda), showing only the
# errors; fails when the build does (a stale bundle from an earlier build is no image).
build_bundle() {
  bazel build "$@" //:bundle 2>&1 | { grep -E 'ERROR|error:' >&2; true; }
  return "${PIPESTATUS[0]}"
}

# Builds the CPU image, and the CUDA image where the toolkit is (deploy/images/build.sh).
images() {
  deploy_deps
  log "building the CPU image localhost/shardwise-cpu:dev"
  build_bundle || return 1
  deploy/images/build.sh "$(bazel info bazel-bin 2>/dev/null)/shardwise-bundle.tar.gz" \
    localhost/shardwise-cpu:dev || return 1
  if [ -x "$CUDA_PATH/bin/nvcc" ]; then
    log "building the CUDA image localhost/shardwise-cuda:dev (toolkit at $CUDA_PATH)"
    # Written where the CPU bundle was (the configurations share an output folder): the
    # CPU image above has taken that one already.
    build_bundle --config=cuda || return 1
    deploy/images/build.sh \
      "$(bazel info --config=cuda bazel-bin 2>/dev/null)/shardwise-bundle.tar.gz" \
      localhost/shardwise-cuda:dev || return 1
  fi
  podman image prune -f >/dev/null  # the images these names held before
}

kube() {
  images
  deploy/local/run.sh
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
  check_prerequisites build
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
  SHARDWISE_COORDINATOR="127.0.0.1:$(cat "$dir/port")"
  export SHARDWISE_COORDINATOR

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

  # The text: the licenses every Debian system ships (base-files), through a SentencePiece
  # BPE tokenizer trained on them (2,048 pieces), so the samples are made of words.
  log "training a tokenizer on /usr/share/common-licenses and tokenizing it into $DEMO_DATA/tokens"
  # shellcheck disable=SC2046  # one argument per file; Debian's names have no spaces
  "$bin/client/shardwise" tokenize $(find /usr/share/common-licenses -maxdepth 1 -type f | sort) \
    -o "$DEMO_DATA/tokens" --tokenizer=sentencepiece --vocab_size=2048

  log "submitting examples/demo.yaml (a 4-layer GPT, FULL_SHARD over the 4 workers)"
  local status=0
  "$bin/client/shardwise" submit examples/demo.yaml --watch || status=$?
  "$bin/client/shardwise" get jobs
  if [ $status -eq 0 ]; then
    log "sampling from the trained model ($DEMO_DATA/gpt.safetensors)"
    local sample
    sample=$("$bin/client/shardwise" sample "$DEMO_DATA/gpt.safetensors" --prompt "The Program" \
      --tokens 300 --temperature 0.8 --seed 1) || status=$?
    printf '%s\n' "$sample"
    # A sample is more than the prompt; CI (.ci/run) fails the demo without one.
    if [ $status -eq 0 ] && [ -z "$(tr -d '[:space:]' <<<"${sample#The Program}")" ]; then
      echo "the sample has no text beyond its prompt" >&2
      status=1
    fi
  fi
  log "done; logs and state in $dir"
  return $status
}

case "${1:-}" in
  demo) demo ;;
  test) test_all ;;
  build) build ;;
  images) images ;;
  kube) kube ;;
  deps) deps && deploy_deps ;;
  bench-deps)
    # shellcheck disable=SC2046
    deps && install_packages $(missing_packages "${BENCH_PACKAGES[@]}")
    ;;
  *)
    echo "usage: ./dev.sh demo|test|build|images|kube|deps|bench-deps" >&2
    exit 2
    ;;
esac
