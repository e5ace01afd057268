"""Install HAMi into a tenant's API like its Helm chart (release `hami` in kube-system): its service
accounts and RBAC, webhook configuration, Service, kube-system pods."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from tenantgpu.kubeclient import ApiError, KubeClient

NAMESPACE = "kube-system"
SERVICE = "hami-scheduler"
WEBHOOK_CONFIGURATION = "hami-webhook"  # the chart's "<fullname>-webhook"
WEBHOOK_NAME = "vgpu.hami.io"
WEBHOOK_PATH = "/webhook"
WEBHOOK_IGNORE_LABEL = "hami.io/webhook"
_IMAGES = {
    "kube-scheduler": "registry.k8s.io/kube-scheduler:v1.31.4",
    "konnectivity-agent": "registry.k8s.io/kas-network-proxy/proxy-agent:v0.31.0",
}
CHART_LABELS = {"app.kubernetes.io/name": "hami", "app.kubernetes.io/instance": "hami"}
CHART_VERSION = "2.10.0"
# The chart's common labels (`hami-vgpu.labels`), as `helm install hami` renders them.
RELEASE_LABELS = {
    "helm.sh/chart": f"hami-{CHART_VERSION}",
    **CHART_LABELS,
    "app.kubernetes.io/version": CHART_VERSION,
    "app.kubernetes.io/managed-by": "Helm",
}
SCHEDULER_ACCOUNT = "hami-scheduler"
DEVICE_PLUGIN_ACCOUNT = "hami-device-plugin"
# The components' pods are shown as a kubelet shows its static pods: mirror pods owned by their Node,
# which `kubectl drain` leaves alone and the kubelet re-creates when they are deleted.
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
CONFIG_HASH_ANNOTATION = "kubernetes.io/config.hash"
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"


def webhook_configuration(
    ca_bundle: bytes, *, url: str | None = None, service_port: int = 443, failure_policy: str = "Ignore"
) -> dict[str, Any]:
    """HAMi's MutatingWebhookConfiguration: rules, selectors, failurePolicy, timeout as in the chart."""
    client_config: dict[str, Any] = {"caBundle": base64.b64encode(ca_bundle).decode()}
    if url:
        client_config["url"] = url  # the chart's customURL mode
    else:
        client_config["service"] = {
            "name": SERVICE,
            "namespace": NAMESPACE,
            "path": WEBHOOK_PATH,
            "port": service_port,
        }
    not_ignored = {
        "matchExpressions": [{"key": WEBHOOK_IGNORE_LABEL, "operator": "NotIn", "values": ["ignore"]}]
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_CONFIGURATION, "labels": dict(CHART_LABELS)},
        "webhooks": [
            {
                "name": WEBHOOK_NAME,
                "admissionReviewVersions": ["v1beta1"],
                "clientConfig": client_config,
                "failurePolicy": failure_policy,
                "matchPolicy": "Equivalent",
                "namespaceSelector": not_ignored,
                "objectSelector": not_ignored,
                "reinvocationPolicy": "Never",
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                        "scope": "*",
                    }
                ],
                "sideEffects": "None",
                "timeoutSeconds": 10,
            }
        ],
    }


def scheduler_service(webhook_port: int, metrics_port: int | None = None) -> dict[str, Any]:
    """Service `kube-system/hami-scheduler` (ports and selector as in the chart). Its Endpoints are the
    endpoints controller's, from the scheduler pod, as on a cluster; the API server reaches the webhook
    by the service's name through the tunnel, which routes it to where the webhook listens."""
    labels = {"app.kubernetes.io/component": "hami-scheduler", **CHART_LABELS}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "type": "ClusterIP",
            "selector": labels,
            "ports": [
                {"name": "http", "port": 443, "targetPort": webhook_port, "protocol": "TCP"},
                {"name": "monitor", "port": 31993, "targetPort": metrics_port or 9395, "protocol": "TCP"},
            ],
        },
    }


def system_pod(
    name: str,
    node: str,
    component: str,
    containers: list[str],
    labels: dict[str, str],
    priority_class: str = "system-node-critical",
) -> dict[str, Any]:
    """A kube-system pod pinned to `node` (e.g. the konnectivity agent); the worker's kubelet runs it, and
    shows it as the mirror pod of a static pod. Its priority class is its chart's: HAMi's scheduler and
    device plugin are `system-node-critical`, Kamaji's konnectivity agent `system-cluster-critical`, so a
    user's pod never preempts them."""
    config_hash = hashlib.sha256(f"{NAMESPACE}/{name}@{node}".encode()).hexdigest()[:32]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/component": component, WEBHOOK_IGNORE_LABEL: "ignore", **labels},
            "annotations": {
                CONFIG_HASH_ANNOTATION: config_hash,
                MIRROR_POD_ANNOTATION: config_hash,
                CONFIG_SOURCE_ANNOTATION: "file",
            },
        },
        "spec": {
            "nodeName": node,
            "priorityClassName": priority_class,
            "containers": [
                {"name": c, "image": _IMAGES.get(c, "projecthami/hami:v2.10.0")} for c in containers
            ],
        },
    }


def _rule(resources: str, verbs: str, group: str = "") -> dict[str, Any]:
    return {"apiGroups": [group], "resources": resources.split(), "verbs": verbs.split()}


def _binding(kind: str, name: str, role_kind: str, role: str, account: str) -> dict[str, Any]:
    component = "hami-device-plugin" if account == DEVICE_PLUGIN_ACCOUNT else "hami-scheduler"
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"app.kubernetes.io/component": component, **RELEASE_LABELS},
    }
    if kind == "RoleBinding":
        meta["namespace"] = NAMESPACE
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}],
    }


def rbac_objects() -> list[tuple[str, dict[str, Any]]]:
    """The chart's identities, as (resource, object): the scheduler's and the device plugin's service
    accounts, their ClusterRoles (`hami-scheduler`; the device plugin's `hami-device-plugin-monitor`), the
    scheduler's bindings to them and to kube's `system:kube-scheduler` and `system:volume-scheduler` (its
    pod also runs kube-scheduler), and its Role for leader-election leases in its namespace."""
    scheduler = {"app.kubernetes.io/component": "hami-scheduler", **RELEASE_LABELS}
    plugin = {"app.kubernetes.io/component": "hami-device-plugin", **RELEASE_LABELS}
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        (
            "serviceaccounts",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": SCHEDULER_ACCOUNT, "namespace": NAMESPACE, "labels": scheduler},
            },
        ),
        (
            "serviceaccounts",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": DEVICE_PLUGIN_ACCOUNT, "namespace": NAMESPACE, "labels": plugin},
            },
        ),
        (
            "clusterroles",
            {
                "apiVersion": rbac,
                "kind": "ClusterRole",
                "metadata": {"name": SCHEDULER_ACCOUNT, "labels": scheduler},
                "rules": [
                    _rule("pods configmaps", "get list watch patch"),
                    _rule("pods/binding", "create"),
                    _rule("nodes", "get list patch watch"),
                    _rule("events", "create get list"),
                    _rule("resourcequotas", "get list watch"),
                ],
            },
        ),
        (
            "clusterroles",
            {
                "apiVersion": rbac,
                "kind": "ClusterRole",
                # the device plugin's template names it without the component labels
                "metadata": {"name": f"{DEVICE_PLUGIN_ACCOUNT}-monitor"},
                "rules": [
                    _rule("pods", "get create watch list update patch"),
                    _rule("nodes", "get update list patch"),
                    _rule("events", "list create update"),
                ],
            },
        ),
        (
            "clusterrolebindings",
            _binding(
                "ClusterRoleBinding",
                f"{SCHEDULER_ACCOUNT}-kube",
                "ClusterRole",
                "system:kube-scheduler",
                SCHEDULER_ACCOUNT,
            ),
        ),
        (
            "clusterrolebindings",
            _binding(
                "ClusterRoleBinding",
                f"{SCHEDULER_ACCOUNT}-volume",
                "ClusterRole",
                "system:volume-scheduler",
                SCHEDULER_ACCOUNT,
            ),
        ),
        (
            "clusterrolebindings",
            _binding(
                "ClusterRoleBinding", SCHEDULER_ACCOUNT, "ClusterRole", SCHEDULER_ACCOUNT, SCHEDULER_ACCOUNT
            ),
        ),
        (
            "roles",
            {
                "apiVersion": rbac,
                "kind": "Role",
                "metadata": {"name": SCHEDULER_ACCOUNT, "namespace": NAMESPACE, "labels": scheduler},
                "rules": [_rule("leases", "create list watch get update patch", "coordination.k8s.io")],
            },
        ),
        (
            "rolebindings",
            _binding("RoleBinding", SCHEDULER_ACCOUNT, "Role", SCHEDULER_ACCOUNT, SCHEDULER_ACCOUNT),
        ),
        (
            "clusterrolebindings",
            _binding(
                "ClusterRoleBinding",
                DEVICE_PLUGIN_ACCOUNT,
                "ClusterRole",
                f"{DEVICE_PLUGIN_ACCOUNT}-monitor",
                DEVICE_PLUGIN_ACCOUNT,
            ),
        ),
    ]


async def install_identities(client: KubeClient) -> None:
    """The chart's service accounts and RBAC (`rbac_objects`), written before its components start, as
    `helm install` writes them before their pods run."""
    await _ensure_namespace(client)
    for resource, body in rbac_objects():
        await _apply(client, resource, body)


async def _ensure_namespace(client: KubeClient) -> None:
    try:
        await client.create("namespaces", {"metadata": {"name": NAMESPACE}})
    except ApiError as err:
        if err.reason != "AlreadyExists":
            raise


def _suffix(text: str, n: int = 5) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def runtime_class(name: str) -> dict[str, Any]:
    """The RuntimeClass HAMi's chart creates with `devicePlugin.createRuntimeClass` (a pre-install hook):
    named by `devicePlugin.runtimeClassName`, with the NVIDIA container toolkit's handler."""
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": name, "annotations": {"helm.sh/hook": "pre-install,pre-upgrade"}},
        "handler": "nvidia",
    }


def system_pods(
    scheduler_node: str, device_plugin_nodes: list[str], runtime_class_name: str = ""
) -> list[dict[str, Any]]:
    """HAMi's kube-system pods as they appear in a cluster; the simulated kubelet runs them. The device
    plugin's DaemonSet names the chart's runtime class, when one is set."""
    pods = [
        system_pod(
            f"hami-scheduler-{_suffix(scheduler_node, 10)[:5]}",
            scheduler_node,
            "hami-scheduler",
            ["kube-scheduler", "vgpu-scheduler-extender"],
            CHART_LABELS,
        )
    ]
    for node in device_plugin_nodes:
        pod = system_pod(
            f"hami-device-plugin-{_suffix(node)}",
            node,
            "hami-device-plugin",
            ["device-plugin", "vgpu-monitor"],
            CHART_LABELS,
        )
        if runtime_class_name:
            pod["spec"]["runtimeClassName"] = runtime_class_name
        pods.append(pod)
    return pods


def konnectivity_agent_pod(node: str) -> dict[str, Any]:
    """The konnectivity agent of `node` as Kamaji's DaemonSet shows it in the tenant's kube-system."""
    return system_pod(
        f"konnectivity-agent-{_suffix(node)}",
        node,
        "konnectivity-agent",
        ["konnectivity-agent"],
        {"k8s-app": "konnectivity-agent"},
        priority_class="system-cluster-critical",
    )


def owned_by_node(pod: dict[str, Any], node_name: str, node_uid: str) -> dict[str, Any]:
    """The pod with the ownerReference a mirror pod has to its Node (what `kubectl drain` recognises)."""
    owner = {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid, "controller": True}
    return {**pod, "metadata": {**pod["metadata"], "ownerReferences": [owner]}}


async def _owned_by_node(client: KubeClient, pod: dict[str, Any]) -> dict[str, Any]:
    """`owned_by_node` with the Node as the API has it now (the pod as it is when the Node is not there)."""
    node_name = pod["spec"]["nodeName"]
    try:
        node = await client.get("nodes", node_name)
    except ApiError as err:
        if err.code != 404:
            raise
        return pod
    return owned_by_node(pod, node_name, node["metadata"]["uid"])


async def _apply(client: KubeClient, resource: str, body: dict[str, Any]) -> dict[str, Any]:
    """Create, or replace an existing object (keeping its resourceVersion)."""
    meta = body["metadata"]
    try:
        return await client.create(resource, body, meta.get("namespace"))
    except ApiError as err:
        if err.reason != "AlreadyExists":
            raise
    if resource == "pods":
        return await client.get(resource, meta["name"], meta.get("namespace"))
    current = await client.get(resource, meta["name"], meta.get("namespace"))
    body = {**body, "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]}}
    if resource == "services":
        body["spec"] = {**current.get("spec", {}), **body["spec"]}
    return await client.update(resource, body)


async def install_hami(
    client: KubeClient,
    webhook_port: int,
    ca_bundle: bytes,
    *,
    webhook_url: str | None = None,
    metrics_port: int | None = None,
    scheduler_node: str | None = None,
    device_plugin_nodes: list[str] | None = None,
    runtime_class_name: str = "",
) -> None:
    """Create HAMi's objects in the tenant: MWC `hami-webhook` (webhook `vgpu.hami.io`), Service
    `kube-system/hami-scheduler` (its Endpoints are the endpoints controller's), and — when nodes are given — the scheduler and device-plugin pods.
    With `runtime_class_name` the chart's RuntimeClass is created first (`createRuntimeClass`).

    With `webhook_url` the configuration dials that URL (the chart's customURL); otherwise it names the
    service, which the API server reaches through its egress (the tunnel).
    """
    await _ensure_namespace(client)
    await _apply(client, "services", scheduler_service(webhook_port, metrics_port))
    await _apply(client, "mutatingwebhookconfigurations", webhook_configuration(ca_bundle, url=webhook_url))
    if runtime_class_name:
        await _apply(client, "runtimeclasses", runtime_class(runtime_class_name))
    if scheduler_node:
        nodes = device_plugin_nodes or [scheduler_node]
        for pod in system_pods(scheduler_node, nodes, runtime_class_name):
            await _apply(client, "pods", await _owned_by_node(client, pod))


async def show_konnectivity_agents(client: KubeClient, nodes: list[str]) -> None:
    """Record one kube-system pod per worker for its tunnel agent, so `kubectl get pods -n kube-system`
    shows what Kamaji's konnectivity-agent DaemonSet would run there."""
    for node in nodes:
        await _apply(client, "pods", await _owned_by_node(client, konnectivity_agent_pod(node)))
