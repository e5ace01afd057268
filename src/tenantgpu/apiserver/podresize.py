"""`pods/resize` (in-place pod resize, InPlacePodVerticalScaling, served from Kubernetes 1.33): what
kube's resize strategy keeps of an update and the rules of its ValidatePodResize, as of 1.33.

Only the containers' (and sidecars') `resources` and `resizePolicy` pass through; everything else of
the update is dropped. Then, in kube's order: a pod with pod-level resources, a static pod or a Windows
pod cannot be resized at all (that error alone is returned); the QoS class may not change; a pod whose
running container reports no `resources` runs on a node without resize support; containers may not be
added, removed, renamed or reordered; requests and limits may not be removed; a memory limit may not be
lowered or added unless the container restarts for memory (a 1.33 rule, gone in 1.34); and only cpu and
memory may change (a non-sidecar init container's resources not at all, a resizePolicy neither).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tenantgpu.apiserver.defaults import pod_qos_class
from tenantgpu.apiserver.fielderrors import ROOT, Cause, forbidden, invalid
from tenantgpu.apiserver.jsoncodec import clone
from tenantgpu.gpushare.quantity import QuantityError, parse_quantity

Obj = dict[str, Any]

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
_GROUPS = ("containers", "initContainers")
_RESIZABLE = ("cpu", "memory")


def resize_base(new: Obj, old: Obj) -> Obj:
    """kube's dropNonResizeUpdates: the stored pod with the containers' `resources` and `resizePolicy`
    of the update, matched by position. An update that adds, removes or renames a container is kept as
    it came, for validation to refuse."""
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    if any(len(new_spec.get(g) or []) != len(old_spec.get(g) or []) for g in _GROUPS):
        return new
    merged = clone(old)
    spec = merged.setdefault("spec", {})
    for group in _GROUPS:
        wanted = new_spec.get(group) or []
        if not wanted:
            continue
        stored = spec[group]
        if any(w.get("name") != s.get("name") for w, s in zip(wanted, stored, strict=True)):
            spec[group] = clone(wanted)
            continue
        for w, s in zip(wanted, stored, strict=True):
            for field in ("resources", "resizePolicy"):
                if field in w:
                    s[field] = clone(w[field])
                else:
                    s.pop(field, None)
    return merged


def _quantities(resources: Mapping[str, Any]) -> dict[str, Any]:
    values = {}
    for name, value in resources.items():
        try:
            values[name] = parse_quantity(value)
        except QuantityError:
            values[name] = value  # refused by the spec's own validation
    return values


def _same_container(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Semantic equality: quantities by value (`1000m` is `1`), everything else as JSON."""
    new_resources, old_resources = new.get("resources") or {}, old.get("resources") or {}
    if {k: v for k, v in new.items() if k != "resources"} != {
        k: v for k, v in old.items() if k != "resources"
    }:
        return False
    return all(
        _quantities(new_resources.get(part) or {}) == _quantities(old_resources.get(part) or {})
        for part in ("requests", "limits")
    ) and set(new_resources) - {"requests", "limits"} == set(old_resources) - {"requests", "limits"}


def _keep_cpu_and_memory(container: Mapping[str, Any], old: Mapping[str, Any]) -> Obj:
    """kube's dropCPUMemoryResourcesFromContainer: the container with its cpu and memory put back as
    they were, so what still differs from `old` is a change to something else."""
    result = dict(container)
    resources: Obj = {}
    new_resources, old_resources = container.get("resources") or {}, old.get("resources") or {}
    for part in ("limits", "requests"):
        was = old_resources.get(part)
        if was is None:
            continue  # kube drops the whole list where the old container had none
        munged = {k: v for k, v in (new_resources.get(part) or {}).items() if k not in _RESIZABLE}
        munged.update({k: was[k] for k in _RESIZABLE if k in was})
        resources[part] = munged
    result["resources"] = resources
    return result


def _container_resize_causes(new: Mapping[str, Any], old: Mapping[str, Any], path: str) -> list[Cause]:
    """kube's validateContainerResize for one container (path: its `resources`)."""
    causes: list[Cause] = []
    new_resources, old_resources = new.get("resources") or {}, old.get("resources") or {}
    for part, what in (("requests", "resource requests"), ("limits", "resource limits")):
        if set(old_resources.get(part) or {}) - set(new_resources.get(part) or {}):
            causes.append(forbidden(f"{path}.{part}", f"{what} cannot be removed"))
    policy = next(
        (p.get("restartPolicy") for p in new.get("resizePolicy") or [] if p.get("resourceName") == "memory"),
        "",
    )
    if policy in ("NotRequired", "", None):
        new_limit = (new_resources.get("limits") or {}).get("memory")
        old_limit = (old_resources.get("limits") or {}).get("memory")
        field = f"{path}.limits[memory]"
        if new_limit is not None and old_limit is not None:
            try:
                lowered = parse_quantity(new_limit) < parse_quantity(old_limit)
            except QuantityError:
                lowered = False
            if lowered:
                causes.append(
                    forbidden(
                        field, "memory limits cannot be decreased unless resizePolicy is RestartContainer"
                    )
                )
        elif new_limit is not None:
            causes.append(
                forbidden(field, "memory limits cannot be added unless resizePolicy is RestartContainer")
            )
    return causes


def _order_causes(spec: Mapping[str, Any], old_spec: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for group in _GROUPS:
        new_list, old_list = spec.get(group) or [], old_spec.get(group) or []
        if len(new_list) != len(old_list):
            causes.append(forbidden(f"spec.{group}", f"{group} may not be added or removed on resize"))
            continue
        for i, (now, was) in enumerate(zip(new_list, old_list, strict=True)):
            if now.get("name") != was.get("name"):
                causes.append(
                    forbidden(f"spec.{group}[{i}].name", f"{group} may not be renamed or reordered on resize")
                )
    return causes


def _resize_supported(old: Mapping[str, Any]) -> bool:
    """kube's isPodResizeRequestSupported: the first running container reports `resources` (its node's
    kubelet resizes); with none running, it cannot be told, and the resize is let through."""
    for entry in (old.get("status") or {}).get("containerStatuses") or []:
        if "running" in (entry.get("state") or {}):
            return entry.get("resources") is not None
    return True


def _pod_level_resources(spec: Mapping[str, Any]) -> bool:
    resources = spec.get("resources") or {}
    return bool(resources.get("requests") or resources.get("limits"))


def resize_causes(obj: Mapping[str, Any], old: Mapping[str, Any], checked: list[Cause]) -> list[Cause]:
    """ValidatePodResize of the update `obj` (after `resize_base`) of the stored pod `old`; `checked` are
    the causes of the usual metadata and spec validation of `obj`, which kube runs first."""
    spec, old_spec = obj.get("spec") or {}, old.get("spec") or {}
    if _pod_level_resources(old_spec) or _pod_level_resources(spec):
        return [forbidden(ROOT, "pods with pod-level resources cannot be resized")]
    if MIRROR_POD_ANNOTATION in ((old.get("metadata") or {}).get("annotations") or {}):
        return [forbidden(ROOT, "static pods cannot be resized")]
    if (old_spec.get("os") or {}).get("name") == "windows":
        return [forbidden(ROOT, "windows pods cannot be resized")]
    causes = list(checked)
    old_qos = (old.get("status") or {}).get("qosClass") or pod_qos_class(old_spec)
    if old_qos != pod_qos_class(spec):
        shown = (obj.get("status") or {}).get("qosClass") or ""
        causes.append(invalid("spec", shown, "Pod QOS Class may not change as a result of resizing"))
    if not _resize_supported(old):
        causes.append(forbidden("spec", "Pod running on node without support for resize"))
    order = _order_causes(spec, old_spec)
    if order:
        return causes + order
    containers, old_containers = spec.get("containers") or [], old_spec.get("containers") or []
    inits, old_inits = spec.get("initContainers") or [], old_spec.get("initContainers") or []
    for i, was in enumerate(old_inits):
        if was.get("restartPolicy") == "Always":
            causes.extend(_container_resize_causes(inits[i], was, f"spec.initContainers[{i}].resources"))
    for i, was in enumerate(old_containers):
        causes.extend(_container_resize_causes(containers[i], was, f"spec.containers[{i}].resources"))
    for now, was in zip(containers, old_containers, strict=True):
        if not _same_container(_keep_cpu_and_memory(now, was), was):
            causes.append(forbidden("spec", "only cpu and memory resources are mutable"))
    for now, was in zip(inits, old_inits, strict=True):
        if now.get("restartPolicy") == "Always":
            if not _same_container(_keep_cpu_and_memory(now, was), was):
                causes.append(
                    forbidden("spec", "only cpu and memory resources for sidecar containers are mutable")
                )
        elif not _same_container(now, was):
            causes.append(forbidden("spec", "resources for non-sidecar init containers are immutable"))
    return causes
