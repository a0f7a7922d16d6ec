#!/usr/bin/env python3
"""Checks what a rendered deployment's NetworkPolicies let reach its pods.

usage: network_policy.py RENDERED.yaml

Evaluates Kubernetes' NetworkPolicy ingress rules (networking.k8s.io/v1) over the pods the
rendered StatefulSets make, for the flows Shardwise needs and the ones it must refuse:
  - worker -> worker, any TCP port (Gloo endpoints and data-plane probe listeners are
    ephemeral ports): admitted;
  - anyone -> a worker's metrics port (Prometheus runs wherever it runs): admitted;
  - the coordinator, or a pod of another namespace -> a worker's other ports: refused
    (the data plane is neither encrypted nor authenticated);
  - anyone -> the coordinator's gRPC, health and metrics ports: admitted.
Prints one line per flow and exits 1 when any comes out otherwise. A selector this
checker does not model (matchExpressions, ipBlock, endPort) fails the check rather than
being guessed at.
"""
import sys

import yaml

WORKER = "shardwise-worker"
COORDINATOR = "shardwise-coordinator"
NAME_LABEL = "app.kubernetes.io/name"
SOME_EPHEMERAL_PORT = 39511


class Unmodelled(Exception):
    pass


def labels_match(selector, labels):
    """Whether a label selector selects `labels`; an empty selector selects all."""
    if selector is None:
        return True
    if selector.get("matchExpressions"):
        raise Unmodelled("matchExpressions")
    return all(labels.get(key) == value for key, value in (selector.get("matchLabels") or {}).items())


def peer_matches(peer, policy_namespace, source):
    if "ipBlock" in peer:
        raise Unmodelled("ipBlock")
    if "namespaceSelector" in peer:
        if not labels_match(peer["namespaceSelector"], source["namespace_labels"]):
            return False
    elif source["namespace"] != policy_namespace:
        return False  # a podSelector alone selects pods of the policy's own namespace
    return labels_match(peer.get("podSelector"), source["labels"])


def port_matches(rule_port, pod, port):
    if "endPort" in rule_port:
        raise Unmodelled("endPort")
    if rule_port.get("protocol", "TCP") != "TCP":
        return False
    wanted = rule_port.get("port")
    if wanted is None:
        return True
    if isinstance(wanted, str):  # a named port of the destination pod
        return pod["named_ports"].get(wanted) == port
    return wanted == port


def admits(policies, pod, source, port):
    """Whether `source` may open a TCP connection to `pod` on `port`."""
    selecting = [p for p in policies
                 if namespace_of(p) == pod["namespace"]
                 and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
                 and labels_match(p["spec"].get("podSelector") or {}, pod["labels"])]
    if not selecting:
        return True  # a pod no policy selects is not isolated
    for policy in selecting:
        for rule in policy["spec"].get("ingress") or []:
            peers = rule.get("from") or []
            ports = rule.get("ports") or []
            if peers and not any(peer_matches(p, namespace_of(policy), source)
                                 for p in peers):
                continue
            if ports and not any(port_matches(p, pod, port) for p in ports):
                continue
            return True
    return False


def namespace_of(obj):
    """An object's namespace, as kubectl would apply it without one."""
    return obj["metadata"].get("namespace", "default")


def namespace_labels(objects, name):
    """A namespace's labels: the rendered Namespace's, and the one Kubernetes sets."""
    labels = {"kubernetes.io/metadata.name": name}
    for obj in objects:
        if obj["kind"] == "Namespace" and obj["metadata"]["name"] == name:
            labels.update(obj["metadata"].get("labels") or {})
    return labels


def pods_of(objects):
    """One pod per StatefulSet (its replicas are alike), by the app name label."""
    pods = {}
    for obj in objects:
        if obj["kind"] != "StatefulSet":
            continue
        template = obj["spec"]["template"]
        labels = template["metadata"].get("labels", {})
        named_ports = {p["name"]: p["containerPort"]
                       for c in template["spec"]["containers"] for p in c.get("ports", [])
                       if "name" in p}
        pods[labels.get(NAME_LABEL)] = {
            "namespace": namespace_of(obj),
            "namespace_labels": namespace_labels(objects, namespace_of(obj)),
            "labels": labels,
            "named_ports": named_ports,
        }
    return pods


def flows(pods):
    """(what, destination pod, source, port, admitted?) for each flow that must hold."""
    worker, coordinator = pods[WORKER], pods[COORDINATOR]
    namespace = worker["namespace"]
    outsider = {"namespace": "elsewhere",
                "namespace_labels": {"kubernetes.io/metadata.name": "elsewhere"},
                "labels": {"app": "anything"}, "named_ports": {}}
    stranger = {"namespace": namespace, "namespace_labels": worker["namespace_labels"],
                "labels": {"app": "other"}, "named_ports": {}}
    yield "worker -> worker data plane", worker, worker, SOME_EPHEMERAL_PORT, True
    yield "other namespace -> worker metrics", worker, outsider, worker["named_ports"]["metrics"], True
    yield "coordinator -> worker data plane", worker, coordinator, SOME_EPHEMERAL_PORT, False
    yield "other namespace -> worker data plane", worker, outsider, SOME_EPHEMERAL_PORT, False
    yield "other pod of the namespace -> worker data plane", worker, stranger, SOME_EPHEMERAL_PORT, False
    for name in ("grpc", "health", "metrics"):
        yield f"other namespace -> coordinator {name}", coordinator, outsider, \
            coordinator["named_ports"][name], True
        yield f"worker -> coordinator {name}", coordinator, worker, \
            coordinator["named_ports"][name], True


def main():
    with open(sys.argv[1]) as f:
        objects = [obj for obj in yaml.safe_load_all(f) if obj]
    policies = [obj for obj in objects if obj["kind"] == "NetworkPolicy"]
    pods = pods_of(objects)
    wrong = 0
    try:
        for what, pod, source, port, expected in flows(pods):
            got = admits(policies, pod, source, port)
            verdict = "ok" if got == expected else "WRONG"
            wrong += got != expected
            print(f"{verdict} {what} (port {port}): {'admitted' if got else 'refused'}")
    except Unmodelled as unmodelled:
        print(f"WRONG a policy uses {unmodelled}, which this check does not model")
        return 1
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
