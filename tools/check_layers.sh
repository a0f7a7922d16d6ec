#!/usr/bin/env bash
# Checks the build graph's architecture (docs/architecture.md, "Layout"):
#   1. no cycle between Bazel packages among the production targets (every target but the
#      tests: a test may use its package's test helpers, which use the package);
#   2. the worker's layers, bottom to top runtime, compute, comm, cuda, data, model, fsdp,
#      train, then daemon and tools: none reaches a layer above it, the coordinator or the CLI;
#   3. no binary links a test helper (worker/testing);
#   4. the CLI links nothing from worker/ (its `sample` runs worker/tools' program instead);
#   5. no program or test that links SentencePiece links protobuf (Debian's
#      libsentencepiece carries its own copy, whose symbols clash: tokenizer/BUILD).
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
# A query that fails (a pattern naming no package, a broken BUILD file) fails its check:
# its empty answer would otherwise read as "nothing reached".
query() {
  local errors
  errors=$(mktemp)
  if ! bazel query --noshow_progress "$@" 2>"$errors"; then
    echo "bazel query $*: $(grep ERROR "$errors" | head -3)" >&2
    rm -f "$errors"
    return 1
  fi
  rm -f "$errors"
}

# expect_none NAME QUERY: the check NAME passes when the query answers nothing, and
# otherwise fails naming (the first 300 characters of) what it answered.
expect_none() {
  local answer
  if ! answer=$(query "$2"); then
    result "$1" failed "bazel query failed"
  elif [ -z "$answer" ]; then
    result "$1" passed "nothing reached"
  else
    result "$1" failed "reaches $(tr '\n' ' ' <<<"$answer" | cut -c1-300)"
  fi
}

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

# 2. The layers, bottom to top: each reaches nothing above it (its tests aside), and none
# reaches the coordinator or the CLI.
layers=(runtime compute comm cuda data model fsdp train daemon tools)
for ((i = 0; i < ${#layers[@]}; i++)); do
  layer=${layers[$i]}
  above='//server/... + //client/... + //worker:all'
  for upper in "${layers[@]:i+1}"; do above+=" + //worker/$upper/..."; done
  if [ ! -d "worker/$layer" ]; then
    result "$layer-layer" failed "no folder worker/$layer"
    continue
  fi
  expect_none "$layer-layer" "deps(//worker/$layer/... except tests(//worker/$layer/...)) intersect ($above)"
done

# 3. Test helpers are testonly, so Bazel refuses them in a binary; this shows none is.
expect_none testing-not-in-binaries 'deps(kind(cc_binary, //...)) intersect //worker/testing/...'

# 4. What the CLI's targets list in `deps` (not `data`, which carries the sampler program)
# and all that those reach.
expect_none cli-links-no-worker 'deps(labels(deps, //client/...)) intersect //worker/...'

# 5. The tokenizer's programs and tests that link SentencePiece link no protobuf (the CLI
# and the sampler carry shardwise-tokenize as `data`, and run it).
expect_none sentencepiece-without-protobuf \
  'deps(kind("cc_(binary|test)", rdeps(//tokenizer:*, //tokenizer:sentencepiece_api))) intersect //third_party/system:protobuf'
exit $((failures > 0))
