"""Kamaji's soot controllers watch what they wrote into a tenant and write it back at once when it is
deleted or changed.

Facts from clastix/kamaji controllers/soot (manager.go, controllers/kubeadm_phase.go, coredns.go,
kubeproxy.go, konnectivity.go) and internal/resources/kubeadm_phases.go:

- the kubeadm phases watch ConfigMaps `kube-system/kubeadm-config`, `kube-system/kubelet-config` and
  `kube-public/cluster-info`, and every ClusterRoleBinding whose name starts with `kubeadm:`;
- the CoreDNS and kube-proxy add-ons watch their ClusterRoleBinding (`system:coredns`,
  `kubeadm:node-proxier`) and the objects it controls (CoreDNS: ClusterRole, ServiceAccount, Service,
  ConfigMap, Deployment; kube-proxy: ServiceAccount, Role, RoleBinding, ConfigMap, DaemonSet);
- the konnectivity agent's controller watches DaemonSet and ServiceAccount `kube-system/konnectivity-agent`
  and ClusterRoleBinding `system:konnectivity-server`;
- the write permissions' controller watches ValidatingWebhookConfiguration `kamaji-write-permissions`.

The lab hears of those objects' changes from its API server's own caches, in its process, instead of
through watches. Where it differs: it reacts to deletions and to changes of what an object says, not to
creations and not to changes of status or bookkeeping (resourceVersion, managedFields), nor to keys of
the phases' ConfigMaps other than the one each phase writes (the bootstrapsigner signs cluster-info
beside its kubeconfig), all of which Kamaji's reconcilers find to be no-ops anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tenantgpu.apiserver.watchcache import Event, ResourceCache
from tenantgpu.controlplane.bootstrapsigner import CLUSTER_INFO, KUBECONFIG_KEY
from tenantgpu.controlplane.bootstrapsigner import PUBLIC_NAMESPACE as KUBE_PUBLIC
from tenantgpu.kamaji.konnectivityagent import AGENT_NAME, AGENT_NAMESPACE, CLUSTER_ROLE_BINDING
from tenantgpu.kamaji.kubeadmaddons import COREDNS_BINDING, KUBE_PROXY_BINDING
from tenantgpu.kamaji.kubeadmphases import (
    KUBE_SYSTEM,
    KUBEADM_CONFIG,
    KUBEADM_CONFIG_KEY,
    KUBELET_CONFIG,
    KUBELET_CONFIG_KEY,
)
from tenantgpu.kamaji.writepermissions import CONFIGURATION as WRITE_PERMISSIONS
from tenantgpu.kamaji.writepermissions import RESOURCE as WRITE_PERMISSIONS_RESOURCE

Obj = dict[str, Any]

RBAC_GROUP = "rbac.authorization.k8s.io"
# each phase's ConfigMap and the key the phase writes: the bootstrapsigner's signatures beside
# cluster-info's kubeconfig, or an operator's own keys, are no change to what Kamaji wrote
PHASE_CONFIGMAPS = {
    (KUBE_SYSTEM, KUBEADM_CONFIG): KUBEADM_CONFIG_KEY,
    (KUBE_SYSTEM, KUBELET_CONFIG): KUBELET_CONFIG_KEY,
    (KUBE_PUBLIC, CLUSTER_INFO): KUBECONFIG_KEY,
}
# each add-on's ClusterRoleBinding, and the kinds of what it controls that Kamaji watches
ADDON_OWNED: dict[str, frozenset[str]] = {
    COREDNS_BINDING: frozenset({"clusterroles", "serviceaccounts", "services", "configmaps", "deployments"}),
    KUBE_PROXY_BINDING: frozenset({"serviceaccounts", "roles", "rolebindings", "configmaps", "daemonsets"}),
}
AGENT_OBJECTS = frozenset(
    {
        ("daemonsets", AGENT_NAMESPACE, AGENT_NAME),
        ("serviceaccounts", AGENT_NAMESPACE, AGENT_NAME),
        ("clusterrolebindings", "", CLUSTER_ROLE_BINDING),
    }
)
# (group, plural) of every kind the controllers above watch
WATCHED_KINDS = (
    ("", "configmaps"),
    ("", "serviceaccounts"),
    ("", "services"),
    ("apps", "deployments"),
    ("apps", "daemonsets"),
    (RBAC_GROUP, "clusterrolebindings"),
    (RBAC_GROUP, "clusterroles"),
    (RBAC_GROUP, "roles"),
    (RBAC_GROUP, "rolebindings"),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
)
_BOOKKEEPING = ("resourceVersion", "managedFields", "generation")


def watched(resource: str, obj: Obj) -> bool:
    """Whether one of Kamaji's soot controllers watches this object."""
    meta = obj.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    if resource == "configmaps" and (namespace, name) in PHASE_CONFIGMAPS:
        return True
    if resource == "clusterrolebindings" and (name.startswith("kubeadm:") or name in ADDON_OWNED):
        return True
    if (resource, namespace, name) in AGENT_OBJECTS:
        return True
    if resource == WRITE_PERMISSIONS_RESOURCE:
        return name == WRITE_PERMISSIONS
    for ref in meta.get("ownerReferences") or ():
        if (
            ref.get("controller")
            and ref.get("kind") == "ClusterRoleBinding"
            and str(ref.get("apiVersion", "")).startswith(f"{RBAC_GROUP}/")
        ):
            return resource in ADDON_OWNED.get(str(ref.get("name")), frozenset())
    return False


def said(resource: str, obj: Obj) -> Obj:
    """What an object says: without its status and the API server's bookkeeping; of a phase's ConfigMap,
    only the key the phase writes."""
    meta = obj.get("metadata") or {}
    if resource == "configmaps":
        key = PHASE_CONFIGMAPS.get((str(meta.get("namespace") or ""), str(meta.get("name") or "")))
        if key is not None:
            return {key: (obj.get("data") or {}).get(key)}
    kept = {k: v for k, v in meta.items() if k not in _BOOKKEEPING}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": kept}


def calls_for_rewrite(resource: str, event_type: str, obj: Obj, prev: Obj | None) -> bool:
    """Whether a change of one object makes Kamaji write the tenant's objects again: a watched object
    deleted, or changed in what it says."""
    if event_type == "DELETED":
        return watched(resource, obj)
    if event_type != "MODIFIED" or prev is None:
        return False
    return (watched(resource, obj) or watched(resource, prev)) and said(resource, obj) != said(resource, prev)


class SootWatch:
    """Listens to a tenant API server's caches of the watched kinds and calls `rewrite` (synchronously,
    from the commit that recorded the change; it must only schedule work) when Kamaji would write again."""

    def __init__(self, caches: dict[str, ResourceCache], rewrite: Callable[[], None]) -> None:
        self._rewrite = rewrite
        self._listeners: list[tuple[ResourceCache, Callable[[Event], None]]] = []
        for resource, cache in caches.items():
            listener = self._listener(resource)
            cache.listeners.append(listener)
            self._listeners.append((cache, listener))

    def _listener(self, resource: str) -> Callable[[Event], None]:
        def changed(event: Event) -> None:
            prev = event.prev.obj if event.prev is not None else None
            if calls_for_rewrite(resource, event.type, event.entry.obj, prev):
                self._rewrite()

        return changed

    def close(self) -> None:
        for cache, listener in self._listeners:
            if listener in cache.listeners:
                cache.listeners.remove(listener)
        self._listeners = []
