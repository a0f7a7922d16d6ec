#!/usr/bin/env bash
# Renders every kustomization under deploy/k8s with `kubectl kustomize` and validates each
# rendered object against the Kubernetes (and Prometheus Operator) schemas, offline
# (deploy/validate: npm's kubernetes-models, installed from its package-lock.json). Also
# checks that the validator refuses deploy/validate/testdata/invalid.yaml, that the
# NetworkPolicy admits the flows the daemons need and no others (validate/network_policy.py),
# that the alerting rules pass promtool's checks and their unit tests
# (validate/alerts_test.yaml), and that the Grafana dashboard is well-formed JSON.
# Prints "manifests <name> passed|failed" lines (./dev.sh counts them); exits 1 on a failure.
set -uo pipefail
cd "$(dirname "$0")"

failures=0
result() {  # result NAME passed|failed [why]
  echo "manifests $1 $2${3:+ ($3)}"
  [ "$2" = failed ] && failures=$((failures + 1))
  return 0
}

if [ ! -d validate/node_modules ] || [ validate/package-lock.json -nt validate/node_modules ]; then
  (cd validate && npm ci --no-audit --no-fund --loglevel=error >&2) ||
    { result npm-install failed "npm ci in deploy/validate"; exit 1; }
fi

rendered=$(mktemp -d)
trap 'rm -rf "$rendered"' EXIT
for kustomization in k8s/overlays/cpu k8s/overlays/gpu k8s/overlays/local k8s/monitoring; do
  name=${kustomization#k8s/}
  out="$rendered/${name//\//-}.yaml"
  # kustomize's deprecation warnings (the syntax Debian's kubectl 1.20 reads) go to stderr.
  if ! kubectl kustomize "$kustomization" >"$out" 2>"$out.err"; then
    cat "$out.err" >&2
    result "$name" failed "kubectl kustomize"
  elif node validate/validate.mjs "$out" >"$out.log"; then
    result "$name" passed "$(grep -c '^ok ' "$out.log") objects valid"
  else
    grep -v '^ok ' "$out.log" >&2
    result "$name" failed "invalid objects"
  fi
done

# The coordinator's liveness probe asks its `liveness` service, which stays SERVING while
# the process answers: the overall status turns NOT_SERVING on a full disk, and a probe on
# it would restart a coordinator that is holding unwritten changes (docs/operations.md).
for overlay in cpu gpu local; do
  if /usr/bin/python3 - "$rendered/overlays-$overlay.yaml" <<'PY'
import sys, yaml
probes = [c.get("livenessProbe") for d in yaml.safe_load_all(open(sys.argv[1]))
          if d and d.get("kind") == "StatefulSet" and d["metadata"]["name"].endswith("coordinator")
          for c in d["spec"]["template"]["spec"]["containers"]]
sys.exit(0 if probes and all(p and p.get("grpc", {}).get("service") == "liveness"
                             for p in probes) else 1)
PY
  then
    result "overlays/$overlay-coordinator-liveness" passed
  else
    result "overlays/$overlay-coordinator-liveness" failed "livenessProbe must ask the liveness service"
  fi
done

# A worker advertises its memory limit and is given ranks up to it: its request must be
# the same, or the pod uses more than Kubernetes reserved for it, and is evicted first.
for overlay in cpu gpu local; do
  if /usr/bin/python3 - "$rendered/overlays-$overlay.yaml" <<'PY'
import sys, yaml
resources = [c.get("resources", {}) for d in yaml.safe_load_all(open(sys.argv[1]))
             if d and d.get("kind") == "StatefulSet" and d["metadata"]["name"].endswith("worker")
             for c in d["spec"]["template"]["spec"]["containers"]]
sys.exit(0 if resources and all(
    r.get("requests", {}).get("memory") is not None and
    r.get("requests", {}).get("memory") == r.get("limits", {}).get("memory")
    for r in resources) else 1)
PY
  then
    result "overlays/$overlay-worker-memory" passed
  else
    result "overlays/$overlay-worker-memory" failed "a worker must request the memory it is limited to"
  fi
done

# The NetworkPolicy admits the data plane between workers only (and their metrics port to
# anyone), and every port of the coordinator: validate/network_policy.py evaluates it.
for overlay in cpu gpu local; do
  if /usr/bin/python3 validate/network_policy.py "$rendered/overlays-$overlay.yaml" \
    >"$rendered/policy-$overlay.log"; then
    result "overlays/$overlay-network-policy" passed
  else
    grep -v '^ok ' "$rendered/policy-$overlay.log" >&2
    result "overlays/$overlay-network-policy" failed "flows admitted or refused wrongly"
  fi
done
# That check can fail: without the policy, anyone reaches the workers' data plane.
/usr/bin/python3 -c 'import sys, yaml; yaml.safe_dump_all([d for d in yaml.safe_load_all(
  open(sys.argv[1])) if d and d["kind"] != "NetworkPolicy"], sys.stdout)' \
  "$rendered/overlays-cpu.yaml" >"$rendered/no-policy.yaml"
unguarded=$(/usr/bin/python3 validate/network_policy.py "$rendered/no-policy.yaml")
if grep -q '^WRONG other namespace -> worker data plane' <<<"$unguarded"; then
  result network-policy-check-can-fail passed
else
  result network-policy-check-can-fail failed "no policy, yet its check saw nothing wrong"
fi

# The alerting rules (the PrometheusRule's spec): promtool checks them and runs their unit
# tests, validate/alerts_test.yaml; and the tests can fail: without the rules, they do.
alert_rules() {  # alert_rules PROMTOOL RULES_SPEC_FILTER
  /usr/bin/python3 -c 'import sys, yaml; spec = yaml.safe_load(open(sys.argv[1]))["spec"]
if sys.argv[2] == "empty":
    for group in spec["groups"]: group["rules"] = []
yaml.safe_dump(spec, open(sys.argv[3], "w"))' k8s/monitoring/alerts.yaml "$2" "$rendered/rules.yaml" &&
    cp validate/alerts_test.yaml "$rendered/alerts_test.yaml" &&
    "$1" check rules "$rendered/rules.yaml" >"$rendered/rules.log" 2>&1 &&
    "$1" test rules "$rendered/alerts_test.yaml" >>"$rendered/rules.log" 2>&1
}
if ! promtool=$(validate/promtool.sh); then
  result alert-rules failed "no promtool (validate/promtool.sh)"
elif alert_rules "$promtool" whole; then
  result alert-rules passed "$(grep -c -- '- alert:' k8s/monitoring/alerts.yaml) alerts"
  if alert_rules "$promtool" empty; then
    result alert-rules-tests-can-fail failed "their tests pass without any rule"
  else
    result alert-rules-tests-can-fail passed
  fi
else
  cat "$rendered/rules.log" >&2
  result alert-rules failed "promtool check rules / test rules"
fi

# The validator can fail: each object in the fixture is refused.
expected=$(grep -c '^kind:' validate/testdata/invalid.yaml)
refused=$(node validate/validate.mjs validate/testdata/invalid.yaml | grep -c '^invalid ')
if [ "$refused" -eq "$expected" ]; then
  result validator-refuses-invalid passed
else
  result validator-refuses-invalid failed "refused $refused of $expected invalid objects"
fi

# Its queries' metric names are checked against what the daemons export by
# tests/metrics_test; here, that Grafana can load it.
if /usr/bin/python3 -m json.tool grafana/shardwise.json >/dev/null; then
  result grafana-dashboard passed
else
  result grafana-dashboard failed "not JSON"
fi
exit $((failures > 0))
