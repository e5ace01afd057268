"""Kamaji's konnectivity add-on writes the agent's ServiceAccount, ClusterRoleBinding and DaemonSet (or
Deployment) into the tenant, follows `spec.addons.konnectivity.agent`, and removes them when the add-on
is switched off (facts: Kamaji's internal/resources/konnectivity/agent.go and its neighbours)."""

from __future__ import annotations

import base64
import tempfile
from typing import Any

import kubernetes

from kamaji_wire import eventually, found, patch_tcp, tcp_matching
from tenantgpu.kamaji import model
from tenantgpu.kamaji.konnectivityagent import (
    AgentSpec,
    agent_args,
    agent_spec,
    mutate_workload,
    workload,
)
from tenantgpu.kamaji.plane import ManagementPlane

Obj = dict[str, Any]


def _tcp(version: str = "v1.31.4", agent: Obj | None = None) -> Obj:
    tcp = model.tenant_control_plane("tenant-a", version=version)
    if agent is not None:
        tcp["spec"]["addons"]["konnectivity"]["agent"] = agent
    return tcp


def test_the_agent_image_follows_the_tenant_s_minor_release_unless_a_version_is_given() -> None:
    assert agent_spec(_tcp("v1.31.4"), "127.0.0.1", 8132).version == "v0.31.0"
    assert agent_spec(_tcp("v1.33.1"), "127.0.0.1", 8132).version == "v0.33.0"
    pinned = agent_spec(_tcp(agent={"version": "v0.30.3", "image": "mirror.local/agent"}), "10.0.0.1", 8132)
    ds = workload(pinned)
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "mirror.local/agent:v0.30.3"


def test_the_default_agent_is_a_daemonset_tolerating_critical_addons_only() -> None:
    spec = agent_spec(_tcp(), "127.0.0.1", 40123)
    ds = workload(spec)
    assert ds["kind"] == "DaemonSet"
    assert ds["metadata"]["name"] == "konnectivity-agent" and ds["metadata"]["namespace"] == "kube-system"
    assert ds["metadata"]["labels"] == {
        "kamaji.clastix.io/project": "kamaji",
        "kamaji.clastix.io/name": "tenant-a",
        "kamaji.clastix.io/component": "konnectivity-agent",
    }
    assert ds["spec"]["selector"] == {"matchLabels": {"k8s-app": "konnectivity-agent"}}
    pod = ds["spec"]["template"]["spec"]
    assert ds["spec"]["template"]["metadata"]["labels"] == {"k8s-app": "konnectivity-agent"}
    assert pod["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["serviceAccountName"] == "konnectivity-agent"
    assert pod["hostNetwork"] is False
    token = pod["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]
    assert token == {
        "path": "konnectivity-agent-token",
        "audience": "system:konnectivity-server",
        "expirationSeconds": 3600,
    }
    (container,) = pod["containers"]
    assert container["command"] == ["/proxy-agent"]
    assert "--proxy-server-host=127.0.0.1" in container["args"]
    assert "--proxy-server-port=40123" in container["args"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8134, "scheme": "HTTP"}
    # An explicit empty list tolerates nothing.
    assert (
        workload(agent_spec(_tcp(agent={"tolerations": []}), "h", 1))["spec"]["template"]["spec"][
            "tolerations"
        ]
        == []
    )


def test_extra_args_override_kamaji_s_and_all_are_sorted_as_text() -> None:
    spec = AgentSpec("t", "192.0.2.7", 8132, extra_args=("-v=4", "--keepalive-time=30s", "--sync-forever"))
    args = agent_args(spec)
    assert args == sorted(args)
    assert "-v=4" in args and "-v=8" not in args
    assert "--keepalive-time=30s" in args and "--sync-forever" in args
    assert "--service-account-token-path=/var/run/secrets/tokens/konnectivity-agent-token" in args


def test_deployment_mode_takes_its_replicas_and_an_update_keeps_what_the_server_defaulted() -> None:
    spec = agent_spec(_tcp(agent={"mode": "Deployment", "replicas": 2}), "127.0.0.1", 8132)
    deployment = workload(spec)
    assert deployment["kind"] == "Deployment" and deployment["spec"]["replicas"] == 2
    live = {
        **deployment,
        "metadata": {**deployment["metadata"], "resourceVersion": "7", "labels": {"team": "platform"}},
    }
    live["spec"] = {**deployment["spec"], "progressDeadlineSeconds": 600}
    live["spec"]["template"]["spec"]["containers"] = [
        {**deployment["spec"]["template"]["spec"]["containers"][0], "imagePullPolicy": "IfNotPresent"},
        {"name": "sidecar", "image": "x"},
    ]
    updated = mutate_workload(live, spec)
    assert updated["metadata"]["resourceVersion"] == "7"
    assert updated["metadata"]["labels"]["team"] == "platform"  # labels are merged, not replaced
    assert updated["spec"]["progressDeadlineSeconds"] == 600
    # Kamaji resets the containers to one when there are more, and sets its fields on that one.
    (container,) = updated["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "konnectivity-agent" and "imagePullPolicy" not in container


# ---- over the wire: the management plane's controller writes into a real tenant API server


class _Tenant:
    """The tenant as its admin sees it through the official client."""

    def __init__(self, kubeconfig: str) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".kubeconfig", delete=False) as fh:
            fh.write(kubeconfig)
        config = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=fh.name, client_configuration=config)
        api = kubernetes.client.ApiClient(config)
        self.core = kubernetes.client.CoreV1Api(api)
        self.apps = kubernetes.client.AppsV1Api(api)
        self.rbac = kubernetes.client.RbacAuthorizationV1Api(api)

    def daemonset(self) -> Any:
        return found(lambda: self.apps.read_namespaced_daemon_set("konnectivity-agent", "kube-system"))

    def deployment(self) -> Any:
        return found(lambda: self.apps.read_namespaced_deployment("konnectivity-agent", "kube-system"))

    def binding(self) -> Any:
        return found(lambda: self.rbac.read_cluster_role_binding("system:konnectivity-server"))

    def account(self) -> Any:
        return found(lambda: self.core.read_namespaced_service_account("konnectivity-agent", "kube-system"))


async def test_a_ready_tenant_has_kamaji_s_agent_objects_and_they_follow_the_tcp(
    plane: ManagementPlane,
) -> None:
    await plane.client.create(
        model.TENANT_CONTROL_PLANES, model.tenant_control_plane("tenant-a", version="v1.31.4")
    )
    tcp = await tcp_matching(plane, lambda t: model.version_status(t) == "Ready")
    secret = await plane.client.get(model.SECRETS, "tenant-a-admin-kubeconfig", "default")
    tenant = _Tenant(base64.b64decode(secret["data"]["admin.conf"]).decode())

    ds = await eventually(tenant.daemonset, "the agent DaemonSet")
    port = tcp["status"]["addons"]["konnectivity"]["service"]["port"]
    args = ds.spec.template.spec.containers[0].args
    assert f"--proxy-server-port={port}" in args and "--proxy-server-host=127.0.0.1" in args
    assert (
        ds.spec.template.spec.containers[0].image == "registry.k8s.io/kas-network-proxy/proxy-agent:v0.31.0"
    )
    assert ds.metadata.labels["kamaji.clastix.io/name"] == "tenant-a"
    binding = await eventually(tenant.binding, "the ClusterRoleBinding")
    assert binding.role_ref.name == "system:auth-delegator"
    assert [(s.kind, s.name) for s in binding.subjects] == [("User", "system:konnectivity-server")]
    account = await eventually(tenant.account, "the ServiceAccount")
    assert account.metadata.labels["kamaji.clastix.io/component"] == "konnectivity-sa"
    status = tcp["status"]["addons"]["konnectivity"]
    assert status["agent"] == {"name": "konnectivity-agent", "namespace": "kube-system", "mode": "DaemonSet"}
    assert status["clusterrolebinding"] == {"name": "system:konnectivity-server"}

    # Deployment mode: the Deployment replaces the DaemonSet.
    await patch_tcp(
        plane, {"spec": {"addons": {"konnectivity": {"agent": {"mode": "Deployment", "replicas": 2}}}}}
    )
    deployment = await eventually(tenant.deployment, "the agent Deployment")
    assert deployment.spec.replicas == 2
    await eventually(lambda: tenant.daemonset() is None, "the DaemonSet gone")
    await tcp_matching(
        plane, lambda t: t["status"]["addons"]["konnectivity"]["agent"]["mode"] == "Deployment"
    )

    # Switched off: Kamaji's objects leave the tenant; switched on again, they come back on the same port.
    await plane.client.patch(
        model.TENANT_CONTROL_PLANES,
        "tenant-a",
        [{"op": "remove", "path": "/spec/addons/konnectivity"}],
        "default",
        patch_type="json",
    )
    await eventually(
        lambda: tenant.deployment() is None and tenant.binding() is None and tenant.account() is None,
        "the add-on's objects gone",
    )
    await tcp_matching(plane, lambda t: t["status"]["addons"]["konnectivity"] == {"enabled": False})
    await patch_tcp(plane, {"spec": {"addons": {"konnectivity": {"server": {"port": 8132}}}}})
    again = await eventually(tenant.daemonset, "the DaemonSet back")
    assert f"--proxy-server-port={port}" in again.spec.template.spec.containers[0].args
