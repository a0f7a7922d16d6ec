#!/usr/bin/env bash
# Lists the C++ functions longer than LIMIT lines (default 80), longest first, with Universal
# Ctags ("LINES FILE:LINE NAME" on stderr), then "functions length passed|failed" (./dev.sh
# counts it) with how many of all the functions are 40 lines or shorter. Exits 1 if one is
# over LIMIT. Usage: tools/function_lengths.sh [LIMIT]
set -uo pipefail
cd "$(dirname "$0")/.."
limit=${1:-80}
lengths=$(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | grep -v '^third_party/' |
  ctags --languages=C++ --langmap=C++:+.cu.cuh --kinds-C++=f --fields=+ne --output-format=json \
    -L - -f - 2>/dev/null |
  /usr/bin/python3 -c '
import json, sys
limit = int(sys.argv[1])
rows, total, short = [], 0, 0
for line in sys.stdin:
    tag = json.loads(line)
    if "end" not in tag:
        continue
    length = tag["end"] - tag["line"] + 1
    total += 1
    short += length <= 40
    if length > limit:
        rows.append((length, "%s:%d" % (tag["path"], tag["line"]), tag["name"]))
print("%d of %d functions within 40 lines" % (short, total))  # the first line: the share
for row in sorted(rows, reverse=True):
    print(*row)
' "$limit") || { echo "tools/function_lengths.sh: ctags or python failed" >&2; exit 2; }
share=$(head -1 <<<"$lengths")
long=$(tail -n +2 <<<"$lengths")
if [ -n "$long" ]; then
  echo "$long" >&2
  echo "functions length failed ($(wc -l <<<"$long") over $limit lines, listed above; $share)"
  exit 1
fi
echo "functions length passed (none over $limit lines; $share)"
