"""The Node authorizer's graph (`plugin/pkg/auth/authorizer/node/graph.go`, `graph_populator.go`): which
objects a node is related to, and so may read.

kube keeps the graph edge by edge from informers; here the edges are read from the watch caches when a
request asks. The answers are the same: kube takes each edge from an object's latest state too (a bound
pod's references change only by added ephemeral containers and claim statuses, which its populator
re-reads). Pods are indexed by `spec.nodeName` as they are written, and
each pod's references are worked out once per stored version of it, so a question costs a walk over the
node's own pods, and the requests that need no graph (a pod's status, an event, a lease) cost nothing.

The edges, as kube's populator adds them (`podreferences.py` walks the objects):
- pod → node, for a pod with `spec.nodeName`; a pod not yet scheduled is not in the graph, a finished one
  stays until it is deleted;
- secret, config map, persistent volume claim (a generic ephemeral volume's too), service account and
  resource claim → pod, except from a mirror pod: a node must not gain access through a pod it may create;
- persistent volume → the claim its `claimRef` names, secret → persistent volume (those the kubelet reads,
  in their own namespace);
- volume attachment → node and resource slice → node, by their `spec.nodeName`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from tenantgpu.apiserver.podreferences import (
    claim_names,
    configmap_names,
    is_mirror,
    resource_claim_names,
    secret_names,
    volume_secrets,
)

if TYPE_CHECKING:
    from tenantgpu.apiserver.registry import Registry
    from tenantgpu.apiserver.watchcache import Entry, Event, ResourceCache

Obj = dict[str, Any]
Vertex = Literal[
    "pod",
    "secret",
    "configmap",
    "pvc",
    "pv",
    "serviceaccount",
    "resourceclaim",
    "volumeattachment",
    "resourceslice",
]


@dataclass(frozen=True, slots=True)
class PodReferences:
    """What one pod relates to its node: nothing but itself for a mirror pod."""

    secrets: frozenset[str] = frozenset()
    configmaps: frozenset[str] = frozenset()
    claims: frozenset[str] = frozenset()
    resource_claims: frozenset[str] = frozenset()
    service_account: str = ""

    @classmethod
    def of(cls, pod: Obj) -> PodReferences:
        if is_mirror(pod):
            return cls()
        spec = pod.get("spec") or {}
        account = spec.get("serviceAccountName")
        return cls(
            frozenset(secret_names(spec)),
            frozenset(configmap_names(spec)),
            frozenset(claim_names(pod)),
            frozenset(resource_claim_names(pod)),
            account if isinstance(account, str) else "",
        )


def _node_of(obj: Obj) -> str:
    spec = obj.get("spec")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return node if isinstance(node, str) else ""


def _pod_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class _PodsByNode:
    """The pods cache's keys by `spec.nodeName`, kept by the cache's listener; rebuilt when the listener
    missed a change (the cache counts them), as after loading."""

    def __init__(self, cache: ResourceCache) -> None:
        self._cache = cache
        self._keys: dict[str, set[str]] = {}
        self._references: dict[str, tuple[Entry, PodReferences]] = {}
        self._stamp = -1
        cache.listeners.append(self._changed)

    def _changed(self, event: Event) -> None:
        if self._stamp != self._cache.changes - 1:
            return  # already behind: the next question rebuilds
        self._stamp = self._cache.changes
        obj = event.entry.obj
        key = _pod_key(obj)
        if event.prev is not None:
            self._drop(key, _node_of(event.prev.obj))
        if event.type == "DELETED":
            self._drop(key, _node_of(obj))
            self._references.pop(key, None)
        elif node := _node_of(obj):
            self._keys.setdefault(node, set()).add(key)

    def _drop(self, key: str, node: str) -> None:
        keys = self._keys.get(node)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._keys[node]

    def _rebuild(self) -> None:
        objects = self._cache.objects
        self._keys = {}
        for key, entry in objects.items():
            if node := _node_of(entry.obj):
                self._keys.setdefault(node, set()).add(key)
        self._references = {k: v for k, v in self._references.items() if objects.get(k) is v[0]}
        self._stamp = self._cache.changes

    def node_of(self, namespace: str, name: str) -> str:
        """The node the pod is bound to, "" for none (or no such pod)."""
        entry = self._cache.objects.get(f"{namespace}/{name}")
        return "" if entry is None else _node_of(entry.obj)

    def on(self, node: str, namespace: str) -> Iterator[PodReferences]:
        """The references of each pod in `namespace` bound to `node`."""
        if self._stamp != self._cache.changes:
            self._rebuild()
        objects = self._cache.objects
        prefix = namespace + "/"
        for key in tuple(self._keys.get(node, ())):
            if not key.startswith(prefix):
                continue
            entry = objects.get(key)
            if entry is None:
                continue
            held = self._references.get(key)
            if held is None or held[0] is not entry:
                held = self._references[key] = (entry, PodReferences.of(entry.obj))
            yield held[1]


class _VolumeSecrets:
    """The claims each secret reaches a node through: secret → persistent volume → its claimRef."""

    def __init__(self, cache: ResourceCache) -> None:
        self._cache = cache
        self._stamp = -1
        self._claims: dict[tuple[str, str], set[tuple[str, str]]] = {}

    def claims(self, namespace: str, name: str) -> set[tuple[str, str]]:
        if self._stamp != self._cache.changes:
            self._claims = {}
            for entry in self._cache.objects.values():
                claim = _claim_ref(entry.obj)
                if claim is not None:
                    for secret in volume_secrets(entry.obj):
                        self._claims.setdefault(secret, set()).add(claim)
            self._stamp = self._cache.changes
        return self._claims.get((namespace, name), set())


def _claim_ref(pv: Obj) -> tuple[str, str] | None:
    ref = (pv.get("spec") or {}).get("claimRef")
    if not isinstance(ref, Mapping):
        return None
    return (str(ref.get("namespace") or ""), str(ref.get("name") or ""))


class NodeGraph:
    """Answers whether an object is related to a node. `attach(registry)` gives it the watch caches;
    until the registry has loaded, nothing is related."""

    def __init__(self) -> None:
        self._registry: Registry | None = None
        self._pods: _PodsByNode | None = None
        self._volumes: ResourceCache | None = None
        self._volume_secrets: _VolumeSecrets | None = None
        self._by_node_name: dict[str, ResourceCache | None] = {}

    def attach(self, registry: Registry) -> None:
        self._registry = registry
        self._pods = None
        self._volumes = None
        self._volume_secrets = None
        self._by_node_name = {}

    def _loaded(self) -> bool:
        if self._pods is not None:
            return True
        if self._registry is None:
            return False
        kinds = self._registry.kinds
        pods = kinds.resource("", "v1", "pods")
        volumes = kinds.resource("", "v1", "persistentvolumes")
        try:
            pods_cache = self._registry.cache(pods) if pods is not None else None
            self._volumes = self._registry.cache(volumes) if volumes is not None else None
        except KeyError:  # not loaded yet
            return False
        if pods_cache is None:
            return False
        self._volume_secrets = None if self._volumes is None else _VolumeSecrets(self._volumes)
        self._pods = _PodsByNode(pods_cache)
        return True

    def related(self, node: str, vertex: Vertex, namespace: str, name: str) -> bool:
        """Whether a path leads from the object (`vertex` names its type) to `node`: kube's hasPathFrom."""
        if not self._loaded():
            return False
        pods = self._pods
        assert pods is not None
        if vertex == "pod":
            return pods.node_of(namespace, name) == node
        if vertex == "secret":
            if any(name in refs.secrets for refs in pods.on(node, namespace)):
                return True
            through = () if self._volume_secrets is None else self._volume_secrets.claims(namespace, name)
            return any(self._claimed(node, *claim) for claim in through)
        if vertex == "configmap":
            return any(name in refs.configmaps for refs in pods.on(node, namespace))
        if vertex == "pvc":
            return self._claimed(node, namespace, name)
        if vertex == "pv":
            entry = None if self._volumes is None else self._volumes.objects.get(name)
            claim = None if entry is None else _claim_ref(entry.obj)
            return claim is not None and self._claimed(node, *claim)
        if vertex == "serviceaccount":
            return any(refs.service_account == name for refs in pods.on(node, namespace))
        if vertex == "resourceclaim":
            return any(name in refs.resource_claims for refs in pods.on(node, namespace))
        if vertex == "volumeattachment":
            return self._names_node("storage.k8s.io", "volumeattachments", name, node)
        if vertex == "resourceslice":
            return self._names_node("resource.k8s.io", "resourceslices", name, node)
        return False

    def _claimed(self, node: str, namespace: str, claim: str) -> bool:
        assert self._pods is not None
        return any(claim in refs.claims for refs in self._pods.on(node, namespace))

    def _names_node(self, group: str, plural: str, name: str, node: str) -> bool:
        """Whether the cluster-scoped object's `spec.nodeName` is `node` (a kind the tenant does not serve
        has no such objects)."""
        if plural not in self._by_node_name:
            assert self._registry is not None
            found = next((k for k in self._registry.kinds if (k.group, k.plural) == (group, plural)), None)
            self._by_node_name[plural] = None if found is None else self._registry.cache(found)
        cache = self._by_node_name[plural]
        entry = None if cache is None else cache.objects.get(name)
        return entry is not None and _node_of(entry.obj) == node
