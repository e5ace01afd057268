"""Fields a release's kube-apiserver clears from a write because their feature gate is off by default.

kube's registry strategies call `dropDisabledFields` in PrepareForCreate and PrepareForUpdate (after the
mutating admission, before validation): a field whose gate is off is cleared without a warning, unless
the stored object already uses the gate's fields (an update must not lose what is there). A 1.31
tenant so stores no `resizePolicy` (InPlacePodVerticalScaling, beta and on only from 1.33) and a 1.28
tenant no sidecar `restartPolicy` (SidecarContainers, alpha in 1.28). The fields, and what counts as
"in use", are those of kubernetes/kubernetes' `pkg/api/pod/util.go` (`dropDisabledFields`,
`dropDisabledPodStatusFields`; a pod's status fields are kept when the old pod's *spec* uses the
gate), the Job strategy (`pkg/registry/batch/job/strategy.go`: spec fields only), the StatefulSet,
Service, PersistentVolumeClaim and PersistentVolume strategies; the gates' defaults per release are
`featuregates.py`'s.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tenantgpu.apiserver.featuregates import GATES, enabled
from tenantgpu.apiserver.fieldversions import LATEST

__all__ = ["DisabledFields", "GatedField", "GatedFields"]

Obj = dict[str, Any]
EACH = "*"  # a path step over every item of a list
Part = Literal["spec", "status"]


@dataclass(frozen=True)
class GatedField:
    """A field by its path from the part of the object it is in (`*` steps into each item of a list).

    `forced` is the value kube sets instead of clearing the field (ProcMountType keeps a `procMount`, as
    `Default`); `prune` how many of its parents go too when clearing it leaves them empty (a `preStop`
    that held only a `sleep`, then a `lifecycle` with no handler left); `volume_source` makes the path
    name the pod's volumes, and those of that source go whole, with their mounts."""

    part: Part
    path: tuple[str, ...]
    forced: str | None = None
    prune: int = 0
    volume_source: str | None = None


@dataclass(frozen=True)
class GatedFields:
    """What one gate guards. `in_use` is what the stored object of an update must already use for the
    fields to be kept; None means the fields themselves, () that nothing keeps them."""

    gate: str
    fields: tuple[GatedField, ...]
    in_use: tuple[GatedField, ...] | None = None

    def keepers(self) -> tuple[GatedField, ...]:
        return self.fields if self.in_use is None else self.in_use


_CONTAINERS = ("containers", "initContainers", "ephemeralContainers")
_STATUSES = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")


def _each(lists: tuple[str, ...], part: Part, *path: str, prune: int = 0) -> tuple[GatedField, ...]:
    return tuple(GatedField(part, (name, EACH, *path), prune=prune) for name in lists)


def _containers(*path: str, prune: int = 0) -> tuple[GatedField, ...]:
    return _each(_CONTAINERS, "spec", *path, prune=prune)


def _statuses(*path: str) -> tuple[GatedField, ...]:
    return _each(_STATUSES, "status", *path)


def _spec(*path: str) -> GatedField:
    return GatedField("spec", path)


def _affinity_terms(*fields: str) -> tuple[GatedField, ...]:
    terms: list[GatedField] = []
    for affinity in ("podAffinity", "podAntiAffinity"):
        required = ("affinity", affinity, "requiredDuringSchedulingIgnoredDuringExecution", EACH)
        preferred = (
            "affinity",
            affinity,
            "preferredDuringSchedulingIgnoredDuringExecution",
            EACH,
            "podAffinityTerm",
        )
        for field in fields:
            terms += [_spec(*required, field), _spec(*preferred, field)]
    return tuple(terms)


_SLEEP = tuple(
    field for hook in ("preStop", "postStart") for field in _containers("lifecycle", hook, "sleep", prune=2)
)

# The gated fields of a pod, and of a pod template (its spec part).
POD: tuple[GatedFields, ...] = (
    GatedFields(
        "InPlacePodVerticalScaling",
        (
            *_containers("resizePolicy"),
            GatedField("status", ("resize",)),
            *_statuses("resources"),
            *_statuses("allocatedResources"),
        ),
        # kube asks the old spec's containers and init containers, not its ephemeral ones
        in_use=_containers("resizePolicy")[:2],
    ),
    GatedFields("SidecarContainers", (_spec("initContainers", EACH, "restartPolicy"),)),
    GatedFields("PodHostIPs", (GatedField("status", ("hostIPs",)),)),
    GatedFields("UserNamespacesSupport", (_spec("hostUsers"),)),
    GatedFields(
        "DynamicResourceAllocation",
        (
            _spec("resourceClaims"),
            *_containers("resources", "claims"),
            GatedField("status", ("resourceClaimStatuses",)),
        ),
        in_use=(_spec("resourceClaims"),),
    ),
    GatedFields(
        "PodLevelResources",
        (_spec("resources"),),
        in_use=(_spec("resources", "requests"), _spec("resources", "limits")),
    ),
    GatedFields("PodLifecycleSleepAction", _SLEEP),
    GatedFields("MatchLabelKeysInPodAffinity", _affinity_terms("matchLabelKeys", "mismatchLabelKeys")),
    GatedFields(
        "ProcMountType",
        tuple(
            GatedField("spec", f.path, forced="Default") for f in _containers("securityContext", "procMount")
        ),
    ),
    GatedFields(
        "SupplementalGroupsPolicy",
        (_spec("securityContext", "supplementalGroupsPolicy"), *_statuses("user")),
        in_use=(_spec("securityContext", "supplementalGroupsPolicy"),),
    ),
    GatedFields(
        "RecursiveReadOnlyMounts",
        (*_containers("volumeMounts", EACH, "recursiveReadOnly"), *_statuses("volumeMounts")),
        in_use=_containers("volumeMounts", EACH, "recursiveReadOnly"),
    ),
    GatedFields("ImageVolume", (GatedField("spec", ("volumes",), volume_source="image"),)),
    GatedFields("SELinuxChangePolicy", (_spec("securityContext", "seLinuxChangePolicy"),)),
    GatedFields("ContainerStopSignals", _containers("lifecycle", "stopSignal", prune=1)),
    GatedFields(
        "PodObservedGenerationTracking",
        (
            GatedField("status", ("observedGeneration",)),
            GatedField("status", ("conditions", EACH, "observedGeneration")),
        ),
    ),
    # kube clears it whatever the old pod holds
    GatedFields("ResourceHealthStatus", _statuses("allocatedResourcesStatus"), in_use=()),
    GatedFields("HostnameOverride", (_spec("hostnameOverride"),)),
    GatedFields("EnvFiles", _containers("env", EACH, "valueFrom", "fileKeyRef")),
)

JOB: tuple[GatedFields, ...] = (
    GatedFields("JobPodReplacementPolicy", (_spec("podReplacementPolicy"),)),
    GatedFields("JobBackoffLimitPerIndex", (_spec("backoffLimitPerIndex"), _spec("maxFailedIndexes"))),
    GatedFields("JobSuccessPolicy", (_spec("successPolicy"),)),
    GatedFields("JobManagedBy", (_spec("managedBy"),)),
)

STATEFULSET: tuple[GatedFields, ...] = (
    GatedFields("MaxUnavailableStatefulSet", (_spec("updateStrategy", "rollingUpdate", "maxUnavailable"),)),
)

SERVICE: tuple[GatedFields, ...] = (
    GatedFields("ServiceTrafficDistribution", (_spec("trafficDistribution"),)),
)

# A claim's and a volume's class of mutable attributes (the PVC and PV strategies' DropDisabledFields).
VOLUME: tuple[GatedFields, ...] = (
    GatedFields("VolumeAttributesClass", (_spec("volumeAttributesClassName"),)),
)

_TEMPLATE = ("spec", "template", "spec")
_JOB_TEMPLATE = ("spec", "jobTemplate", "spec")

# Where each kind holds which gated fields: (the table, the path of each part it has).
_ROOTS: Mapping[str, tuple[tuple[tuple[GatedFields, ...], Mapping[str, tuple[str, ...]]], ...]] = {
    "Pod": ((POD, {"spec": ("spec",), "status": ("status",)}),),
    "PodTemplate": ((POD, {"spec": ("template", "spec")}),),
    "ReplicationController": ((POD, {"spec": _TEMPLATE}),),
    "Deployment": ((POD, {"spec": _TEMPLATE}),),
    "ReplicaSet": ((POD, {"spec": _TEMPLATE}),),
    "DaemonSet": ((POD, {"spec": _TEMPLATE}),),
    "StatefulSet": ((POD, {"spec": _TEMPLATE}), (STATEFULSET, {"spec": ("spec",)})),
    "Job": ((POD, {"spec": _TEMPLATE}), (JOB, {"spec": ("spec",)})),
    "CronJob": ((POD, {"spec": (*_JOB_TEMPLATE, "template", "spec")}), (JOB, {"spec": _JOB_TEMPLATE})),
    "Service": ((SERVICE, {"spec": ("spec",)}),),
    "PersistentVolumeClaim": ((VOLUME, {"spec": ("spec",)}),),
    "PersistentVolume": ((VOLUME, {"spec": ("spec",)}),),
}

# Where each kind that carries a pod spec keeps it (validation's env-name rule reads it too).
POD_SPEC_PATHS: Mapping[str, tuple[str, ...]] = {
    kind: parts["spec"] for kind, roots in _ROOTS.items() for table, parts in roots if table is POD
}


def pod_spec(kind: str, obj: Any) -> Obj | None:
    """The pod spec `obj` of `kind` carries (its template's for workloads), if it has one."""
    found = _at(obj, POD_SPEC_PATHS[kind]) if kind in POD_SPEC_PATHS else None
    return found if type(found) is dict else None


def every_container(spec: Mapping[str, Any]) -> Iterator[Obj]:
    """A pod spec's init, app and ephemeral containers, in that order (kube's VisitContainers)."""
    for group in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(group) or []


# For one kind on one release: the gates that are off, each with the parts' paths.
_Plan = tuple[tuple[GatedFields, Mapping[str, tuple[str, ...]]], ...]


def _plan(kind: str, minor: int) -> _Plan:
    # A gate younger than the release guards fields the release does not know: decoding has already
    # refused or pruned them (`fieldversions.py`), so only the gates that exist there and are off count.
    return tuple(
        (gated, parts)
        for table, parts in _ROOTS.get(kind, ())
        for gated in table
        if GATES[gated.gate][0][0] <= minor
        and not enabled(gated.gate, minor)
        and any(field.part in parts for field in gated.fields)
    )


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for step in path:
        if type(obj) is not dict:
            return None
        obj = obj.get(step)
    return obj


def _parents(node: Any, path: tuple[str, ...]) -> Iterator[Obj]:
    """The dicts that would hold the last step of `path`, below `node`."""
    if not path:
        if type(node) is dict:
            yield node
        return
    step, rest = path[0], path[1:]
    if step == EACH:
        if type(node) is list:
            for item in node:
                yield from _parents(item, rest)
    elif type(node) is dict and step in node:
        yield from _parents(node[step], rest)


def _used(root: Any, field: GatedField) -> bool:
    for parent in _parents(root, field.path[:-1]):
        value = parent.get(field.path[-1])
        if field.volume_source is not None:
            if type(value) is list and any(_of_source(item, field.volume_source) for item in value):
                return True
        elif value not in (None, "", [], {}) and value != field.forced:
            return True
    return False


def _present(root: Any, field: GatedField) -> bool:
    # Runs on every pod write of an older tenant, so a plain loop rather than _parents' generators.
    path = field.path
    nodes = [root]
    for step in path[:-1]:
        below: list[Any] = []
        for node in nodes:
            if step == EACH:
                if type(node) is list:
                    below.extend(node)
            elif type(node) is dict:
                value = node.get(step)
                if value is not None:
                    below.append(value)
        if not below:
            return False
        nodes = below
    name = path[-1]
    source = field.volume_source
    for node in nodes:
        if type(node) is not dict:
            continue
        if source is None:
            if name in node:
                return True
            continue
        volumes = node.get(name)
        if type(volumes) is list:
            for volume in volumes:
                if type(volume) is dict and volume.get(source) is not None:
                    return True
    return False


def _of_source(volume: Any, source: str) -> bool:
    return type(volume) is dict and volume.get(source) is not None


def _clear(node: Any, path: tuple[str, ...], field: GatedField) -> None:
    step, rest = path[0], path[1:]
    if step == EACH:
        if type(node) is list:
            for item in node:
                _clear(item, rest, field)
        return
    if type(node) is not dict or step not in node:
        return
    if not rest:
        if field.forced is not None:
            node[step] = field.forced
        else:
            del node[step]
        return
    _clear(node[step], rest, field)
    if len(rest) <= field.prune and node[step] == {}:
        del node[step]


def _drop_volumes(spec: Obj, source: str) -> None:
    """Removes the volumes of `source` and every container's mounts of them, as kube's
    dropImageVolumes does (a list left empty goes too)."""
    gone = {volume.get("name") for volume in spec.get("volumes") or () if _of_source(volume, source)}
    kept = [volume for volume in spec["volumes"] if not _of_source(volume, source)]
    if kept:
        spec["volumes"] = kept
    else:
        del spec["volumes"]
    for name in _CONTAINERS:
        for container in spec.get(name) or ():
            mounts = container.get("volumeMounts") if type(container) is dict else None
            if type(mounts) is not list:
                continue
            left = [mount for mount in mounts if type(mount) is not dict or mount.get("name") not in gone]
            if left:
                container["volumeMounts"] = left
            else:
                del container["volumeMounts"]


def _roots(obj: Obj, old: Obj | None, parts: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    roots: dict[str, Any] = {}
    for part, path in parts.items():
        if old is not None and obj.get(path[0]) is old.get(path[0]):
            continue
        root = _at(obj, path)
        if type(root) is dict:
            roots[part] = root
    return roots


class DisabledFields:
    """Clears, from the writes of one release's API server, the fields whose gate is off there."""

    def __init__(self, minor: int) -> None:
        self._minor = minor
        # A caller of no release (LATEST) knows every field the lab does, with every gate on.
        self._plans: dict[str, _Plan] = {} if minor < LATEST else dict.fromkeys(_ROOTS, ())

    def drop(self, kind: str, obj: Obj, old: Obj | None) -> None:
        """Clears the disabled fields from `obj` (in place), keeping a gate's fields that `old`, the
        stored object of an update, already uses. A part `obj` shares with `old` by identity (what the
        write leaves alone, a pod's spec on a status update) is neither read nor changed: it was
        cleared when it was stored."""
        plan = self._plans.get(kind)
        if plan is None:
            plan = self._plans[kind] = _plan(kind, self._minor)
        found: dict[int, dict[str, Any]] = {}  # the parts' roots, once per table's parts
        for gated, parts in plan:
            roots = found.get(id(parts))
            if roots is None:
                roots = found[id(parts)] = _roots(obj, old, parts)
            if not roots:
                continue
            fields = [
                field for field in gated.fields if field.part in roots and _present(roots[field.part], field)
            ]
            if not fields:
                continue
            if old is not None and any(
                field.part in parts and _used(_at(old, parts[field.part]), field) for field in gated.keepers()
            ):
                continue
            for field in fields:
                root = roots[field.part]
                if field.volume_source is not None:
                    _drop_volumes(root, field.volume_source)
                else:
                    _clear(root, field.path, field)
