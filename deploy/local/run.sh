#!/usr/bin/env bash
# Runs Shardwise's Kubernetes manifests (deploy/k8s/overlays/local) on this machine with
# `podman kube play`, as close to a cluster as one machine gets, and checks them:
#   1. the coordinator and 2 workers start from the image, as non-root, read-only, with
#      TLS and a client token, and the workers register under their pods' names;
#   2. a job (deploy/local/demo-job.yaml) trains over both workers on the shared volume;
#   3. one worker's pod is stopped mid-training as a node drain would (SIGTERM, 45 s
#      grace): the worker aborts its attempt, saying why, and exits well inside the grace;
#   4. the pod starts again, the job resumes from its checkpoint and SUCCEEDS, and its
#      model is on the shared volume;
#   5. the coordinator is replaced while a second job (no restarts allowed) trains, as a
#      rolling update does: its container stopped (SIGTERM, its 30 s grace) and started
#      again on the same state volume; the ranks train on, re-attach, and the job
#      SUCCEEDS in attempt 1 with nothing redone.
# Prints "kube <check> passed|failed|skipped" lines (./dev.sh counts them); exits 1 if
# any failed. Needs root (podman's rootful networks) and the image ./dev.sh images built.
#
# usage: deploy/local/run.sh [IMAGE]   (default localhost/shardwise-cpu:dev)
#   SHARDWISE_KUBE_KEEP=1 leaves the pods running afterwards, to look at.
set -uo pipefail
cd "$(dirname "$0")/../.."

IMAGE=${1:-localhost/shardwise-cpu:dev}
NETWORK=shardwise-local
export CONTAINERS_CONF="$PWD/deploy/local/containers.conf"
source tools/prerequisites.sh
WORK=$(mktemp -d -t shardwise-kube.XXXXXX)
PODS="$WORK/pods.yaml"
failures=0

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
result() {  # result CHECK passed|failed|skipped [why]
  echo "kube $1 $2${3:+ ($3)}"
  [ "$2" = failed ] && failures=$((failures + 1))
  return 0
}

# The image's CLI on the pods' network, as a client outside the cluster would be.
cli() {
  podman run --rm --network "$NETWORK" -v "$WORK/client:/client:ro" \
    -v "$PWD/deploy/local:/jobs:ro" "$IMAGE" shardwise \
    --coordinator=shardwise-coordinator-0:7070 --tls_ca=/client/ca.crt \
    --token_file=/client/token "$@"
}

# What a run that was killed may have left: this script's pods, volumes and network.
remove_deployment() {
  local pod
  for pod in $(podman pod ls --format '{{.Name}}' | grep -E '^shardwise-(coordinator|worker)-[0-9]+$'); do
    podman pod rm -f "$pod" >/dev/null 2>&1
  done
  podman volume rm -f shardwise-data state-shardwise-coordinator-0 >/dev/null 2>&1
  podman network rm -f "$NETWORK" >/dev/null 2>&1
}

teardown() {
  if [ -n "${SHARDWISE_KUBE_KEEP:-}" ]; then
    echo "left running (SHARDWISE_KUBE_KEEP): CONTAINERS_CONF=$CONTAINERS_CONF podman kube down $PODS" >&2
    return
  fi
  if [ -s "$PODS" ]; then
    if [ "$failures" -gt 0 ]; then
      for container in $(podman ps -a --format '{{.Names}}' | grep -v infra); do
        echo "--- podman logs $container" >&2
        podman logs "$container" 2>&1 | tail -30 >&2
      done
    fi
  fi
  remove_deployment
  rm -rf "$WORK"
}
trap teardown EXIT

# The Secrets a cluster would hold: the coordinator's certificate (naming the name the
# workers and clients dial) and CA, a tokens file with one admin token and the workers'
# token, and the workers' token itself.
make_secrets() {
  local tls="$WORK/secrets/shardwise-coordinator-tls" tokens="$WORK/secrets/shardwise-tokens"
  local worker_token="$WORK/secrets/shardwise-worker-token"
  mkdir -p "$tls" "$tokens" "$worker_token" "$WORK/client"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj /CN=shardwise-local-ca -keyout "$WORK/ca.key" -out "$tls/ca.crt" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=coordinator \
    -keyout "$tls/tls.key" -out "$WORK/coordinator.csr" 2>/dev/null
  printf 'subjectAltName=DNS:shardwise-coordinator-0,DNS:localhost,IP:127.0.0.1\n' >"$WORK/san"
  openssl x509 -req -days 1 -in "$WORK/coordinator.csr" -CA "$tls/ca.crt" -CAkey "$WORK/ca.key" \
    -CAcreateserial -extfile "$WORK/san" -out "$tls/tls.crt" 2>/dev/null
  # The token on stdout, the tokens file's entry on stderr.
  podman run --rm --network none "$IMAGE" shardwise token create --principal=local \
    --role=admin >"$WORK/client/token" 2>"$WORK/token-entry" || return 1
  podman run --rm --network none "$IMAGE" shardwise token create --principal=workers \
    --role=worker >"$worker_token/token" 2>>"$WORK/token-entry" || return 1
  { echo "tokens:"; grep -E '^ +(- principal|role|sha256|input_paths|output_paths|worker_names):' "$WORK/token-entry"; } >"$tokens/tokens"
  cp "$tls/ca.crt" "$WORK/client/ca.crt"
  # As a Secret volume would be: readable by the pods' user only.
  chown -R 65532:65532 "$WORK/secrets" "$WORK/client"
  chmod -R go-rwx "$WORK/secrets"
}

# Each pod keeps its IP and MAC addresses across restarts (podman gives a restarted pod
# new ones). On a cluster the workers reach the coordinator through its Service, whose
# virtual IP stays when the pod behind it is replaced; here, without Services, they reach
# it at its pod's name. Measured on a loaded machine before: with a new IP, and then with
# the same IP but a new MAC, 3 of 10 runs failed step 5, the workers' registrations
# staying CONNECTING or TRANSIENT_FAILURE for 26 to 34 s after the new coordinator
# served (past the re-attach grace): their neighbour (ARP) entries, kept fresh by the old
# sessions' traffic, still named the old pod for up to 30 s. That checks podman's
# network, not the coordinator's replacement.
SUBNET_PREFIX=10.89.231
start_pods() {
  kubectl kustomize deploy/k8s/overlays/local >"$WORK/rendered.yaml" &&
    /usr/bin/python3 deploy/local/to_podman.py "$WORK/rendered.yaml" "$WORK/secrets" >"$PODS" &&
    podman network create --subnet "$SUBNET_PREFIX.0/24" "$NETWORK" >/dev/null || return 1
  local addresses=() count i
  # podman kube play gives its --ip and --mac-address values to the pods in file order.
  count=$(grep -c '^kind: Pod$' "$PODS")
  for ((i = 0; i < count; i++)); do
    addresses+=(--ip "$SUBNET_PREFIX.$((10 + i))" --mac-address "$(printf '02:5a:00:00:00:%02x' $((10 + i)))")
  done
  podman kube play --network "$NETWORK" "${addresses[@]}" "$PODS" >/dev/null
}

# What a cluster's fsGroup does for a new volume: the pods' group may write to it.
# podman 4.3 does not apply fsGroup to named volumes.
share_data_volume() {
  local mountpoint
  mountpoint=$(podman volume inspect shardwise-data --format '{{.Mountpoint}}') &&
    chown 65532:65532 "$mountpoint"
}

tokenize() {
  podman run --rm --network none -v shardwise-data:/data \
    -v /usr/share/common-licenses:/licenses:ro "$IMAGE" \
    shardwise tokenize /licenses/GPL-3 /licenses/Apache-2.0 /licenses/MPL-2.0 -o /data/tokens >&2
}

idle_workers() { cli get workers 2>/dev/null | grep -c ' IDLE '; }

wait_for() {  # wait_for SECONDS COMMAND...: until COMMAND succeeds
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 1
  done
}

two_workers_idle() { [ "$(idle_workers)" -ge 2 ]; }
job_step() { cli get jobs 2>/dev/null | awk -v id="$1" '$1 == id {split($5, s, "/"); print s[1]}'; }
past_step() { [ "$(job_step "$1")" -ge "$2" ] 2>/dev/null; }
job_says() { cli describe "$1" 2>&1 | grep -q "$2"; }
# conmon writes a container's output to its log asynchronously: the last lines of a
# container that just exited may reach `podman logs` a moment later.
container_logged() { podman logs "$1" 2>&1 | grep -q "$2"; }

main() {
  if [ "$(id -u)" -ne 0 ]; then
    result deploy skipped "needs root for podman's networks"
    return 0
  fi
  # What podman runs the pods with (netavark's iptables among them): a missing one is
  # named here with its Debian package, not by a failed container six layers down.
  local missing
  missing=$(missing_prerequisites kube)
  if ! report_missing "$missing"; then
    result deploy failed "missing Debian packages: $(packages_of "$missing")"
    return 1
  fi
  if ! podman image exists "$IMAGE"; then
    result deploy failed "no image $IMAGE: run ./dev.sh images"
    return 1
  fi
  log "deploying overlays/local with podman kube play (work folder $WORK)"
  remove_deployment
  if ! { make_secrets && start_pods && share_data_volume && tokenize; }; then
    result deploy failed "could not start the pods"
    return 1
  fi
  if wait_for 60 two_workers_idle; then
    result deploy passed
  else
    result deploy failed "the workers did not register within 60 s"
    return 1
  fi
  cli get workers >&2

  log "submitting deploy/local/demo-job.yaml"
  local job
  job=$(cli submit /jobs/demo-job.yaml 2>&1 | tail -1)
  if ! wait_for 120 past_step "$job" 20; then
    result train failed "job '$job' did not pass step 20 within 120 s"
    return 1
  fi
  result train passed

  # The worker's container alone, as the kubelet does: the pod (its network) stays until
  # the container has exited, so the worker can still tell the coordinator.
  log "stopping shardwise-worker-1 as a drain would (SIGTERM, 45 s grace)"
  local started=$SECONDS
  podman stop --time 45 shardwise-worker-1-worker >/dev/null
  local took=$((SECONDS - started))
  if [ $took -lt 45 ] &&
    wait_for 10 container_logged shardwise-worker-1-worker "shutting down: aborting $job"; then
    result drain passed "the worker aborted its attempt and left in ${took}s"
  else
    result drain failed "took ${took}s; the worker's log does not show the abort"
  fi
  if wait_for 10 job_says "$job" "the worker is shutting down"; then
    result drain-reported passed "the job's failure names the shutdown"
  else
    result drain-reported failed "the job does not say the worker was shutting down"
  fi
  podman start shardwise-worker-1-worker >/dev/null

  log "waiting for the job to resume from its checkpoint and finish"
  if cli watch "$job" >&2 && cli describe "$job" >"$WORK/describe.txt" 2>&1 &&
    grep -q "resumed from the checkpoint of step" "$WORK/describe.txt" &&
    podman run --rm --network none -v shardwise-data:/data:ro "$IMAGE" \
      shardwise sample /data/kube-demo/gpt.safetensors --tokens 40 >&2; then
    result resume passed
  else
    cat "$WORK/describe.txt" >&2
    result resume failed "the job did not succeed after the worker came back"
  fi
  cli get jobs >&2
  replace_coordinator
}

coordinator_serves() { cli get jobs >/dev/null 2>&1; }

# Step 5: a rolling update's replacement of the coordinator, as the StatefulSet does it
# (the same pod name and state claim; here the same pod, its container stopped and
# started): the job must not notice beyond a pause in its reports.
replace_coordinator() {
  local job
  sed -e 's/^name: kube-demo/name: kube-upgrade/' -e 's/max_restarts: 2/max_restarts: 0/' \
    -e 's#/data/kube-demo#/data/kube-upgrade#g' deploy/local/demo-job.yaml \
    >"$WORK/client/upgrade-job.yaml"
  job=$(cli submit /client/upgrade-job.yaml 2>&1 | tail -1)
  if ! wait_for 120 past_step "$job" 20; then
    result coordinator-replaced failed "job '$job' did not pass step 20 within 120 s"
    return
  fi
  log "replacing the coordinator while $job trains (SIGTERM, 30 s grace, then a new start)"
  local started=$SECONDS
  podman stop --time 30 shardwise-coordinator-0-coordinator >/dev/null
  local took=$((SECONDS - started))
  podman start shardwise-coordinator-0-coordinator >/dev/null
  # The client retries an unreachable coordinator for a second or two only: wait for it.
  if ! wait_for 60 coordinator_serves; then
    result coordinator-replaced failed "the coordinator did not serve within 60 s of its start"
    return
  fi
  if cli watch "$job" >&2 && cli describe "$job" >"$WORK/upgrade.txt" 2>&1 &&
    grep -q "^State: *SUCCEEDED" "$WORK/upgrade.txt" &&
    grep -q "^Attempt: *1 (restarts 0 of 0)" "$WORK/upgrade.txt" &&
    grep -q "re-attached after the coordinator restarted" "$WORK/upgrade.txt" &&
    ! grep -q "resumed from the checkpoint" "$WORK/upgrade.txt"; then
    result coordinator-replaced passed "stopped in ${took}s; the job finished in attempt 1"
  else
    cat "$WORK/upgrade.txt" >&2
    echo "== the coordinator was stopped in ${took}s; the last lines of its log" >&2
    podman logs --tail 40 shardwise-coordinator-0-coordinator >&2 2>&1 || true
    local pod
    for pod in shardwise-worker-0 shardwise-worker-1; do
      echo "== the last lines of $pod's log" >&2
      podman logs --tail 40 "$pod-worker" >&2 2>&1 || true
    done
    result coordinator-replaced failed "the job did not finish in its first attempt"
  fi
}

main
exit $((failures > 0))
