"""The kube-scheduler checks that run before HAMi's extender: unschedulable, taints, selector, capacity."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tenantgpu.gpushare import reasons as r
from tenantgpu.gpushare.quantity import QuantityError, parse_quantity

_UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


@dataclass(frozen=True)
class PodDemand:
    """What kube-scheduler's NodeResourcesFit charges for a pod: milli-CPU, memory bytes, one pod slot."""

    cpu_milli: int
    memory: int


@dataclass(frozen=True)
class NodeCapacity:
    cpu_milli: int | None
    memory: int | None
    pods: int | None


def _quantity(value: Any) -> Any:
    return parse_quantity(value)


def _resource(container: Mapping[str, Any], name: str) -> Any:
    res = container.get("resources") or {}
    req = res.get("requests") or {}
    if name in req:
        return _quantity(req[name])
    lim = res.get("limits") or {}
    # The API server defaults requests to limits when only limits are given.
    if name in lim:
        return _quantity(lim[name])
    return 0


def pod_amounts(
    spec: Mapping[str, Any], amounts: Callable[[Mapping[str, Any]], Mapping[str, Any]]
) -> dict[str, Any]:
    """What a pod needs of each resource, as kube's PodRequests counts it, given each container's `amounts`.

    The app containers add up. An init container runs alone, beside the sidecars started before it, so
    the pod needs at least that much. A sidecar (an init container with `restartPolicy: Always`) keeps
    running beside everything started after it, so it also adds to the app containers' sum.
    """
    totals: dict[str, Any] = {}
    for container in spec.get("containers") or []:
        for name, value in amounts(container).items():
            totals[name] = totals.get(name, 0) + value
    sidecars: dict[str, Any] = {}
    peak: dict[str, Any] = {}  # the most any step of the init sequence needs
    for init in spec.get("initContainers") or []:
        own = amounts(init)
        if init.get("restartPolicy") == "Always":
            for name, value in own.items():
                totals[name] = totals.get(name, 0) + value
                sidecars[name] = sidecars.get(name, 0) + value
            running = sidecars
        else:
            running = {**sidecars, **{name: value + sidecars.get(name, 0) for name, value in own.items()}}
        for name, value in running.items():
            peak[name] = max(peak.get(name, value), value)
    for name, value in peak.items():
        totals[name] = max(totals.get(name, value), value)
    return totals


def _cpu_and_memory(container: Mapping[str, Any]) -> dict[str, Any]:
    return {"cpu": _resource(container, "cpu"), "memory": _resource(container, "memory")}


def pod_demand(pod: dict[str, Any]) -> PodDemand:
    """CPU and memory as kube's PodRequests counts them (see `pod_amounts`), plus the pod's overhead;
    raises QuantityError."""
    spec = pod.get("spec") or {}
    overhead = spec.get("overhead") or {}
    needs = pod_amounts(spec, _cpu_and_memory)
    values = [
        needs.get(name, 0) + (_quantity(overhead[name]) if name in overhead else 0)
        for name in ("cpu", "memory")
    ]
    return PodDemand(cpu_milli=math.ceil(values[0] * 1000), memory=math.ceil(values[1]))


def node_capacity(node: dict[str, Any]) -> NodeCapacity:
    """Allocatable (else capacity) cpu, memory and pods; None where the node states nothing."""
    status = node.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}
    cpu = alloc.get("cpu")
    mem = alloc.get("memory")
    pods = alloc.get("pods")
    return NodeCapacity(
        cpu_milli=None if cpu is None else math.floor(_quantity(cpu) * 1000),
        memory=None if mem is None else math.floor(_quantity(mem)),
        pods=None if pods is None else math.floor(_quantity(pods)),
    )


def _tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key and key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    if not key:
        return False  # an empty key is only valid with Exists
    return (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taint(
    pod: dict[str, Any], node: dict[str, Any], effects: tuple[str, ...] = ("NoSchedule", "NoExecute")
) -> dict[str, Any] | None:
    """The first taint of the node with one of `effects` (a scheduler's by default; a kubelet heeds only
    NoExecute) that the pod does not tolerate."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in effects:
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _match_expression(labels: dict[str, str], expr: dict[str, Any]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def selector_matches(pod: dict[str, Any], node: dict[str, Any]) -> bool:
    """nodeSelector (all labels equal) and required node affinity (any term, all expressions)."""
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not affinity:
        return True
    return node_selector_terms_match(affinity.get("nodeSelectorTerms") or [], node)


def node_selector_terms_match(terms: list[dict[str, Any]], node: dict[str, Any]) -> bool:
    """A NodeSelector's terms (a pod's required node affinity, a volume's): any term whose label and
    `metadata.name` field expressions all match; a term with neither matches nothing."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    fields = {"metadata.name": (node.get("metadata") or {}).get("name", "")}
    for term in terms:
        exprs = term.get("matchExpressions") or []
        field_exprs = term.get("matchFields") or []
        if not exprs and not field_exprs:
            continue
        if all(_match_expression(labels, e) for e in exprs) and all(
            _match_expression(fields, e) for e in field_exprs
        ):
            return True
    return False


def static_reason(pod: dict[str, Any], node: dict[str, Any]) -> str | None:
    """kube-scheduler's verdict from the node object alone (no usage): unschedulable, taints, selector."""
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        if not any(_tolerates(t, _UNSCHEDULABLE_TAINT) for t in tolerations):
            return r.NODE_UNSCHEDULABLE
    taint = untolerated_taint(pod, node)
    if taint is not None:
        return f"{r.UNTOLERATED_TAINT} {{{taint.get('key', '')}: {taint.get('value') or ''}}}"
    if not selector_matches(pod, node):
        return r.NODE_SELECTOR_MISMATCH
    return None


def capacity_reason(
    demand: PodDemand, capacity: NodeCapacity, used_cpu: int, used_memory: int, used_pods: int
) -> str | None:
    """NodeResourcesFit: too many pods, or not enough cpu or memory left (kube-scheduler's texts)."""
    if capacity.pods is not None and used_pods + 1 > capacity.pods:
        return r.TOO_MANY_PODS
    if (
        capacity.cpu_milli is not None
        and demand.cpu_milli > 0
        and used_cpu + demand.cpu_milli > capacity.cpu_milli
    ):
        return r.INSUFFICIENT_CPU
    if capacity.memory is not None and demand.memory > 0 and used_memory + demand.memory > capacity.memory:
        return r.INSUFFICIENT_MEMORY
    return None


__all__ = [
    "NodeCapacity",
    "PodDemand",
    "QuantityError",
    "capacity_reason",
    "node_capacity",
    "pod_amounts",
    "pod_demand",
    "selector_matches",
    "static_reason",
    "untolerated_taint",
]
