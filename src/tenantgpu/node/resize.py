"""In-place pod resize on the kubelet of 1.33 (InPlacePodVerticalScaling, beta and on): whether the
resources a running pod's spec now asks for can be allocated, and the conditions that say so.

Read from kubernetes' `pkg/kubelet/kubelet.go` (`handlePodResourcesResize`, `canResizePod`) and
`pkg/kubelet/status/status_manager.go` (`updatedPodResizeCondition`) as of 1.33:
- A pod that needs more cpu or memory than the node has at all is `Infeasible`: `Node didn't have
  enough capacity: memory, requested: <bytes>, capacity: <bytes>` (memory is looked at first), else
  the same for cpu in milli-CPU.
- One that fits the node but not beside the pods already there is `Deferred`, with the text the
  kubelet's admission would give (`Node didn't have enough resource: cpu, requested: …, used: …,
  capacity: …`), and is tried again when another pod leaves.
- Either way the pod gets the condition `PodResizePending` (status True, the reason and text, a fresh
  `lastProbeTime`, a `lastTransitionTime` that moves only when the reason does). An accepted resize
  clears it and shows `PodResizeInProgress` (no reason) until the containers run with their new
  resources. A 1.33 kubelet records no event for any of this (events came in 1.34).
- A container whose resized resource has `resizePolicy` RestartContainer is restarted: a `Killing`
  event `Container <name> resize requires restart`, one more restart in its status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tenantgpu.gpushare.quantity import QuantityError, parse_quantity
from tenantgpu.node import admission

PENDING = "PodResizePending"
IN_PROGRESS = "PodResizeInProgress"
INFEASIBLE = "Infeasible"
DEFERRED = "Deferred"
_RESIZABLE = ("cpu", "memory")


@dataclass(frozen=True)
class Verdict:
    """Why a resize waits: `Infeasible` or `Deferred`, and the kubelet's text."""

    reason: str
    message: str


def resizable(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The resources of each container a resize may change (app containers and sidecars), by name."""
    found: dict[str, Any] = {}
    for container in spec.get("initContainers") or ():
        if container.get("restartPolicy") == "Always":
            found[container.get("name", "")] = container.get("resources") or {}
    for container in spec.get("containers") or ():
        found[container.get("name", "")] = container.get("resources") or {}
    return found


def _values(resources: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for part, amounts in resources.items():
        if isinstance(amounts, Mapping):
            values[part] = {name: _quantity(value) for name, value in amounts.items()}
        else:
            values[part] = amounts
    return values


def _quantity(value: Any) -> Any:
    try:
        return parse_quantity(value)
    except QuantityError:
        return value


def same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two `resizable` results ask for the same, quantities compared by value (`1G` is
    `1000000000`, as the runtime reports a memory limit)."""
    return a.keys() == b.keys() and all(_values(a[name]) == _values(b[name]) for name in a)


def allocated_from_status(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What a restarted kubelet takes as allocated: each created container's reported `resources`
    (kube checkpoints its allocation; the lab reads it back from the status it wrote)."""
    status = pod.get("status") or {}
    found: dict[str, Any] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for entry in status.get(key) or ():
            if isinstance(entry.get("resources"), Mapping) and "containerID" in entry:
                found[entry.get("name", "")] = dict(entry["resources"])
    return found


def with_resources(spec: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `spec` whose containers named in `wanted` have those resources (the rest shared)."""
    out = dict(spec)
    for group in ("initContainers", "containers"):
        if group in spec:
            out[group] = [
                {**c, "resources": wanted[c.get("name", "")]} if c.get("name", "") in wanted else c
                for c in spec.get(group) or ()
            ]
    return out


def _allocatable(node: Mapping[str, Any], name: str) -> int | None:
    status = node.get("status") or {}
    value = (status.get("allocatable") or {}).get(name)
    if value is None:
        return None
    try:
        return admission.whole(name, value)
    except QuantityError:
        return None


def verdict(
    pod: Mapping[str, Any],
    node: Mapping[str, Any],
    others: list[admission.Requests] | admission.NodeUsage,
    *,
    ports_in_use: list[tuple[str, str, int]] | None = None,
) -> Verdict | None:
    """None when the resized `pod` can be allocated beside `others` (what the other admitted pods
    request, or their totals); otherwise why it waits."""
    requests = admission.pod_requests(pod)
    for name in ("memory", "cpu"):
        capacity = _allocatable(node, name)
        wanted = requests.get(name, 0)
        if capacity is not None and wanted > capacity:
            return Verdict(
                INFEASIBLE,
                f"Node didn't have enough capacity: {name}, requested: {wanted}, capacity: {capacity}",
            )
    refused = admission.admit(pod, node, others, ports_in_use=ports_in_use or ())
    return None if refused is None else Verdict(DEFERRED, refused.message)


def condition(
    kind: str, now: str, verdict: Verdict | None = None, old: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A resize condition as the kubelet's status manager writes it."""
    reason = verdict.reason if verdict else ""
    kept = old is not None and (old.get("reason") or "") == reason
    cond: dict[str, Any] = {
        "type": kind,
        "status": "True",
        "lastProbeTime": now,
        "lastTransitionTime": old.get("lastTransitionTime", now) if kept and old is not None else now,
    }
    if verdict is not None:
        cond["reason"] = verdict.reason
        cond["message"] = verdict.message
    return cond


def _amount(resources: Mapping[str, Any], part: str, name: str) -> Any:
    value = (resources.get(part) or {}).get(name)
    try:
        return None if value is None else parse_quantity(value)
    except QuantityError:
        return value


def restarts_for(container: Mapping[str, Any], old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether the container must restart to take `new`: a resource that changed is one its
    `resizePolicy` says RestartContainer for."""
    policies = {p.get("resourceName"): p.get("restartPolicy") for p in container.get("resizePolicy") or ()}
    for name in _RESIZABLE:
        if policies.get(name) != "RestartContainer":
            continue
        if any(_amount(old, part, name) != _amount(new, part, name) for part in ("requests", "limits")):
            return True
    return False
