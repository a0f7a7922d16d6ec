#!/usr/bin/env bash
# Lists the C++ functions longer than LIMIT lines (default 80), longest first, with Universal
# Ctags ("LINES FILE:LINE NAME" on stderr), then "functions length passed|failed" (./dev.sh
# counts it). Exits 1 if there is one. Usage: tools/function_lengths.sh [LIMIT]
set -uo pipefail
cd "$(dirname "$0")/.."
limit=${1:-80}
long=$(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | grep -v '^third_party/' |
  ctags --languages=C++ --langmap=C++:+.cu.cuh --kinds-C++=f --fields=+ne --output-format=json \
    -L - -f - 2>/dev/null |
  /usr/bin/python3 -c '
import json, sys
limit = int(sys.argv[1])
rows = []
for line in sys.stdin:
    tag = json.loads(line)
    if "end" in tag and tag["end"] - tag["line"] + 1 > limit:
        rows.append((tag["end"] - tag["line"] + 1, "%s:%d" % (tag["path"], tag["line"]), tag["name"]))
for row in sorted(rows, reverse=True):
    print(*row)
' "$limit") || { echo "tools/function_lengths.sh: ctags or python failed" >&2; exit 2; }
if [ -n "$long" ]; then
  echo "$long" >&2
  echo "functions length failed ($(wc -l <<<"$long") over $limit lines, listed above)"
  exit 1
fi
echo "functions length passed (none over $limit lines)"
