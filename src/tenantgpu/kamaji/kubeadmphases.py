"""Kamaji's `PhaseBootstrapToken` inside a tenant: what lets a worker join with `kubeadm join`.

Kamaji (internal/resources/kubeadm_phases.go, internal/kubeadm/bootstraptoken.go) runs kubeadm's
bootstrap-token phase against each tenant API server, without creating a token (the operator makes one
with `kubeadm token create --print-join-command`). Facts from kubeadm 1.33
(cmd/kubeadm/app/phases/bootstraptoken/node/tlsbootstrap.go, clusterinfo/clusterinfo.go, constants.go):

- ClusterRole `kubeadm:get-nodes` (get nodes) and ClusterRoleBindings for the group
  `system:bootstrappers:kubeadm:default-node-token`: `kubeadm:get-nodes`, `kubeadm:kubelet-bootstrap`
  (ClusterRole `system:node-bootstrapper`: create CSRs), `kubeadm:node-autoapprove-bootstrap`
  (`system:certificates.k8s.io:certificatesigningrequests:nodeclient`: the csrapproving controller
  approves their kubelets' first certificate); `kubeadm:node-autoapprove-certificate-rotation`
  (`…:selfnodeclient`) for `system:nodes`; `kubeadm:apiserver-kubelet-client` (`system:kubelet-api-admin`)
  for the API server's kubelet client `kube-apiserver-kubelet-client`.
- ConfigMap `kube-public/cluster-info` with key `kubeconfig`: a kubeconfig naming only the cluster
  (server and CA), which kube-controller-manager's bootstrapsigner signs for each token; Role and
  RoleBinding `kubeadm:bootstrap-signer-clusterinfo` let `system:anonymous` get it, so `kubeadm join`
  can discover the cluster before it holds any credential.
"""

from __future__ import annotations

import base64
from typing import Any

import yaml

from tenantgpu.controlplane.bootstrapsigner import CLUSTER_INFO, KUBECONFIG_KEY
from tenantgpu.controlplane.bootstrapsigner import PUBLIC_NAMESPACE as KUBE_PUBLIC
from tenantgpu.kubeclient import ApiError, KubeClient

RBAC = "rbac.authorization.k8s.io/v1"
BOOTSTRAP_GROUP = "system:bootstrappers:kubeadm:default-node-token"
CLUSTER_INFO_ROLE = "kubeadm:bootstrap-signer-clusterinfo"

Obj = dict[str, Any]


def _binding(name: str, role: str, subject_kind: str, subject: str) -> Obj:
    return {
        "apiVersion": RBAC,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": subject_kind, "name": subject}],
    }


def cluster_info_kubeconfig(server: str, ca_pem: bytes) -> str:
    """The `kubeconfig` value of cluster-info: one unnamed cluster, as kubeadm's clientcmd writes it."""
    config = {
        "apiVersion": "v1",
        "clusters": [
            {
                "cluster": {
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                    "server": server,
                },
                "name": "",
            }
        ],
        "contexts": None,
        "current-context": "",
        "kind": "Config",
        "preferences": {},
        "users": None,
    }
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


def bootstrap_token_phase(server: str, ca_pem: bytes) -> list[tuple[str, Obj]]:
    """The phase's objects as (resource, object), in the order kubeadm writes them."""
    return [
        (
            "clusterroles",
            {
                "apiVersion": RBAC,
                "kind": "ClusterRole",
                "metadata": {"name": "kubeadm:get-nodes"},
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
            },
        ),
        ("clusterrolebindings", _binding("kubeadm:get-nodes", "kubeadm:get-nodes", "Group", BOOTSTRAP_GROUP)),
        (
            "clusterrolebindings",
            _binding("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", "Group", BOOTSTRAP_GROUP),
        ),
        (
            "clusterrolebindings",
            _binding(
                "kubeadm:node-autoapprove-bootstrap",
                "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
                "Group",
                BOOTSTRAP_GROUP,
            ),
        ),
        (
            "clusterrolebindings",
            _binding(
                "kubeadm:node-autoapprove-certificate-rotation",
                "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
                "Group",
                "system:nodes",
            ),
        ),
        (
            "clusterrolebindings",
            _binding(
                "kubeadm:apiserver-kubelet-client",
                "system:kubelet-api-admin",
                "User",
                "kube-apiserver-kubelet-client",
            ),
        ),
        (
            "configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": CLUSTER_INFO, "namespace": KUBE_PUBLIC},
                "data": {KUBECONFIG_KEY: cluster_info_kubeconfig(server, ca_pem)},
            },
        ),
        (
            "roles",
            {
                "apiVersion": RBAC,
                "kind": "Role",
                "metadata": {"name": CLUSTER_INFO_ROLE, "namespace": KUBE_PUBLIC},
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["configmaps"],
                        "resourceNames": [CLUSTER_INFO],
                        "verbs": ["get"],
                    }
                ],
            },
        ),
        (
            "rolebindings",
            {
                "apiVersion": RBAC,
                "kind": "RoleBinding",
                "metadata": {"name": CLUSTER_INFO_ROLE, "namespace": KUBE_PUBLIC},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": CLUSTER_INFO_ROLE,
                },
                "subjects": [
                    {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:anonymous"}
                ],
            },
        ),
    ]


async def apply_bootstrap_token_phase(client: KubeClient, server: str, ca_pem: bytes) -> None:
    """Create or update the phase's objects (kubeadm's CreateOrUpdate: an update keeps what the phase does
    not set, so the bootstrapsigner's signatures on cluster-info stay)."""
    for resource, body in bootstrap_token_phase(server, ca_pem):
        meta = body["metadata"]
        try:
            await client.create(resource, body, meta.get("namespace"))
            continue
        except ApiError as err:
            if err.reason != "AlreadyExists":
                raise
        current = await client.get(resource, meta["name"], meta.get("namespace"))
        if resource == "configmaps":
            data = {**(current.get("data") or {}), **body["data"]}
            if data == current.get("data"):
                continue
            updated = {**current, "data": data}
        else:
            # roleRef is immutable; rules and subjects are what an update may bring back
            fields = {k: v for k, v in body.items() if k in ("rules", "subjects")}
            if all(current.get(k) == v for k, v in fields.items()):
                continue
            updated = {**current, **fields}
        await client.update(resource, updated)
