"""What a cluster stores for others to act on (RBAC, Ingress, IngressClass, NetworkPolicy, PriorityClass):
served as on a cluster, so the manifests and charts that carry them apply; and the Priority admission
plugin, which reads PriorityClasses.

Facts (kube's printers and the Priority plugin, kubernetes/kubernetes): the two system classes exist from
the start with 2000001000 and 2000000000; a pod naming a class gets its value and preemption policy, one
naming a missing class is refused with `no PriorityClass with name … was found`, one naming none gets the
globalDefault class; a binding's roleRef may not change.
"""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes
import pytest
from apiserver_harness import Kubectl, RunningAPIServer

pytestmark = pytest.mark.slow  # drives real kubectl binaries

MANIFESTS = """\
apiVersion: v1
kind: ServiceAccount
metadata: {name: operator}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: gpu-reader}
rules:
- apiGroups: [""]
  resources: [nodes, pods]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: operator-reads-gpus}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gpu-reader}
subjects:
- {kind: ServiceAccount, name: operator, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-editor}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-edits-pods}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-editor}
subjects:
- {kind: Group, name: team-a, apiGroup: rbac.authorization.k8s.io}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: inference}
spec:
  ingressClassName: nginx
  rules:
  - host: infer.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: infer, port: {number: 80}}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-all}
spec:
  podSelector: {}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: training-low}
value: 100
description: preemptible training
"""


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_a_chart_s_manifests_apply_and_show_as_on_a_cluster(
    kubectl: Kubectl, tmp_path: Path, version: str
) -> None:
    manifest = tmp_path / "chart.yaml"
    manifest.write_text(MANIFESTS)
    out = kubectl("apply", "-f", str(manifest), version=version).stdout
    for created in (
        "clusterrole.rbac.authorization.k8s.io/gpu-reader",
        "clusterrolebinding.rbac.authorization.k8s.io/operator-reads-gpus",
        "rolebinding.rbac.authorization.k8s.io/team-edits-pods",
        "ingress.networking.k8s.io/inference",
        "networkpolicy.networking.k8s.io/deny-all",
        "priorityclass.scheduling.k8s.io/training-low",
    ):
        assert created in out
    bindings = kubectl(
        "get", "clusterrolebinding", "operator-reads-gpus", "-o", "wide", version=version
    ).stdout
    header, row = bindings.splitlines()
    assert header.split() == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert row.split()[1] == "ClusterRole/gpu-reader" and row.split()[-1] == "default/operator"
    ingress = kubectl("get", "ing", "inference", version=version).stdout.splitlines()
    assert ingress[0].split() == ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]
    assert ingress[1].split()[:4] == ["inference", "nginx", "infer.example.com", "80"]
    policy = json.loads(kubectl("get", "netpol", "deny-all", "-o", "json", version=version).stdout)
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    classes = kubectl("get", "pc", version=version).stdout
    assert "system-node-critical" in classes and "2000001000" in classes and "training-low" in classes
    # applying again changes nothing
    assert "unchanged" in kubectl("apply", "-f", str(manifest), version=version).stdout


def test_a_binding_s_role_may_not_change_and_must_be_a_role(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "chart.yaml"
    manifest.write_text(MANIFESTS)
    kubectl("apply", "-f", str(manifest))
    changed = kubectl(
        "patch", "rolebinding", "team-edits-pods", "-p", '{"roleRef":{"name":"other"}}', check=False
    )
    assert changed.returncode == 1 and "cannot change roleRef" in changed.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: bad}\n"
        "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-editor}\n"
    )
    refused = kubectl("apply", "-f", str(bad), check=False)
    assert refused.returncode == 1 and 'roleRef.kind: Unsupported value: "Role"' in refused.stderr


def test_pods_get_their_priority_class_s_value(
    apiserver: RunningAPIServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    core = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))
    scheduling = kubernetes.client.SchedulingV1Api(core.api_client)
    scheduling.create_priority_class(
        {"metadata": {"name": "batch-never"}, "value": 50, "preemptionPolicy": "Never"}
    )

    def pod(name: str, priority_class: str | None) -> dict:
        spec: dict = {"containers": [{"name": "main", "image": "busybox"}]}
        if priority_class:
            spec["priorityClassName"] = priority_class
        return {"metadata": {"name": name}, "spec": spec}

    created = core.create_namespaced_pod("default", pod("prio-batch", "batch-never"))
    assert (created.spec.priority, created.spec.preemption_policy) == (50, "Never")
    system = core.create_namespaced_pod("default", pod("prio-system", "system-node-critical"))
    assert system.spec.priority == 2000001000
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core.create_namespaced_pod("default", pod("prio-missing", "no-such-class"))
    assert refused.value.status == 403
    assert (
        'pods \\"prio-missing\\" is forbidden: no PriorityClass with name no-such-class was found'
        in refused.value.body
    )

    plain = core.create_namespaced_pod("default", pod("prio-plain", None))
    assert plain.spec.priority == 0 and plain.spec.priority_class_name is None
    scheduling.create_priority_class({"metadata": {"name": "everyone"}, "value": 7, "globalDefault": True})
    try:
        defaulted = core.create_namespaced_pod("default", pod("prio-default", None))
        assert (defaulted.spec.priority_class_name, defaulted.spec.priority) == ("everyone", 7)
    finally:
        scheduling.delete_priority_class("everyone")
    with pytest.raises(kubernetes.client.ApiException) as immutable:
        scheduling.patch_priority_class("batch-never", {"value": 60})
    assert immutable.value.status == 422 and "may not be changed in an update" in immutable.value.body
