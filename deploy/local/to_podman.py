#!/usr/bin/env python3
"""Turns rendered Kubernetes manifests into what podman 4.3's `kube play` runs.

usage: to_podman.py RENDERED.yaml SECRETS_DIR > PODS.yaml

podman runs Pods, PersistentVolumeClaims (as named volumes) and a few controllers, but not
StatefulSets, Services or PodDisruptionBudgets, and it crashes on Secret volumes. So:
  - each StatefulSet becomes its replicas' Pods, named NAME-0, NAME-1, ... as a cluster
    names them, each with the claims of its volumeClaimTemplates (CLAIM-NAME-i);
  - a Secret volume becomes a hostPath volume of SECRETS_DIR/SECRET_NAME, a folder holding
    one file per key (for a volume listing `items`, a copy holding just those);
  - containers' ports are dropped: podman would publish each on the host;
  - PersistentVolumeClaims pass through; Services, PodDisruptionBudgets, NetworkPolicies
    and the Namespace are left out (named on stderr): podman has no counterpart (its pods
    share one network, which enforces no policy).
Everything else in the pod templates (commands, environment, probes, security contexts,
resources) goes to podman as written.
"""
import copy
import os
import shutil
import sys

import yaml

PASSED_THROUGH = {"PersistentVolumeClaim"}
LEFT_OUT = {"Namespace", "Service", "PodDisruptionBudget", "NetworkPolicy"}


def secret_as_host_path(volume, secrets_dir):
    """The folder of the secret's keys; with `items`, a folder of those keys only (so a
    worker mounting a CA certificate does not see the private key beside it)."""
    secret = volume.pop("secret")
    folder = os.path.join(secrets_dir, secret["secretName"])
    items = secret.get("items")
    if items:
        subset = f"{folder}.{'+'.join(item['key'] for item in items)}"
        os.makedirs(subset, exist_ok=True)
        for item in items:
            shutil.copy2(os.path.join(folder, item["key"]), os.path.join(subset, item["path"]))
            shutil.copystat(folder, subset)
            stat = os.stat(os.path.join(folder, item["key"]))
            os.chown(os.path.join(subset, item["path"]), stat.st_uid, stat.st_gid)
        os.chown(subset, os.stat(folder).st_uid, os.stat(folder).st_gid)
        folder = subset
    volume["hostPath"] = {"path": folder, "type": "Directory"}


def stateful_set_pods(stateful_set, secrets_dir):
    name = stateful_set["metadata"]["name"]
    namespace = stateful_set["metadata"].get("namespace")
    spec = stateful_set["spec"]
    for ordinal in range(spec.get("replicas", 1)):
        pod_name = f"{name}-{ordinal}"
        template = copy.deepcopy(spec["template"])
        pod_spec = template["spec"]
        pod_spec.setdefault("hostname", pod_name)
        for container in pod_spec["containers"]:
            # podman 4.3 publishes every containerPort on the host, where two pods' ports
            # collide; pods reach each other on the podman network without it.
            container.pop("ports", None)
        for volume in pod_spec.get("volumes", []):
            if "secret" in volume:
                secret_as_host_path(volume, secrets_dir)
        for claim_template in spec.get("volumeClaimTemplates", []):
            claim = copy.deepcopy(claim_template)
            claim_name = f"{claim['metadata']['name']}-{pod_name}"
            claim["metadata"]["name"] = claim_name
            if namespace:
                claim["metadata"]["namespace"] = namespace
            yield {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **claim}
            pod_spec.setdefault("volumes", []).append(
                {"name": claim_template["metadata"]["name"],
                 "persistentVolumeClaim": {"claimName": claim_name}})
        metadata = dict(template.get("metadata", {}), name=pod_name)
        if namespace:
            metadata["namespace"] = namespace
        yield {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def convert(objects, secrets_dir):
    for obj in objects:
        kind = obj["kind"]
        if kind in PASSED_THROUGH:
            yield obj
        elif kind == "StatefulSet":
            yield from stateful_set_pods(obj, secrets_dir)
        elif kind in LEFT_OUT:
            print(f"to_podman: left out {kind}/{obj['metadata']['name']} (no podman "
                  "counterpart)", file=sys.stderr)
        else:
            raise SystemExit(f"to_podman: {kind}/{obj['metadata']['name']}: not handled")


def main():
    rendered, secrets_dir = sys.argv[1], sys.argv[2]
    with open(rendered) as f:
        objects = [obj for obj in yaml.safe_load_all(f) if obj]
    # Claims first: podman creates a pod's volumes when it plays the pod.
    converted = sorted(convert(objects, secrets_dir),
                       key=lambda obj: obj["kind"] != "PersistentVolumeClaim")
    yaml.safe_dump_all(converted, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
