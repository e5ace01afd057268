"""The admission chain: an ordered list of plugins behind one interface, as in kube-apiserver.

Mutating plugins run first and may change the object; validating plugins then accept or reject it.
Webhooks (see `webhooks.py`) are one plugin of each sort.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.kinds import Kind
from tenantgpu.apiserver.quantity import QuantityError, parse_quantity
from tenantgpu.gpushare.volumes import (
    ANN_BETA_STORAGE_CLASS,
    PV_PROTECTION,
    PVC_PROTECTION,
    claim_class,
    default_storage_class,
)

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


StorageClassLookup = Callable[[str], Obj | None]


def _is_claim(attributes: AdmissionAttributes) -> bool:
    kind = attributes.kind
    return not kind.group and kind.kind == "PersistentVolumeClaim" and not attributes.subresource


class DefaultStorageClass:
    """kube's DefaultStorageClass plugin: a claim created naming no class (neither `spec.storageClassName`
    nor the beta annotation) gets the default class's name. `storageClassName: ""` is a class choice
    (none) and is kept."""

    name = "DefaultStorageClass"
    mutating = True

    def __init__(self, classes: Callable[[], Iterable[Obj]]) -> None:
        self._classes = classes

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if attributes.operation != "CREATE" or not _is_claim(attributes):
            return
        claim = attributes.obj or {}
        annotations = (claim.get("metadata") or {}).get("annotations") or {}
        spec = claim.setdefault("spec", {})
        if ANN_BETA_STORAGE_CLASS in annotations or spec.get("storageClassName") is not None:
            return
        found = default_storage_class(self._classes())
        if found is not None:
            spec["storageClassName"] = found["metadata"]["name"]
            attributes.mutated = True


class StorageObjectInUseProtection:
    """kube's StorageObjectInUseProtection plugin: a new claim or volume carries the finalizer that keeps
    it while in use (the controllers that remove it are kube-controller-manager's)."""

    name = "StorageObjectInUseProtection"
    mutating = True

    async def admit(self, attributes: AdmissionAttributes) -> None:
        kind = attributes.kind
        if attributes.operation != "CREATE" or kind.group or attributes.subresource:
            return
        finalizer = {"PersistentVolumeClaim": PVC_PROTECTION, "PersistentVolume": PV_PROTECTION}.get(
            kind.kind
        )
        if finalizer is None:
            return
        meta = (attributes.obj or {}).setdefault("metadata", {})
        finalizers = meta.get("finalizers") or []
        if finalizer not in finalizers:
            meta["finalizers"] = [*finalizers, finalizer]
            attributes.mutated = True


class PersistentVolumeClaimResize:
    """kube's PersistentVolumeClaimResize plugin: a claim's storage request may grow only once it is bound,
    and only when its class (the same before and after) allows volume expansion."""

    name = "PersistentVolumeClaimResize"
    mutating = False

    def __init__(self, lookup: StorageClassLookup) -> None:
        self._lookup = lookup

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if attributes.operation != "UPDATE" or not _is_claim(attributes) or attributes.old is None:
            return
        claim, old = attributes.obj or {}, attributes.old
        if _requested(claim) <= _requested(old):
            return
        if (old.get("status") or {}).get("phase") != "Bound":
            raise errors.forbidden(
                "persistentvolumeclaims",
                attributes.name,
                "",
                "Only bound persistent volume claims can be expanded",
            )
        class_name, old_class = claim_class(claim), claim_class(old)
        found = self._lookup(class_name) if class_name and class_name == old_class else None
        if found is None or found.get("allowVolumeExpansion") is not True:
            raise errors.forbidden(
                "persistentvolumeclaims",
                attributes.name,
                "",
                "only dynamically provisioned pvc can be resized and "
                "the storageclass that provisions the pvc must support resize",
            )


def _requested(claim: Obj) -> Decimal:
    value = (((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
    try:
        return parse_quantity(value) if value is not None else Decimal(0)
    except (QuantityError, TypeError):
        return Decimal(0)  # validation refuses it
