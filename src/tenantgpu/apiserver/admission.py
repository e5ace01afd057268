"""The admission chain: an ordered list of plugins behind one interface, as in kube-apiserver.

Mutating plugins run first and may change the object; validating plugins then accept or reject it.
Webhooks (see `webhooks.py`) are one plugin of each sort.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.kinds import Kind

Obj = dict[str, Any]


@dataclass
class AdmissionAttributes:
    """One write under admission; mutating plugins may replace `obj`."""

    operation: str  # CREATE, UPDATE, DELETE or CONNECT
    kind: Kind
    namespace: str
    name: str
    obj: Obj | None
    old: Obj | None
    user: UserInfo
    subresource: str = ""
    dry_run: bool = False
    options: Obj = field(default_factory=dict)
    # Set by a plugin that changed `obj`, so the registry re-applies defaulting.
    mutated: bool = False

    def forbidden_name(self) -> str:
        """The name kube's admission errors give the object: its name, or while a create's name is still to
        be generated (the mutating phase), its generateName, else `Unknown`."""
        if self.name:
            return self.name
        meta = (self.obj or {}).get("metadata") or {}
        return str(meta.get("generateName") or "") or "Unknown"


class AdmissionPlugin(Protocol):
    """One admission step. `mutating` plugins run in the first phase, others in the second."""

    name: str
    mutating: bool

    async def admit(self, attributes: AdmissionAttributes) -> None:
        """Raise an `APIError` to reject; a mutating plugin may change `attributes.obj`."""


class AdmissionChain:
    def __init__(self, plugins: Sequence[AdmissionPlugin] = ()) -> None:
        self.plugins = list(plugins)

    async def mutate(self, attributes: AdmissionAttributes) -> None:
        for plugin in self.plugins:
            if plugin.mutating:
                await plugin.admit(attributes)

    async def validate(self, attributes: AdmissionAttributes) -> None:
        for plugin in self.plugins:
            if not plugin.mutating:
                await plugin.admit(attributes)


NamespaceLookup = Callable[[str], Obj | None]


class NamespaceLifecycle:
    """Refuses to create objects in a namespace that does not exist or is being terminated."""

    name = "NamespaceLifecycle"
    mutating = True

    def __init__(self, namespace: NamespaceLookup) -> None:
        self._namespace = namespace

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if attributes.operation != "CREATE" or not attributes.kind.namespaced or attributes.subresource:
            return
        if attributes.kind.group in ("authorization.k8s.io", "authentication.k8s.io"):
            return
        ns = self._namespace(attributes.namespace)
        if ns is None:
            raise errors.not_found("namespaces", attributes.namespace)
        if (ns.get("status") or {}).get("phase") == "Terminating" or (ns.get("metadata") or {}).get(
            "deletionTimestamp"
        ):
            refused = errors.forbidden(
                attributes.kind.plural,
                attributes.forbidden_name(),
                attributes.kind.group,
                f"unable to create new content in namespace {attributes.namespace} "
                "because it is being terminated",
            )
            assert refused.details is not None
            refused.details["causes"] = [
                {
                    "reason": "NamespaceTerminating",
                    "message": f"namespace {attributes.namespace} is being terminated",
                    "field": "metadata.namespace",
                }
            ]
            raise refused


PriorityClassLookup = Callable[[str], Obj | None]


class PriorityAdmission:
    """kube's Priority plugin: a pod's `priorityClassName` gives it the class's `priority` and
    `preemptionPolicy`; a class that does not exist refuses the pod; a pod naming none gets the
    `globalDefault` class, if there is one, else priority 0."""

    name = "Priority"
    mutating = True

    def __init__(self, lookup: PriorityClassLookup, global_default: Callable[[], Obj | None]) -> None:
        self._lookup = lookup
        self._global_default = global_default

    async def admit(self, attributes: AdmissionAttributes) -> None:
        kind = attributes.kind
        if attributes.operation != "CREATE" or kind.group or kind.kind != "Pod" or attributes.subresource:
            return
        spec = (attributes.obj or {}).setdefault("spec", {})
        class_name = spec.get("priorityClassName") or ""
        found = self._lookup(class_name) if class_name else self._global_default()
        if class_name and found is None:
            raise errors.forbidden(
                "pods", attributes.forbidden_name(), "", f"no PriorityClass with name {class_name} was found"
            )
        if found is None:
            return  # defaulting already gave priority 0
        spec["priorityClassName"] = found["metadata"]["name"]
        spec["priority"] = int(found.get("value") or 0)
        spec["preemptionPolicy"] = found.get("preemptionPolicy") or "PreemptLowerPriority"
        attributes.mutated = True
