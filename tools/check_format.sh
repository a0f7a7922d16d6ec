#!/usr/bin/env bash
# Checks that every C++ and CUDA file in the tree is formatted as .clang-format says
# (Google style, 100 columns) by Debian's clang-format-14. Prints "format cpp
# passed|failed" (./dev.sh counts it) and the files that differ; exits 1 if any does.
# To fix: clang-format-14 -i FILE...
set -uo pipefail
cd "$(dirname "$0")/.."

mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | grep -v '^third_party/')
unformatted=()
for file in "${files[@]}"; do
  clang-format-14 --dry-run -Werror "$file" >/dev/null 2>&1 || unformatted+=("$file")
done
if [ ${#unformatted[@]} -eq 0 ]; then
  echo "format cpp passed (${#files[@]} files)"
else
  printf 'not formatted (clang-format-14 -i FILE): %s\n' "${unformatted[@]}" >&2
  echo "format cpp failed (${#unformatted[@]} of ${#files[@]} files)"
  exit 1
fi
