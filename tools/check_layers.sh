#!/usr/bin/env bash
# Checks the build graph's architecture (docs/architecture.md, "Layout"):
#   1. no cycle between Bazel packages among the production targets (every target but the
#      tests: a test may use its package's test helpers, which use the package);
#   2. the training engine (worker/{runtime,compute,comm,data,model,fsdp,cuda}) and
#      worker/train depend on nothing of the daemon, the coordinator or the CLI;
#   3. no binary links a test helper (worker/testing).
# Prints "layers <check> passed|failed" lines (./dev.sh counts them); exits 1 on a failure.
# Visibility in the BUILD files keeps these from breaking; this shows that they hold.
set -uo pipefail
cd "$(dirname "$0")/.."

failures=0
result() {  # result NAME passed|failed [why]
  echo "layers $1 $2${3:+ ($3)}"
  [ "$2" = failed ] && failures=$((failures + 1))
  return 0
}
query() { bazel query --noshow_progress "$@" 2>/dev/null; }

# 1. Every direct dependency between two production targets, as "FROM TO" labels; the
# packages' strongly connected components of more than one package are the cycles.
edges=$(query '//... except tests(//...)' --output=graph --nograph:factored |
  sed -n 's/^ *"\(\/\/[^"]*\)" -> "\(\/\/[^"]*\)"$/\1 \2/p')
if [ -z "$edges" ]; then
  result package-cycles failed "bazel query printed no dependencies"
else
  cycles=$(/usr/bin/python3 -c '
import sys
from collections import defaultdict
graph, example = defaultdict(set), {}
for line in sys.stdin.read().splitlines():
    a, b = line.split()
    pa, pb = a.split(":")[0], b.split(":")[0]
    if pa != pb:
        graph[pa].add(pb)
        example.setdefault((pa, pb), f"{a} -> {b}")
# Tarjan: the strongly connected components of the package graph.
index, low, stack, on_stack, components = {}, {}, [], set(), []
def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v); on_stack.add(v)
    for w in graph[v]:
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on_stack:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        component = []
        while True:
            w = stack.pop(); on_stack.discard(w); component.append(w)
            if w == v: break
        if len(component) > 1: components.append(sorted(component))
sys.setrecursionlimit(10000)
for v in list(graph):
    if v not in index: visit(v)
for component in components:
    edges = [example[(a, b)] for a in component for b in component if (a, b) in example]
    print(" <-> ".join(component) + ": " + "; ".join(edges))
' <<<"$edges")
  if [ -z "$cycles" ]; then
    result package-cycles passed "$(wc -l <<<"$edges") dependencies"
  else
    echo "$cycles" >&2
    result package-cycles failed "$(wc -l <<<"$cycles") cycles, listed above"
  fi
fi

# 2. What each lower layer may never reach.
upper='//worker/daemon/... + //worker:all + //server/... + //client/...'
for layer in runtime compute comm data model fsdp cuda train; do
  [ -d "worker/$layer" ] || { result "$layer-below-daemon" failed "no folder worker/$layer"; continue; }
  reached=$(query "deps(//worker/$layer/... except tests(//worker/$layer/...)) intersect ($upper)")
  if [ -z "$reached" ]; then
    result "$layer-below-daemon" passed
  else
    result "$layer-below-daemon" failed "reaches $(tr '\n' ' ' <<<"$reached")"
  fi
done

# 3. Test helpers are testonly, so Bazel refuses them in a binary; this shows none is.
linked=$(query 'deps(kind(cc_binary, //...)) intersect //worker/testing/...')
if [ -z "$linked" ]; then
  result testing-not-in-binaries passed
else
  result testing-not-in-binaries failed "$(tr '\n' ' ' <<<"$linked")"
fi
exit $((failures > 0))
