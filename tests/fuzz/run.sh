#!/usr/bin/env bash
# Builds every fuzz target (tests/fuzz/BUILD) with Debian's clang-14, libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer, and runs each for a bounded time from
# its corpus in the tree (a scratch copy: the tree is not written). Prints one line per
# target ("fuzz NAME passed|failed ...") and writes them to $FUZZ_RESULTS (if set) for
# ./dev.sh test's summary. A crash leaves its input beside the log; add it to
# tests/fuzz/corpus/NAME/ once fixed, and NAME_replay tests it from then on.
# Usage: tests/fuzz/run.sh [SECONDS_PER_TARGET]   (default 20)
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-20}
targets=(job_spec safetensors token_file checkpoint coordinator tokenizer tokenizer_files huggingface)

bazel build //proto:all >/dev/null 2>&1
bin=$(bazel info bazel-bin 2>/dev/null)
out="$(bazel info output_base 2>/dev/null)/shardwise-fuzz"
mkdir -p "$out"
flags="-std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -I. -I$bin"

# Each target's sources (ours and the generated protobuf code) and its system libraries,
# from the build graph, into one Makefile; make rebuilds what changed (-MMD).
makefile="$out/Makefile"
{
  echo "CXX := clang++-14"
  echo "FLAGS := $flags"
  echo "all: ${targets[*]/#/$out/bin/}"
} >"$makefile"
declare -A compiled
for name in "${targets[@]}"; do
  label="//tests/fuzz:${name}_fuzzer"
  # "|| true": a target may have no generated sources, and grep then finds nothing.
  sources=$(bazel query "kind('source file', deps($label))" 2>/dev/null |
    { grep -E '^//.*\.cc$' || true; } | sed -e 's|^//||' -e 's|:|/|' -e 's|^/||')
  generated=$(bazel query "kind('generated file', deps($label))" 2>/dev/null |
    { grep -E '\.cc$' || true; } | sed -e 's|^//||' -e 's|:|/|' -e "s|^|$bin/|")
  libs=$(bazel query --output=build "deps($label) intersect //third_party/system:*" 2>/dev/null |
    { grep -oE '"-l[^"]+"' || true; } | tr -d '"' | sort -u | tr '\n' ' ')
  objects=""
  for src in $sources $generated; do
    obj="$out/obj/$(echo "$src" | sed -e "s|^$bin/||" -e 's|\.cc$|.o|')"
    objects="$objects $obj"
    if [ -z "${compiled[$obj]:-}" ]; then  # one rule per object, however many targets use it
      compiled[$obj]=1
      printf '%s: %s\n\t@mkdir -p $(dir $@)\n\t$(CXX) $(FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@\n' \
        "$obj" "$src" >>"$makefile"
    fi
  done
  printf '%s:%s\n\t@mkdir -p $(dir $@)\n\t$(CXX) $(FLAGS) -fsanitize=fuzzer %s -o $@ %s -lpthread\n' \
    "$out/bin/$name" "$objects" "$objects" "$libs" >>"$makefile"
done
echo '-include $(shell find '"$out/obj"' -name "*.d" 2>/dev/null)' >>"$makefile"
echo "== building ${#targets[@]} fuzz targets with clang-14 (libFuzzer, ASan, UBSan)" >&2
if ! make -s -j"$(nproc)" -f "$makefile" all >"$out/build.log" 2>&1; then
  tail -30 "$out/build.log" >&2
  results=""
  for name in "${targets[@]}"; do results="${results}fuzz $name failed: the build failed (see $out/build.log)"$'\n'; done
  printf '%s' "$results"
  if [ -n "${FUZZ_RESULTS:-}" ]; then printf '%s' "$results" >"$FUZZ_RESULTS"; fi
  exit 1
fi

# Runs target $1 for $seconds; its line goes to its folder's `result`, its status out.
fuzz_one() {
  local name=$1 work="$out/run-$1" scratch line runs status=0
  rm -rf "$work"
  mkdir -p "$work/corpus"
  cp tests/fuzz/corpus/"$name"/* "$work/corpus/"
  # Scratch files (the coordinator target's SQLite file) go to memory where there is some:
  # a synced write per input would otherwise be most of the time.
  scratch="$work"
  if [ -w /dev/shm ]; then scratch=$(mktemp -d /dev/shm/shardwise-fuzz.XXXXXX); fi
  if (cd "$work" && TEST_TMPDIR="$scratch" UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      "$out/bin/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$work/" corpus >"$work/fuzz.log" 2>&1); then
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$work/fuzz.log" | grep -oE '[0-9]+$' || echo "?")
    line="fuzz $name passed ($runs inputs in ${seconds}s)"
  else
    line="fuzz $name failed: see $work/fuzz.log and the crash-* input beside it"
    status=1
  fi
  if [ "$scratch" != "$work" ]; then rm -rf "$scratch"; fi
  echo "$line" >"$work/result"
  return $status
}

# A libFuzzer process uses one core: as many targets run at once as there are cores.
status=0
running=0
for name in "${targets[@]}"; do
  if [ "$running" -ge "$(nproc)" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz_one "$name" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
results=""
for name in "${targets[@]}"; do
  line=$(cat "$out/run-$name/result" 2>/dev/null || echo "fuzz $name failed: it left no result")
  case "$line" in *" failed: "*)
    status=1
    if [ -f "$out/run-$name/fuzz.log" ]; then tail -40 "$out/run-$name/fuzz.log" >&2; fi ;;
  esac
  echo "$line"
  results="$results$line"$'\n'
done
if [ -n "${FUZZ_RESULTS:-}" ]; then printf '%s' "$results" >"$FUZZ_RESULTS"; fi
exit $status
