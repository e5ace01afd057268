"""What-if placement: place pending pods, in order, onto nodes as HAMi's webhook and scheduler would."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tenantgpu.gpushare import annotations as ann
from tenantgpu.gpushare.cluster import TERMINAL_PHASES, ClusterState, Decision, pod_key
from tenantgpu.gpushare.codec import (
    CodecError,
    decode_node_register,
    decode_pod_devices,
    encode_node_register,
)
from tenantgpu.gpushare.config import SharingConfig
from tenantgpu.gpushare.request import pod_containers
from tenantgpu.gpushare.shape import quantity_problem
from tenantgpu.gpushare.webhook import mutate_pod, vendors_for


class PlanInputError(ValueError):
    """An input object the planner cannot use (bad quantity, malformed annotation)."""


@dataclass(frozen=True)
class Placement:
    """One pending pod's outcome: its node and devices, or why not; plus its GPU ask for people."""

    pod: str
    node: str | None
    devices: str | None
    reason: str | None
    gpus: int = 0
    memory: str = ""
    cores: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"pod": self.pod, "node": self.node, "devices": self.devices, "reason": self.reason}


def _kind(obj: dict[str, Any]) -> str:
    return obj.get("kind", "")


def _check_quantities(obj: dict[str, Any], what: str) -> None:
    for c in pod_containers(obj):
        for section in ("limits", "requests"):
            for name, value in ((c.get("resources") or {}).get(section) or {}).items():
                problem = quantity_problem(value)
                if problem is not None:
                    raise PlanInputError(f"{what}: container {c.get('name', '')} {section}.{name}: {problem}")
    status = obj.get("status") or {}
    for section in ("allocatable", "capacity"):
        for name, value in (status.get(section) or {}).items():
            problem = quantity_problem(value)
            if problem is not None:
                raise PlanInputError(f"{what}: status.{section}.{name}: {problem}")


def _node_with_split_count(node: dict[str, Any], split_count: int | None) -> dict[str, Any]:
    name = node["metadata"]["name"]
    raw = (node["metadata"].get("annotations") or {}).get(ann.NODE_REGISTER)
    if raw is None or split_count is None:
        return node
    try:
        devices = decode_node_register(raw, decode_legacy=False)
    except CodecError as exc:
        raise PlanInputError(f"node {name}: malformed {ann.NODE_REGISTER} annotation: {exc}") from None
    node = copy.deepcopy(node)
    devices = [type(d)(**{**d.__dict__, "count": split_count}) for d in devices]
    node["metadata"]["annotations"][ann.NODE_REGISTER] = encode_node_register(devices)
    return node


def _is_placed(pod: dict[str, Any]) -> bool:
    notes = (pod.get("metadata") or {}).get("annotations") or {}
    return ann.VGPU_NODE in notes and ann.DEVICES_ALLOCATED in notes


def _is_bound(pod: dict[str, Any], cfg: SharingConfig, state: ClusterState) -> bool:
    """A pod with spec.nodeName is part of the cluster, unless it is a manifest yet to be created (no
    status) that HAMi's webhook would refuse (e.g. `pod has node assigned`): then it is planned, and
    its denial is its outcome."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return False
    if "status" in pod:
        return True
    return mutate_pod(pod, cfg, state.quotas).allowed


def _ask(pod: dict[str, Any], cfg: SharingConfig) -> tuple[int, str, str]:
    """GPUs, memory and cores per GPU as the scheduler reads them (after the webhook)."""
    gpus, mems, cores = 0, [], []
    for vendor in vendors_for(cfg):
        for c in pod_containers(pod):
            req = vendor.container_request(c)
            if req is None:
                continue
            gpus += req.nums
            mems.append(f"{req.memreq}" if req.memreq else f"{req.mem_percentage}%")
            cores.append(str(min(req.coresreq, 100)))
    return gpus, "/".join(mems), "/".join(cores)


def plan(
    objects: Iterable[dict[str, Any]],
    cfg: SharingConfig,
    *,
    device_split_count: int | None = None,
    fast: bool = True,
) -> list[Placement]:
    """Place every pending pod of `objects` in order; placed pods, nodes and ResourceQuotas are the cluster.

    Pending pods are those without HAMi's placement annotations that are not Succeeded/Failed and not
    bound (spec.nodeName). Each is admitted by the webhook (denials keep their message as the reason),
    scheduled, and counts for the next. Raises PlanInputError for unusable objects. `fast=False`
    uses the reference path only (every node evaluated), for comparison.
    """
    objects = _unique(objects)
    state = ClusterState(cfg)
    for obj in objects:
        if _kind(obj) == "Node":
            _check_quantities(obj, f"node {obj['metadata']['name']}")
            state.upsert_node(_node_with_split_count(obj, device_split_count))
            error = state.registration_error(obj["metadata"]["name"])
            if error is not None:
                raise PlanInputError(
                    f"node {obj['metadata']['name']}: malformed {ann.NODE_REGISTER} annotation: {error}"
                )
    for obj in objects:
        if _kind(obj) == "ResourceQuota":
            state.upsert_quota(obj)
    pending = []
    for obj in objects:
        if _kind(obj) != "Pod":
            continue
        ns, name = pod_key(obj)
        _check_quantities(obj, f"pod {ns}/{name}")
        if (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        if _is_placed(obj) or _is_bound(obj, cfg, state):
            try:
                decode_pod_devices(
                    ((obj.get("metadata") or {}).get("annotations") or {}).get(ann.DEVICES_ALLOCATED, "")
                )
            except CodecError as exc:
                raise PlanInputError(f"pod {ns}/{name}: malformed {ann.DEVICES_ALLOCATED}: {exc}") from None
            state.upsert_pod(obj)
        else:
            pending.append(obj)
    return [_place(state, obj, cfg, fast) for obj in pending]


def _unique(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each object once (first wins), so one `kubectl get nodes,pods -A -o yaml` file can be both inputs."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        key = (_kind(obj), meta.get("namespace") or "", meta.get("name", ""))
        if key not in seen:
            seen.add(key)
            out.append(obj)
    return out


def _place(state: ClusterState, pod: dict[str, Any], cfg: SharingConfig, fast: bool) -> Placement:
    ns, name = pod_key(pod)
    label = f"{ns}/{name}"
    admission = mutate_pod(pod, cfg, state.quotas)
    gpus, memory, cores = _ask(admission.pod, cfg)
    if not admission.allowed:
        return Placement(label, None, None, admission.message, gpus, memory, cores)
    decision: Decision = state.schedule(admission.pod, fast=fast)
    if decision.node is None:
        return Placement(label, None, None, decision.reason, gpus, memory, cores)
    placed = admission.pod
    placed.setdefault("metadata", {}).setdefault("annotations", {}).update(decision.scheduled_annotations(0))
    placed["metadata"].setdefault("namespace", ns)
    placed["spec"]["nodeName"] = decision.node
    state.upsert_pod(placed)
    return Placement(label, decision.node, decision.annotation, None, gpus, memory, cores)
