"""The admission chain: an ordered list of plugins behind one interface, as in kube-apiserver.

Mutating plugins run first and may change the object; validating plugins then accept or reject it.
Webhooks (see `webhooks.py`) are one plugin of each sort.
"""

from __future__ import annotations

import copy
import json
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
    """One admission step. `mutating` plugins run in the first phase, others in the second.

    A plugin may also say which writes it looks at, by their operation, kind and subresource alone:
    `handles(operation, kind, subresource) -> bool`, as kube's `admission.Interface.Handles`. The chain
    then skips it for every other write."""

    name: str
    mutating: bool

    async def admit(self, attributes: AdmissionAttributes) -> None:
        """Raise an `APIError` to reject; a mutating plugin may change `attributes.obj`."""


# What decides which plugins look at a write: its operation, the kind (group, plural, name, scope) and
# the subresource.
_WriteKey = tuple[str, str, str, str, bool, str]


class AdmissionChain:
    """The plugins in their order. Most writes concern a few of them (a pod's patch, an Event), so the
    plugins that handle each kind of write are picked once, at its first write, and kept."""

    def __init__(self, plugins: Sequence[AdmissionPlugin] = ()) -> None:
        self._plugins = list(plugins)
        self._picked: dict[_WriteKey, tuple[list[AdmissionPlugin], list[AdmissionPlugin]]] = {}

    @property
    def plugins(self) -> tuple[AdmissionPlugin, ...]:
        return tuple(self._plugins)

    @plugins.setter
    def plugins(self, plugins: Sequence[AdmissionPlugin]) -> None:
        self._plugins = list(plugins)
        self._picked.clear()

    def append(self, plugin: AdmissionPlugin) -> None:
        self.plugins = [*self._plugins, plugin]

    def _phases(self, attributes: AdmissionAttributes) -> tuple[list[AdmissionPlugin], list[AdmissionPlugin]]:
        kind, operation, subresource = attributes.kind, attributes.operation, attributes.subresource
        key = (operation, kind.group, kind.plural, kind.kind, kind.namespaced, subresource)
        picked = self._picked.get(key)
        if picked is None:
            handling = [p for p in self._plugins if _handles(p, operation, kind, subresource)]
            picked = self._picked[key] = (
                [p for p in handling if p.mutating],
                [p for p in handling if not p.mutating],
            )
        return picked

    async def mutate(self, attributes: AdmissionAttributes) -> None:
        for plugin in self._phases(attributes)[0]:
            await plugin.admit(attributes)

    async def validate(self, attributes: AdmissionAttributes) -> None:
        for plugin in self._phases(attributes)[1]:
            await plugin.admit(attributes)


def _handles(plugin: AdmissionPlugin, operation: str, kind: Kind, subresource: str) -> bool:
    handles = getattr(plugin, "handles", None)
    return handles is None or bool(handles(operation, kind, subresource))


NamespaceLookup = Callable[[str], Obj | None]


class NamespaceLifecycle:
    """Refuses to create objects in a namespace that does not exist or is being terminated."""

    name = "NamespaceLifecycle"
    mutating = True

    def __init__(self, namespace: NamespaceLookup) -> None:
        self._namespace = namespace

    @staticmethod
    def handles(operation: str, kind: Kind, subresource: str) -> bool:
        return (
            operation == "CREATE"
            and kind.namespaced
            and not subresource
            and kind.group not in ("authorization.k8s.io", "authentication.k8s.io")
        )

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if not self.handles(attributes.operation, attributes.kind, attributes.subresource):
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

    @staticmethod
    def handles(operation: str, kind: Kind, subresource: str) -> bool:
        return operation == "CREATE" and not kind.group and kind.kind == "Pod" and not subresource

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if not self.handles(attributes.operation, attributes.kind, attributes.subresource):
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


def _is_claim(kind: Kind, subresource: str) -> bool:
    return not kind.group and kind.kind == "PersistentVolumeClaim" and not subresource


class DefaultStorageClass:
    """kube's DefaultStorageClass plugin: a claim created naming no class (neither `spec.storageClassName`
    nor the beta annotation) gets the default class's name. `storageClassName: ""` is a class choice
    (none) and is kept."""

    name = "DefaultStorageClass"
    mutating = True

    def __init__(self, classes: Callable[[], Iterable[Obj]]) -> None:
        self._classes = classes

    @staticmethod
    def handles(operation: str, kind: Kind, subresource: str) -> bool:
        return operation == "CREATE" and _is_claim(kind, subresource)

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if not self.handles(attributes.operation, attributes.kind, attributes.subresource):
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


_PROTECTED = {"PersistentVolumeClaim": PVC_PROTECTION, "PersistentVolume": PV_PROTECTION}


class StorageObjectInUseProtection:
    """kube's StorageObjectInUseProtection plugin: a new claim or volume carries the finalizer that keeps
    it while in use (the controllers that remove it are kube-controller-manager's)."""

    name = "StorageObjectInUseProtection"
    mutating = True

    @staticmethod
    def handles(operation: str, kind: Kind, subresource: str) -> bool:
        return operation == "CREATE" and not kind.group and not subresource and kind.kind in _PROTECTED

    async def admit(self, attributes: AdmissionAttributes) -> None:
        kind = attributes.kind
        if not self.handles(attributes.operation, kind, attributes.subresource):
            return
        finalizer = _PROTECTED[kind.kind]
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

    @staticmethod
    def handles(operation: str, kind: Kind, subresource: str) -> bool:
        return operation == "UPDATE" and _is_claim(kind, subresource)

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if not self.handles(attributes.operation, attributes.kind, attributes.subresource):
            return
        if attributes.old is None:
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


RuntimeClassLookup = Callable[[str], Obj | None]


def _quantities(resources: Any) -> dict[str, Decimal] | None:
    """A ResourceList's values, or None when one is no quantity (validation refuses it)."""
    amounts: dict[str, Decimal] = {}
    for name, value in (resources or {}).items():
        try:
            amounts[name] = parse_quantity(value)
        except (QuantityError, TypeError):
            return None
    return amounts


def same_resources(a: Any, b: Any) -> bool:
    """apiequality.Semantic.DeepEqual of two ResourceLists: the same names, each quantity equal by value
    (`1000m` is `1`), and an absent list equal to an empty one."""
    if not a or not b:
        return not a and not b
    first, second = _quantities(a), _quantities(b)
    if first is None or second is None:
        return bool(a == b)
    return first == second


def _tolerates_superset(ss: Obj, t: Obj) -> bool:
    """kube's isSuperset (pkg/util/tolerations): whether toleration `ss` tolerates everything `t` does."""
    if _same_toleration(ss, t):
        return True
    key, ss_key = t.get("key") or "", ss.get("key") or ""
    ss_operator = ss.get("operator") or ""
    # an empty key with Exists matches every key and value
    if key != ss_key and (ss_key or ss_operator != "Exists"):
        return False
    ss_effect = ss.get("effect") or ""
    if (t.get("effect") or "") != ss_effect and ss_effect:
        return False
    if ss_effect == "NoExecute" and ss.get("tolerationSeconds") is not None:
        seconds = t.get("tolerationSeconds")
        if seconds is None or seconds > ss["tolerationSeconds"]:
            return False
    if ss_operator in ("Equal", ""):
        return (t.get("operator") or "") == "Equal" and (t.get("value") or "") == (ss.get("value") or "")
    return ss_operator == "Exists"


def _same_toleration(a: Obj, b: Obj) -> bool:
    """Semantic equality of two tolerations: unset and empty strings are one value."""
    fields = ("key", "operator", "value", "effect")
    return all((a.get(f) or "") == (b.get(f) or "") for f in fields) and a.get("tolerationSeconds") == b.get(
        "tolerationSeconds"
    )


def merge_tolerations(first: Sequence[Obj], second: Sequence[Obj]) -> list[Obj]:
    """kube's MergeTolerations: `first` then `second`, without a toleration another one already kept
    tolerates a superset of, nor one a later different toleration does (of equal ones, the first stays).
    A toleration that leaves the operator out covers an `operator: Equal` one of the same key and value,
    not the other way round (kube's isSuperset wants the covered one's operator to be Equal itself)."""
    merged: list[Obj] = []
    every = [*first, *second]
    for i, toleration in enumerate(every):
        if any(_tolerates_superset(kept, toleration) for kept in merged):
            continue
        if any(
            not _same_toleration(toleration, later) and _tolerates_superset(later, toleration)
            for later in every[i + 1 :]
        ):
            continue
        merged.append(toleration)
    return merged


class RuntimeClassAdmission:
    """kube's RuntimeClass plugin (plugin/pkg/admission/runtimeclass), one half per phase, for pods being
    created only (no subresource, no update).

    The mutating half gives a pod that names a class the class's overhead (refusing an overhead of its own
    that differs) and merges the class's node selector (refusing a conflicting key) and tolerations into
    the pod's. The validating half runs after the mutating webhooks, which may have named a class since:
    it looks the class up again and refuses a pod whose overhead is not exactly the class's, or that has
    one without a class that defines one. Both refuse a class that does not exist (403, `pod rejected:
    RuntimeClass "x" not found`).
    """

    name = "RuntimeClass"

    def __init__(self, lookup: RuntimeClassLookup, *, mutating: bool) -> None:
        self._lookup = lookup
        self.mutating = mutating

    @staticmethod
    def handles(operation: str, kind: Kind, subresource: str) -> bool:
        return operation == "CREATE" and not subresource and not kind.group and kind.plural == "pods"

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if not self.handles(attributes.operation, attributes.kind, attributes.subresource):
            return
        pod = attributes.obj or {}
        spec = pod.setdefault("spec", {})
        found = self._runtime_class(attributes, spec.get("runtimeClassName"))
        if self.mutating:
            self._set_overhead(attributes, spec, found)
            self._set_scheduling(attributes, spec, found)
        else:
            self._validate_overhead(attributes, spec, found)

    def _refuse(self, attributes: AdmissionAttributes, why: str) -> errors.APIError:
        return errors.forbidden("pods", attributes.forbidden_name(), "", why)

    def _runtime_class(self, attributes: AdmissionAttributes, name: Any) -> Obj | None:
        if name is None:
            return None
        if name == "":
            # kube's lister misses "" and its live lookup, client-go's Get, cannot ask for an empty name:
            # the plugin returns that client error, which the API server answers as a 500 of no reason.
            raise errors.APIError(500, "", "resource name may not be empty")
        found = self._lookup(str(name))
        if found is None:
            raise self._refuse(attributes, f"pod rejected: RuntimeClass {json.dumps(str(name))} not found")
        return found

    def _set_overhead(self, attributes: AdmissionAttributes, spec: Obj, found: Obj | None) -> None:
        overhead = None if found is None else found.get("overhead")
        if overhead is None:
            return
        pod_fixed = overhead.get("podFixed") if isinstance(overhead, dict) else None
        if spec.get("overhead") and not same_resources(pod_fixed, spec["overhead"]):
            raise self._refuse(
                attributes, "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
            )
        if pod_fixed is None:
            spec.pop("overhead", None)
        else:
            spec["overhead"] = copy.deepcopy(pod_fixed)
        attributes.mutated = True

    def _set_scheduling(self, attributes: AdmissionAttributes, spec: Obj, found: Obj | None) -> None:
        scheduling = None if found is None else found.get("scheduling")
        if not isinstance(scheduling, dict):
            return
        wanted = scheduling.get("nodeSelector") or {}
        selector = spec.get("nodeSelector")
        if selector is None:
            if wanted:
                spec["nodeSelector"] = dict(wanted)
        else:
            for key, value in wanted.items():
                if key in selector and selector[key] != value:
                    raise self._refuse(
                        attributes,
                        f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value}; "
                        f"pod.spec.nodeSelector[{key}] = {selector[key]}",
                    )
                selector[key] = value
        merged = merge_tolerations(
            spec.get("tolerations") or [], copy.deepcopy(scheduling.get("tolerations") or [])
        )
        if merged:
            spec["tolerations"] = merged
        else:
            spec.pop("tolerations", None)
        attributes.mutated = True

    def _validate_overhead(self, attributes: AdmissionAttributes, spec: Obj, found: Obj | None) -> None:
        overhead = None if found is None else found.get("overhead")
        if overhead is not None:
            pod_fixed = overhead.get("podFixed") if isinstance(overhead, dict) else None
            if not same_resources(pod_fixed, spec.get("overhead")):
                raise self._refuse(
                    attributes, "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
                )
        elif spec.get("overhead") is not None:
            # kube checks `pod.Spec.Overhead != nil`: `overhead: {}` decodes into an empty map, not nil
            raise self._refuse(
                attributes,
                "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead",
            )
