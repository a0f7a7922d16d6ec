#!/usr/bin/env bash
# Runs clang-tidy (the checks in .clang-tidy: bugprone-*, performance-*) on every C++ file
# the default (CPU) build compiles, with the flags Bazel compiles it with, and prints
# "tidy cpp passed|failed" (./dev.sh counts it). Exits 1 on a warning.
#   tools/clang_tidy.sh [--fix] [FILE...]   FILEs: only these (paths from the repository root)
# A file whose preprocessed text (comments kept, so NOLINTs count) was found clean before,
# with the same .clang-tidy and clang-tidy, is not checked again: its key is remembered in
# ${SHARDWISE_TIDY_CACHE:-~/.cache/shardwise/clang-tidy} once a whole run finds nothing
# (clang-tidy's warnings depend on nothing else; about 20 minutes on 2 cores go to 2).
# The CUDA configuration's files (worker/cuda/, nvcc) are not covered: clang-tidy cannot
# parse them with nvcc's flags.
set -uo pipefail
cd "$(dirname "$0")/.."
fix=()
if [ "${1:-}" = "--fix" ]; then
  fix=(-fix)
  shift
fi

# Bazel's compile actions, as a compile_commands.json. Their relative paths resolve in a
# folder of our own that links the tree's folders, bazel-out and external/ (as Bazel's
# execution root does, but which every bazel command re-plants with the folders it
# needs). The build first, so the generated headers (*.pb.h) exist.
bazel build --noshow_progress //... >/dev/null 2>&1 || {
  echo "tidy cpp failed (bazel build //... failed)"
  exit 1
}
execroot=$(bazel info execution_root 2>/dev/null)
output_base=$(bazel info output_base 2>/dev/null)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/root"
mkdir "$root"
for folder in $(git ls-files | sed -n 's#^\([^/]*\)/.*#\1#p' | sort -u); do
  ln -s "$PWD/$folder" "$root/$folder"
done
# clang-tidy finds its configuration above each file, as the files are named here.
ln -s "$PWD/.clang-tidy" "$root/.clang-tidy"
ln -s "$execroot/bazel-out" "$root/bazel-out"
ln -s "$output_base/external" "$root/external"
bazel aquery --noshow_progress 'mnemonic("CppCompile", //...)' --output=jsonproto \
  >"$work/actions.json" 2>/dev/null || {
  echo "tidy cpp failed (bazel aquery failed)"
  exit 1
}
/usr/bin/python3 - "$work/actions.json" "$root" "$work/compile_commands.json" <<'PY'
import json, sys
actions, root, out = json.load(open(sys.argv[1]))["actions"], sys.argv[2], sys.argv[3]
commands = []
for action in actions:
    args = action["arguments"]
    source = args[args.index("-c") + 1]
    if source.startswith(("external/", "bazel-out/", "third_party/")):
        continue
    # gcc's flags clang does not take, and the outputs, go; the rest is the build's.
    kept, skip = ["/usr/bin/clang++-14"], False
    for arg in args[1:]:
        if skip:
            skip = False
        elif arg in ("-MF", "-o"):
            skip = True
        elif arg not in ("-MD", "-c", source, "-fno-canonical-system-headers") and \
                not arg.startswith("-frandom-seed"):
            kept.append(arg)
    commands.append({"directory": root, "file": source, "arguments": kept + ["-c", source]})
json.dump(commands, open(out, "w"))
PY
count=$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' \
  "$work/compile_commands.json")

# The files checked clean before drop out of compile_commands.json (not with --fix or
# FILEs); the others' keys are kept for after the run.
cache=${SHARDWISE_TIDY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardwise/clang-tidy}
if [ ${#fix[@]} -eq 0 ] && [ $# -eq 0 ]; then
  mkdir -p "$cache"
  /usr/bin/python3 - "$work/compile_commands.json" "$cache" "$work/keys" "$(nproc)" <<'PY'
import concurrent.futures, hashlib, json, os, subprocess, sys
path, cache, keys_path, jobs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
commands = json.load(open(path))
context = subprocess.run(["clang-tidy-14", "--version"], capture_output=True).stdout
context += open(".clang-tidy", "rb").read()
def key(command):
    # The preprocessed text without line markers (they hold this run's temporary paths).
    args = [a for a in command["arguments"] if a != "-c"][:-1]
    text = subprocess.run(args + ["-E", "-P", "-C", command["file"], "-o", "-"],
                          cwd=command["directory"], capture_output=True).stdout
    return hashlib.sha256(context + command["file"].encode() + b"\0" + text).hexdigest()
with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
    keys = list(pool.map(key, commands))
left = [(c, k) for c, k in zip(commands, keys) if not os.path.exists(os.path.join(cache, k))]
json.dump([c for c, _ in left], open(path, "w"))
open(keys_path, "w").write("".join(k + "\n" for _, k in left))
print(f"{len(commands) - len(left)} of {len(commands)} files found clean before, as they are now",
      file=sys.stderr)
PY
fi
# run-clang-tidy takes regular expressions over the absolute paths; none: every file.
patterns=()
for file in "$@"; do patterns+=("^$root/$file\$"); done
[ $# -gt 0 ] && count=$#

# Each file's warnings; run-clang-tidy runs one clang-tidy per core.
touch "$work/output.txt"
if [ "$(head -c 2 "$work/compile_commands.json")" != "[]" ]; then
  (cd "$root" && run-clang-tidy-14 -p "$work" -j "$(nproc)" -quiet "${fix[@]}" \
    -clang-tidy-binary clang-tidy-14 -clang-apply-replacements-binary clang-apply-replacements-14 \
    "${patterns[@]}" >"$work/output.txt" 2>&1)
fi
sed -e 's/\x1b\[[0-9;]*m//g' -e "s#^$root/##" "$work/output.txt" |
  grep -E '(warning|error): ' | sort -u >"$work/findings.txt"
if [ -s "$work/findings.txt" ]; then
  cat "$work/findings.txt" >&2
  echo "tidy cpp failed ($(wc -l <"$work/findings.txt") findings in $count files, listed above)"
  exit 1
fi
if [ -f "$work/keys" ]; then
  while read -r key; do : >"$cache/$key"; done <"$work/keys"
fi
echo "tidy cpp passed ($count files)"
