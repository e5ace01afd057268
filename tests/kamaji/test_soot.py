"""Kamaji's soot controllers write back what they own in a tenant as soon as it is deleted or changed
(facts: clastix/kamaji controllers/soot, internal/resources/kubeadm_phases.go; see kamaji/soot.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import kubernetes
import yaml

from kamaji_wire import admin_api, eventually, found, tcp_matching
from tenantgpu.kamaji import model
from tenantgpu.kamaji.plane import ManagementPlane
from tenantgpu.kamaji.soot import calls_for_rewrite, watched

Obj = dict[str, Any]


def _obj(name: str, namespace: str = "", **extra: Any) -> Obj:
    meta: Obj = {"name": name, "resourceVersion": "1"}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta, **extra}


def test_the_watched_objects_are_those_kamajis_controllers_watch() -> None:
    assert watched("configmaps", _obj("kubeadm-config", "kube-system"))
    assert watched("configmaps", _obj("kubelet-config", "kube-system"))
    assert watched("configmaps", _obj("cluster-info", "kube-public"))
    assert not watched("configmaps", _obj("kubeadm-config", "default"))
    assert not watched("configmaps", _obj("kube-proxy", "kube-system"))  # kube-proxy's has no owner
    # the kubeadm phases watch every `kubeadm:` binding; the add-ons their own
    assert watched("clusterrolebindings", _obj("kubeadm:cluster-admins"))
    assert watched("clusterrolebindings", _obj("system:coredns"))
    assert not watched("clusterrolebindings", _obj("cluster-admin"))
    assert watched("daemonsets", _obj("konnectivity-agent", "kube-system"))
    # what an add-on's ClusterRoleBinding controls, of the kinds its controller owns
    owned = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "controller": True}
    dns = _obj("coredns", "kube-system")
    dns["metadata"]["ownerReferences"] = [{**owned, "name": "system:coredns", "uid": "u"}]
    assert watched("deployments", dns)
    assert not watched("daemonsets", dns)  # CoreDNS's controller owns no DaemonSet
    dns["metadata"]["ownerReferences"][0]["controller"] = False
    assert not watched("deployments", dns)


def test_deletions_and_changes_of_what_an_object_says_call_for_a_rewrite() -> None:
    before = _obj("kubeadm-config", "kube-system", data={"ClusterConfiguration": "a"})
    assert calls_for_rewrite("configmaps", "DELETED", before, None)
    assert not calls_for_rewrite("configmaps", "ADDED", before, None)
    edited = {**before, "data": {"ClusterConfiguration": "b"}}
    assert calls_for_rewrite("configmaps", "MODIFIED", edited, before)
    # a write that changed nothing but the bookkeeping, or only a workload's status, does not
    bumped = {**before, "metadata": {**before["metadata"], "resourceVersion": "2", "managedFields": []}}
    assert not calls_for_rewrite("configmaps", "MODIFIED", bumped, before)
    agent = _obj("konnectivity-agent", "kube-system", spec={"a": 1}, status={"ready": 0})
    assert not calls_for_rewrite("daemonsets", "MODIFIED", {**agent, "status": {"ready": 1}}, agent)
    assert calls_for_rewrite("daemonsets", "MODIFIED", {**agent, "spec": {"a": 2}}, agent)
    # cluster-info signed for a token (the bootstrapsigner's key beside the phase's) is no change
    info = _obj("cluster-info", "kube-public", data={"kubeconfig": "k"})
    signed = {**info, "data": {"kubeconfig": "k", "jws-kubeconfig-abcdef": "sig"}}
    assert not calls_for_rewrite("configmaps", "MODIFIED", signed, info)
    assert calls_for_rewrite("configmaps", "MODIFIED", {**info, "data": {"kubeconfig": "x"}}, info)
    # an object none of the controllers watches calls for nothing
    assert not calls_for_rewrite("configmaps", "DELETED", _obj("mine", "kube-system"), None)


async def test_what_kamaji_wrote_comes_back_at_once_and_other_objects_are_left_alone(
    plane: ManagementPlane,
) -> None:
    tcp = model.tenant_control_plane("tenant-a", version="v1.33.1")
    tcp["spec"]["addons"]["coreDNS"] = {}
    await plane.client.create(model.TENANT_CONTROL_PLANES, tcp)
    await tcp_matching(
        plane, lambda t: (t.get("status") or {}).get("addons", {}).get("coreDNS", {}).get("enabled")
    )
    api = await admin_api(plane)
    core, apps = kubernetes.client.CoreV1Api(api), kubernetes.client.AppsV1Api(api)
    rbac = kubernetes.client.RbacAuthorizationV1Api(api)

    def config(name: str) -> Any:
        return found(lambda: core.read_namespaced_config_map(name, "kube-system"))

    await eventually(lambda: config("kubeadm-config") and config("coredns"), "the phases' ConfigMaps")
    await eventually(
        lambda: found(lambda: apps.read_namespaced_daemon_set("konnectivity-agent", "kube-system")),
        "the agent",
    )

    # deleted: back at once, with no change to the TCP
    uid = (await asyncio.to_thread(config, "kubeadm-config")).metadata.uid
    await asyncio.to_thread(core.delete_namespaced_config_map, "kubeadm-config", "kube-system")
    back = await eventually(
        lambda: (c := config("kubeadm-config")) and c.metadata.uid != uid and c, "kubeadm-config"
    )
    assert "kind: ClusterConfiguration" in back.data["ClusterConfiguration"]
    await asyncio.to_thread(rbac.delete_cluster_role_binding, "kubeadm:cluster-admins")
    await eventually(
        lambda: found(lambda: rbac.read_cluster_role_binding("kubeadm:cluster-admins")), "the binding"
    )
    await asyncio.to_thread(apps.delete_namespaced_daemon_set, "konnectivity-agent", "kube-system")
    await eventually(
        lambda: found(lambda: apps.read_namespaced_daemon_set("konnectivity-agent", "kube-system")),
        "the agent back",
    )

    # changed: written back, the kubelet configuration as the TCP says and CoreDNS at its 2 replicas
    kubelet = await asyncio.to_thread(config, "kubelet-config")
    kubelet.data["kubelet"] = kubelet.data["kubelet"].replace("maxPods: 110", "maxPods: 40")
    await asyncio.to_thread(core.replace_namespaced_config_map, "kubelet-config", "kube-system", kubelet)
    await eventually(
        lambda: yaml.safe_load(config("kubelet-config").data["kubelet"])["maxPods"] == 110,
        "kubelet-config reverted",
    )
    await asyncio.to_thread(
        apps.patch_namespaced_deployment_scale, "coredns", "kube-system", {"spec": {"replicas": 5}}
    )
    await eventually(
        lambda: apps.read_namespaced_deployment("coredns", "kube-system").spec.replicas == 2, "CoreDNS at 2"
    )

    # what Kamaji does not own stays as its user left it
    await asyncio.to_thread(
        core.create_namespaced_config_map, "kube-system", {"metadata": {"name": "mine"}, "data": {"a": "1"}}
    )
    await asyncio.to_thread(core.delete_namespaced_config_map, "mine", "kube-system")
    await asyncio.sleep(0.5)
    assert await asyncio.to_thread(config, "mine") is None


async def test_a_tenant_at_rest_writes_nothing(plane: ManagementPlane) -> None:
    """The soot watch reacts to changes, not to its own writes: once written, a tenant's objects stay
    at the revision they have."""
    await plane.client.create(
        model.TENANT_CONTROL_PLANES, model.tenant_control_plane("tenant-a", version="v1.33.1")
    )
    await tcp_matching(plane, lambda t: model.version_status(t) == "Ready")
    api = await admin_api(plane)
    core = kubernetes.client.CoreV1Api(api)
    await eventually(
        lambda: found(lambda: core.read_namespaced_config_map("kubelet-config", "kube-system")), "it"
    )
    rbac = kubernetes.client.RbacAuthorizationV1Api(api)

    def versions() -> dict[str, str]:
        lists = {
            "configmap": core.list_namespaced_config_map("kube-system").items
            + core.list_namespaced_config_map("kube-public").items,
            "clusterrolebinding": rbac.list_cluster_role_binding().items,
            "role": rbac.list_namespaced_role("kube-system").items,
        }
        return {
            f"{k}/{o.metadata.name}": o.metadata.resource_version for k, items in lists.items() for o in items
        }

    await asyncio.sleep(1.0)  # the first writes settle
    first = await asyncio.to_thread(versions)
    await asyncio.sleep(1.0)
    assert await asyncio.to_thread(versions) == first
