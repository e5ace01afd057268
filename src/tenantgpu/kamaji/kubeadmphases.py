"""Kamaji's kubeadm phases inside a tenant: what lets a worker join with `kubeadm join`.

Kamaji's soot manager (internal/resources/kubeadm_phases.go) runs four kubeadm phases against each tenant
API server: `PhaseUploadConfigKubeadm`, `PhaseUploadConfigKubelet`, `PhaseBootstrapToken` (without creating a
token: the operator makes one with `kubeadm token create --print-join-command`) and `PhaseClusterAdminRBAC`.

The upload phases (kubeadm's phases/uploadconfig, Kamaji's internal/kubeadm/uploadconfig.go; the documents
are built in `kubeadmconfig`):

- ConfigMap `kube-system/kubeadm-config`, key `ClusterConfiguration`, and Role and RoleBinding
  `kubeadm:nodes-kubeadm-config` (get that ConfigMap) for the groups
  `system:bootstrappers:kubeadm:default-node-token` and `system:nodes`, in that order. An update sets
  the key and keeps the ConfigMap's other keys (kubeadm's CreateOrMutate).
- ConfigMap `kube-system/kubelet-config` (the name since kubeadm 1.24), key `kubelet`, and Role and
  RoleBinding `kubeadm:kubelet-config` for `system:nodes` and the bootstrappers' group, in that order. An
  update replaces the ConfigMap (CreateOrUpdate).
- `PhaseClusterAdminRBAC` (kubeadm's EnsureAdminClusterRoleBinding): ClusterRoleBinding
  `kubeadm:cluster-admins`, ClusterRole `cluster-admin` for the group `kubeadm:cluster-admins`; created
  once, an existing one is left as it is.

Facts of the bootstrap-token phase from kubeadm 1.33
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
import logging
from typing import Any
from urllib.parse import urlsplit

import yaml

from tenantgpu.controlplane.bootstrapsigner import CLUSTER_INFO, KUBECONFIG_KEY
from tenantgpu.controlplane.bootstrapsigner import PUBLIC_NAMESPACE as KUBE_PUBLIC
from tenantgpu.kamaji.kubeadmaddons import apply_addons
from tenantgpu.kamaji.kubeadmconfig import (
    KubeadmParameters,
    KubeletConfigurationError,
    cluster_configuration,
    go_yaml,
    kubelet_configuration,
)
from tenantgpu.kamaji.writepermissions import apply_write_permissions
from tenantgpu.kubeclient import KubeClient
from tenantgpu.kubeclient.ensure import read_or_create

log = logging.getLogger(__name__)

RBAC = "rbac.authorization.k8s.io/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"
KUBE_SYSTEM = "kube-system"
BOOTSTRAP_GROUP = "system:bootstrappers:kubeadm:default-node-token"
NODES_GROUP = "system:nodes"
CLUSTER_INFO_ROLE = "kubeadm:bootstrap-signer-clusterinfo"
KUBEADM_CONFIG = "kubeadm-config"
KUBEADM_CONFIG_KEY = "ClusterConfiguration"
KUBEADM_CONFIG_ROLE = "kubeadm:nodes-kubeadm-config"
KUBELET_CONFIG = "kubelet-config"
KUBELET_CONFIG_KEY = "kubelet"
KUBELET_CONFIG_ROLE = "kubeadm:kubelet-config"
CLUSTER_ADMINS = "kubeadm:cluster-admins"

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
        _configmap(CLUSTER_INFO, KUBE_PUBLIC, KUBECONFIG_KEY, cluster_info_kubeconfig(server, ca_pem)),
        *_configmap_reader(CLUSTER_INFO_ROLE, KUBE_PUBLIC, CLUSTER_INFO, [("User", "system:anonymous")]),
    ]


def _configmap_reader(
    name: str, namespace: str, configmap: str, subjects: list[tuple[str, str]]
) -> list[tuple[str, Obj]]:
    """Role `name` that may get one ConfigMap of `namespace`, and its RoleBinding for `subjects`
    ((kind, name) pairs)."""
    return [
        (
            "roles",
            {
                "apiVersion": RBAC,
                "kind": "Role",
                "metadata": {"name": name, "namespace": namespace},
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["configmaps"],
                        "resourceNames": [configmap],
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
                "metadata": {"name": name, "namespace": namespace},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": name},
                "subjects": [{"apiGroup": RBAC_GROUP, "kind": kind, "name": who} for kind, who in subjects],
            },
        ),
    ]


def _configmap(name: str, namespace: str, key: str, value: str) -> tuple[str, Obj]:
    return (
        "configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {key: value},
        },
    )


def upload_config_kubeadm_phase(params: KubeadmParameters, endpoint: str) -> list[tuple[str, Obj]]:
    """`PhaseUploadConfigKubeadm`: the ClusterConfiguration and who may read it."""
    document = go_yaml(cluster_configuration(params, endpoint))
    return [
        _configmap(KUBEADM_CONFIG, KUBE_SYSTEM, KUBEADM_CONFIG_KEY, document),
        *_configmap_reader(
            KUBEADM_CONFIG_ROLE,
            KUBE_SYSTEM,
            KUBEADM_CONFIG,
            [("Group", BOOTSTRAP_GROUP), ("Group", NODES_GROUP)],
        ),
    ]


def upload_config_kubelet_phase(params: KubeadmParameters) -> list[tuple[str, Obj]]:
    """`PhaseUploadConfigKubelet`: the KubeletConfiguration and who may read it; KubeletConfigurationError
    when the TCP's JSON patches do not apply."""
    document = go_yaml(kubelet_configuration(params))
    return [
        _configmap(KUBELET_CONFIG, KUBE_SYSTEM, KUBELET_CONFIG_KEY, document),
        *_configmap_reader(
            KUBELET_CONFIG_ROLE,
            KUBE_SYSTEM,
            KUBELET_CONFIG,
            [("Group", NODES_GROUP), ("Group", BOOTSTRAP_GROUP)],
        ),
    ]


def cluster_admin_rbac_phase() -> list[tuple[str, Obj]]:
    """`PhaseClusterAdminRBAC`: kubeadm's binding of its admins' group to cluster-admin."""
    return [("clusterrolebindings", _binding(CLUSTER_ADMINS, "cluster-admin", "Group", CLUSTER_ADMINS))]


async def apply_kubeadm_phases(
    client: KubeClient, server: str, ca_pem: bytes, params: KubeadmParameters, webhook_ca: bytes = b""
) -> None:
    """The write permissions' webhook configuration (`writepermissions`, trusting `webhook_ca`), then
    Kamaji's four phases, in its order, then the CoreDNS and kube-proxy add-ons (`kubeadmaddons`); the
    endpoint is the advertised address at the server's port."""
    endpoint = f"{params.address}:{urlsplit(server).port}"
    # Kamaji's write-permissions controller is a reconciler of its own: the phases' creates, which a
    # limited tenant refuses (kubeadm creates first), must not keep the webhook from coming or going.
    await apply_write_permissions(client, params.write_permissions, webhook_ca)
    objects = upload_config_kubeadm_phase(params, endpoint)
    try:
        objects += upload_config_kubelet_phase(params)
    except KubeletConfigurationError as err:
        # Kamaji's phase fails and is retried; the tenant has no kubelet-config until the TCP is fixed.
        log.error("tenant %s: PhaseUploadConfigKubelet failed: %s", params.name, err)
    objects += bootstrap_token_phase(server, ca_pem)
    objects += cluster_admin_rbac_phase()
    for resource, body in objects:
        await _create_or_update(client, resource, body)
    await apply_addons(client, params, endpoint)


async def _create_or_update(client: KubeClient, resource: str, body: Obj) -> None:
    """kubeadm's CreateOrUpdate and CreateOrMutate: an update of a ConfigMap sets the phase's keys and keeps
    the others (so the bootstrapsigner's signatures on cluster-info stay), except for kubelet-config,
    which is replaced; a role's rules and a binding's subjects are brought back; kubeadm's admins' binding
    is only created. Read first: Kamaji runs a phase again only when its checksum changed, so a
    restarted lab whose objects stand as they should writes nothing (nor is refused by a tenant whose
    writes are limited)."""
    meta = body["metadata"]
    current, created = await read_or_create(client, resource, body)
    if created or meta["name"] == CLUSTER_ADMINS:
        return
    if resource == "configmaps":
        keep = {} if meta["name"] == KUBELET_CONFIG else current.get("data") or {}
        data = {**keep, **body["data"]}
        if data == current.get("data"):
            return
        updated = {**current, "data": data}
    else:
        # roleRef is immutable; rules and subjects are what an update may bring back
        fields = {k: v for k, v in body.items() if k in ("rules", "subjects")}
        if all(current.get(k) == v for k, v in fields.items()):
            return
        updated = {**current, **fields}
    await client.update(resource, updated)
