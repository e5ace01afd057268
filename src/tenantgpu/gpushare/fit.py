"""One pod against one node: HAMi's scoreNode (init containers on copies, app containers cumulative)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tenantgpu.gpushare import reasons as r
from tenantgpu.gpushare.device import ContainerDevice, DeviceUsage
from tenantgpu.gpushare.policy import ScoringWeights, device_score, node_score, sort_devices
from tenantgpu.gpushare.request import ContainerDeviceRequest
from tenantgpu.gpushare.vendor import DeviceVendor, FitContext

PodRequests = Sequence[Mapping[str, ContainerDeviceRequest]]
"""Per container (init first), the request of each vendor it uses; an empty mapping for no device."""


@dataclass
class NodeFit:
    """The outcome on one node: fits or not, HAMi's reason, the pre-pod node score, the devices per vendor."""

    ok: bool
    reason: str = ""
    score: float = 0.0
    devices: dict[str, list[list[ContainerDevice]]] = field(default_factory=dict)


@dataclass(frozen=True)
class PodContext:
    pod: dict[str, Any]
    annotations: dict[str, str]
    node: dict[str, Any] | None
    gpu_policy: str
    numa_bind: bool
    num_init: int
    weights: ScoringWeights
    quota_for: Callable[[str], Callable[[int, int], bool] | None] = lambda _vendor: None


def fit_pod(
    devices: Sequence[DeviceUsage],
    requests: PodRequests,
    vendors: Mapping[str, DeviceVendor],
    ctx: PodContext,
    *,
    scratch: bool = False,
) -> NodeFit:
    """Fit every container of the pod on copies of `devices` (pre-pod usage); `devices` is not changed
    unless `scratch` says the caller made them for this call alone."""
    base_types = _unique_types(devices)
    init_allocs: dict[str, list[list[ContainerDevice]]] = {}
    for i in range(ctx.num_init):
        req = requests[i]
        if not req:
            for typ in base_types:
                init_allocs.setdefault(typ, []).append([])
            continue
        scratch = [d.copy() for d in devices]
        reason = _fit_in_devices(scratch, req, vendors, ctx, init_allocs)
        if reason is not None:
            return NodeFit(False, reason)
        for typ in base_types:
            if len(init_allocs.get(typ, [])) == i:
                init_allocs.setdefault(typ, []).append([])

    working = list(devices) if scratch else [d.copy() for d in devices]
    score = node_score(working)
    app_allocs: dict[str, list[list[ContainerDevice]]] = {}
    for app_index, req in enumerate(requests[ctx.num_init :]):
        if not req:
            for typ in base_types:
                app_allocs.setdefault(typ, []).append([])
            continue
        reason = _fit_in_devices(working, req, vendors, ctx, app_allocs)
        if reason is not None:
            return NodeFit(False, reason)
        for typ in base_types:
            if len(app_allocs.get(typ, [])) == app_index:
                app_allocs.setdefault(typ, []).append([])
    for typ, segments in init_allocs.items():
        app_allocs[typ] = segments + app_allocs.get(typ, [])
    return NodeFit(True, "", score, app_allocs)


def _unique_types(devices: Sequence[DeviceUsage]) -> list[str]:
    seen: dict[str, None] = {}
    for d in devices:
        seen.setdefault(d.type, None)
    return list(seen)


def _fit_in_devices(
    working: list[DeviceUsage],
    requests: Mapping[str, ContainerDeviceRequest],
    vendors: Mapping[str, DeviceVendor],
    ctx: PodContext,
    allocs: dict[str, list[list[ContainerDevice]]],
) -> str | None:
    """fitInDevices: score, sort, vendor Fit, charge the chosen cards; the reason string on failure."""
    for vendor_name, request in requests.items():
        vendor = vendors[vendor_name]
        scores = [device_score(d, request, ctx.weights) for d in working]
        order = sort_devices(working, scores, ctx.gpu_policy, ctx.numa_bind)
        working[:] = [working[i] for i in order]
        own = [d for d in working if vendor.owns(d)]
        if request.nums > len(own):
            return r.NODE_INSUFFICIENT_DEVICE
        # The quota sees the segments of this phase only (init, or app), as HAMi passes that map.
        allocated = list(allocs.get(vendor_name, []))
        fit_ctx = FitContext(
            pod=ctx.pod,
            annotations=ctx.annotations,
            node=ctx.node,
            gpu_policy=ctx.gpu_policy,
            num_init=ctx.num_init,
            quota_fits=ctx.quota_for(vendor_name),
            allocated=allocated,
        )
        result = vendor.fit(own, request, fit_ctx)
        if not result.ok:
            return result.reason
        by_id = {d.id: d for d in working}
        for chosen in result.devices:
            dev = by_id[chosen.uuid]
            dev.used += 1
            dev.usedmem += chosen.usedmem
            dev.usedcores += chosen.usedcores
        allocs.setdefault(vendor_name, []).append(result.devices)
    return None
