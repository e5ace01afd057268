"""Kamaji's konnectivity add-on inside a tenant: the agent's ServiceAccount, the ClusterRoleBinding the
konnectivity server authenticates under, and the agent workload (a DaemonSet, or a Deployment).

Facts from Kamaji (internal/resources/konnectivity/agent.go, service_account_resource.go,
cluster_role_binding_resource.go, constants.go; internal/utilities/utilities.go and args.go):

- ServiceAccount `kube-system/konnectivity-agent`; ClusterRoleBinding `system:konnectivity-server`, which
  binds the user `system:konnectivity-server` (the server's client certificate) to
  `system:auth-delegator` and carries the addon-manager labels. Its name is also the audience of the
  agent's projected token.
- The workload `kube-system/konnectivity-agent`, selected by `k8s-app: konnectivity-agent`; its pods are
  `system-cluster-critical`, run on Linux nodes, tolerate what `spec.addons.konnectivity.agent.tolerations`
  says, and run `/proxy-agent` with `--proxy-server-host`/`--proxy-server-port` pointing at the tenant's
  konnectivity server. The image tag defaults to `v0.<minor>.0` of the tenant's Kubernetes release.
  The arguments are `--flag=value` strings sorted as text; `extraArgs` override or add to them.
- Every object carries Kamaji's labels (`kamaji.clastix.io/project: kamaji`, `…/name: <tcp>`,
  `…/component: <resource>`). Kamaji writes them by create-or-update, setting only its own fields on an
  object that exists, and removes them when the add-on is switched off, but only those with its label.
- Switching `mode` deletes the workload of the other kind.

Where the lab differs: the agent's port is the one the konnectivity server really listens on (Kamaji's
8132 would collide between tenants on one host), which is also what the TCP's status reports.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from tenantgpu.kubeclient import ApiError, KubeClient

AGENT_NAME = "konnectivity-agent"
AGENT_NAMESPACE = "kube-system"
CLUSTER_ROLE_BINDING = "system:konnectivity-server"
AGENT_TOKEN = "konnectivity-agent-token"
TOKEN_DIRECTORY = "/var/run/secrets/tokens"
DEFAULT_IMAGE = "registry.k8s.io/kas-network-proxy/proxy-agent"
DEFAULT_TOLERATIONS: tuple[dict[str, str], ...] = ({"key": "CriticalAddonsOnly", "operator": "Exists"},)
PROJECT_LABEL = "kamaji.clastix.io/project"
PROJECT = "kamaji"
NAME_LABEL = "kamaji.clastix.io/name"
COMPONENT_LABEL = "kamaji.clastix.io/component"
SELECTOR = {"k8s-app": AGENT_NAME}
_RESOURCES = {"DaemonSet": "daemonsets", "Deployment": "deployments"}
_MINOR = re.compile(r"^v?\d+\.(\d+)")

Obj = dict[str, Any]


@dataclass(frozen=True)
class AgentSpec:
    """What Kamaji needs to write the agent into a tenant: the TCP's name, where the konnectivity server
    listens, and `spec.addons.konnectivity.agent` with its defaults applied."""

    tcp_name: str
    address: str
    port: int
    image: str = DEFAULT_IMAGE
    version: str = ""
    mode: str = "DaemonSet"
    replicas: int | None = None
    host_network: bool = False
    tolerations: tuple[Obj, ...] = DEFAULT_TOLERATIONS
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    @property
    def kind(self) -> str:
        """The workload's kind: the asked-for mode, else Kamaji's fallback, a DaemonSet."""
        return self.mode if self.mode in _RESOURCES else "DaemonSet"

    def to_json(self) -> Obj:
        return {
            "tcp_name": self.tcp_name,
            "address": self.address,
            "port": self.port,
            "image": self.image,
            "version": self.version,
            "mode": self.mode,
            "replicas": self.replicas,
            "host_network": self.host_network,
            "tolerations": [dict(t) for t in self.tolerations],
            "extra_args": list(self.extra_args),
        }

    @classmethod
    def from_json(cls, data: Obj) -> AgentSpec:
        replicas = data.get("replicas")
        return cls(
            tcp_name=str(data["tcp_name"]),
            address=str(data["address"]),
            port=int(data["port"]),
            image=str(data.get("image") or DEFAULT_IMAGE),
            version=str(data.get("version") or ""),
            mode=str(data.get("mode") or "DaemonSet"),
            replicas=None if replicas is None else int(replicas),
            host_network=bool(data.get("host_network")),
            tolerations=tuple(dict(t) for t in data.get("tolerations") or ()),
            extra_args=tuple(str(a) for a in data.get("extra_args") or ()),
        )


def agent_spec(tcp: Obj, address: str, port: int) -> AgentSpec:
    """The agent a TenantControlPlane asks for (`spec.addons.konnectivity.agent`), the version following
    its Kubernetes release when none is given."""
    spec = tcp.get("spec") or {}
    agent = ((spec.get("addons") or {}).get("konnectivity") or {}).get("agent") or {}
    version = str(agent.get("version") or "")
    if not version:
        match = _MINOR.match(str((spec.get("kubernetes") or {}).get("version") or ""))
        version = f"v0.{match.group(1)}.0" if match else ""
    tolerations = agent.get("tolerations")
    replicas = agent.get("replicas")
    return AgentSpec(
        tcp_name=str((tcp.get("metadata") or {}).get("name") or ""),
        address=address,
        port=port,
        image=str(agent.get("image") or DEFAULT_IMAGE),
        version=version,
        mode=str(agent.get("mode") or "DaemonSet"),
        replicas=None if replicas is None else int(replicas),
        host_network=bool(agent.get("hostNetwork")),
        tolerations=DEFAULT_TOLERATIONS if tolerations is None else tuple(dict(t) for t in tolerations),
        extra_args=tuple(str(a) for a in agent.get("extraArgs") or ()),
    )


def kamaji_labels(tcp_name: str, resource: str) -> dict[str, str]:
    return {PROJECT_LABEL: PROJECT, NAME_LABEL: tcp_name, COMPONENT_LABEL: resource}


def agent_args(spec: AgentSpec) -> list[str]:
    """The agent's command-line flags: Kamaji's, then `extraArgs` (`--flag=value` or a bare `--flag`)
    over them, rendered as `flag=value` (or the bare flag) and sorted."""
    flags = {
        "-v": "8",
        "--logtostderr": "true",
        "--ca-cert": "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
        "--proxy-server-host": spec.address,
        "--proxy-server-port": str(spec.port),
        "--admin-server-port": "8133",
        "--health-server-port": "8134",
        "--service-account-token-path": f"{TOKEN_DIRECTORY}/{AGENT_TOKEN}",
    }
    for arg in spec.extra_args:
        flag, _, value = arg.partition("=")
        flags[flag] = value
    return sorted(flag if not value else f"{flag}={value}" for flag, value in flags.items())


def image(spec: AgentSpec) -> str:
    return f"{spec.image}:{spec.version}"


def service_account(spec: AgentSpec) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": AGENT_NAME,
            "namespace": AGENT_NAMESPACE,
            "labels": kamaji_labels(spec.tcp_name, "konnectivity-sa"),
        },
    }


def cluster_role_binding(spec: AgentSpec) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": CLUSTER_ROLE_BINDING,
            "labels": {
                **kamaji_labels(spec.tcp_name, "konnectivity-clusterrolebinding"),
                "kubernetes.io/cluster-service": "true",
                "addonmanager.kubernetes.io/mode": "Reconcile",
            },
        },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "system:auth-delegator",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": CLUSTER_ROLE_BINDING}],
    }


def workload(spec: AgentSpec) -> Obj:
    """The agent's DaemonSet or Deployment as Kamaji writes it into a tenant that has none."""
    return mutate_workload({"apiVersion": "apps/v1", "kind": spec.kind, "metadata": {}, "spec": {}}, spec)


def mutate_workload(current: Obj, spec: AgentSpec) -> Obj:
    """Kamaji's fields set on the workload as it is (a copy): what the API server defaulted, and any
    container beyond the first that is already gone, stays as it is."""
    obj = copy.deepcopy(current)
    meta = obj.setdefault("metadata", {})
    meta["name"] = AGENT_NAME
    meta["namespace"] = AGENT_NAMESPACE
    meta["labels"] = {**(meta.get("labels") or {}), **kamaji_labels(spec.tcp_name, AGENT_NAME)}
    body = obj.setdefault("spec", {})
    body["selector"] = {"matchLabels": dict(SELECTOR)}
    template = body.setdefault("template", {})
    template_meta = template.setdefault("metadata", {})
    template_meta["labels"] = {**(template_meta.get("labels") or {}), **SELECTOR}
    pod = template.setdefault("spec", {})
    pod["priorityClassName"] = "system-cluster-critical"
    pod["tolerations"] = [dict(t) for t in spec.tolerations]
    pod["hostNetwork"] = spec.host_network
    pod["nodeSelector"] = {"kubernetes.io/os": "linux"}
    pod["serviceAccountName"] = AGENT_NAME
    pod["volumes"] = [
        {
            "name": AGENT_TOKEN,
            "projected": {
                "sources": [
                    {
                        "serviceAccountToken": {
                            "path": AGENT_TOKEN,
                            "audience": CLUSTER_ROLE_BINDING,
                            "expirationSeconds": 3600,
                        }
                    }
                ],
                "defaultMode": 420,
            },
        }
    ]
    containers = pod.get("containers") or []
    if len(containers) != 1:
        containers = [{}]
    container = containers[0]
    container.update(
        name=AGENT_NAME,
        image=image(spec),
        command=["/proxy-agent"],
        args=agent_args(spec),
        volumeMounts=[{"mountPath": TOKEN_DIRECTORY, "name": AGENT_TOKEN}],
        livenessProbe={
            "httpGet": {"path": "/healthz", "port": 8134, "scheme": "HTTP"},
            "initialDelaySeconds": 15,
            "timeoutSeconds": 15,
            "periodSeconds": 10,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
    )
    pod["containers"] = containers
    if obj.get("kind") == "Deployment" and spec.replicas is not None:
        body["replicas"] = spec.replicas
    return obj


def kamaji_owned(obj: Obj | None) -> bool:
    """Whether Kamaji made the object: it carries Kamaji's project label."""
    return obj is not None and ((obj.get("metadata") or {}).get("labels") or {}).get(PROJECT_LABEL) == PROJECT


async def _create_or_update(client: KubeClient, resource: str, desired: Obj, current: Obj | None) -> None:
    """controller-runtime's CreateOrUpdate: create what is missing, update only what differs."""
    namespace = desired["metadata"].get("namespace")
    if current is None:
        try:
            await client.create(resource, desired, namespace)
            return
        except ApiError as err:
            if err.reason != "AlreadyExists":
                raise
        return
    if desired != current:
        await client.update(resource, desired)


def _labelled(current: Obj, wanted: Obj) -> Obj:
    """`current` with `wanted`'s labels merged in and, for a binding, its role and subjects."""
    merged = copy.deepcopy(current)
    meta = merged.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **wanted["metadata"]["labels"]}
    for key in ("roleRef", "subjects"):
        if key in wanted:
            merged[key] = copy.deepcopy(wanted[key])
    return merged


async def apply_agent(client: KubeClient, spec: AgentSpec) -> None:
    """Write the add-on into the tenant as Kamaji's reconciler does: the ServiceAccount, the
    ClusterRoleBinding, the workload of the asked-for kind; then the other kind's workload goes."""
    account = service_account(spec)
    current = await client.get_if_found("serviceaccounts", AGENT_NAME, AGENT_NAMESPACE)
    await _create_or_update(
        client, "serviceaccounts", account if current is None else _labelled(current, account), current
    )
    binding = cluster_role_binding(spec)
    current = await client.get_if_found("clusterrolebindings", CLUSTER_ROLE_BINDING, None)
    await _create_or_update(
        client, "clusterrolebindings", binding if current is None else _labelled(current, binding), current
    )
    kind = spec.kind
    resource = _RESOURCES[kind]
    current = await client.get_if_found(resource, AGENT_NAME, AGENT_NAMESPACE)
    desired = workload(spec) if current is None else mutate_workload(current, spec)
    await _create_or_update(client, resource, desired, current)
    for other_kind, other in _RESOURCES.items():
        if other_kind != kind:
            await delete_if_kamajis(client, other, AGENT_NAME, AGENT_NAMESPACE)


async def delete_if_kamajis(client: KubeClient, resource: str, name: str, namespace: str | None) -> None:
    """Delete the object if Kamaji made it (it carries Kamaji's label); leave anyone else's alone."""
    current = await client.get_if_found(resource, name, namespace)
    if not kamaji_owned(current):
        return
    try:
        await client.delete(resource, name, namespace)
    except ApiError as err:
        if err.code != 404:
            raise


async def remove_agent(client: KubeClient) -> None:
    """The add-on switched off: Kamaji deletes its objects, those that carry its label."""
    for resource in _RESOURCES.values():
        await delete_if_kamajis(client, resource, AGENT_NAME, AGENT_NAMESPACE)
    await delete_if_kamajis(client, "clusterrolebindings", CLUSTER_ROLE_BINDING, None)
    await delete_if_kamajis(client, "serviceaccounts", AGENT_NAME, AGENT_NAMESPACE)
