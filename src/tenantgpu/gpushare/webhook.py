"""HAMi's mutating webhook (`pkg/scheduler/webhook.go`) as a pure function of a pod."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tenantgpu.gpushare import annotations as ann
from tenantgpu.gpushare.config import SharingConfig
from tenantgpu.gpushare.jsonpatch import diff
from tenantgpu.gpushare.nvidia import NvidiaGPUs
from tenantgpu.gpushare.quota import QuotaBook
from tenantgpu.gpushare.vendor import AdmissionDenied, DeviceVendor

DEFAULT_SCHEDULER = "default-scheduler"


@dataclass
class Admission:
    """The webhook's answer: allowed or not (HAMi's message, HTTP code), the mutated pod, its patch."""

    allowed: bool
    pod: dict[str, Any]
    message: str | None = None
    code: int = 200
    mutated: bool = True
    original: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def patch(self) -> list[dict[str, Any]]:
        """RFC 6902 operations from the input pod to `.pod` as it is now (empty when not allowed)."""
        if not self.allowed or self.original is None:
            return []
        return diff(self.original, self.pod)


def _tree_copy(value: Any) -> Any:
    """A deep copy of decoded JSON (dicts, lists, scalars), several times faster than copy.deepcopy."""
    if type(value) is dict:
        return {k: _tree_copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_tree_copy(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return copy.deepcopy(value)


def vendors_for(cfg: SharingConfig) -> tuple[DeviceVendor, ...]:
    """The device vendors a SharingConfig enables (NVIDIA only today)."""
    return (NvidiaGPUs(cfg),)


def _privileged(container: dict[str, Any]) -> bool:
    return bool((container.get("securityContext") or {}).get("privileged"))


def mutate_pod(
    pod: dict[str, Any],
    cfg: SharingConfig,
    quotas: QuotaBook | None = None,
    vendors: Sequence[DeviceVendor] | None = None,
) -> Admission:
    """What HAMi's webhook does to a pod being created: defaults, schedulerName, denials, quota."""
    vendors = vendors if vendors is not None else vendors_for(cfg)
    original = pod
    pod = _tree_copy(pod)
    meta = pod.get("metadata") or {}
    spec = pod.setdefault("spec", {})
    if (meta.get("labels") or {}).get(ann.WEBHOOK_IGNORE_LABEL) == "ignore":
        return Admission(True, pod, "pod is excluded by hami.io/webhook=ignore", mutated=False)
    if not spec.get("containers"):
        return Admission(False, pod, "pod has no containers", code=403, mutated=False)
    scheduler = spec.get("schedulerName") or ""
    if (
        scheduler
        and (scheduler != DEFAULT_SCHEDULER or not cfg.force_overwrite_default_scheduler)
        and (not cfg.scheduler_name or scheduler != cfg.scheduler_name)
    ):
        return Admission(True, pod, "pod already has different scheduler assigned", mutated=False)

    privileged = next(
        (
            c.get("name", "")
            for c in [*(spec.get("initContainers") or []), *spec["containers"]]
            if _privileged(c)
        ),
        None,
    )
    has_resource = False
    for container in [*(spec.get("initContainers") or []), *spec["containers"]]:
        for vendor in vendors:
            try:
                found = vendor.mutate_container(container, pod)
            except AdmissionDenied as exc:
                return Admission(False, _tree_copy(original), str(exc), code=500, mutated=False)
            has_resource = has_resource or found
    if privileged is not None and has_resource:
        return Admission(False, pod, f"container {privileged} is privileged", code=403, mutated=False)
    if has_resource and cfg.scheduler_name:
        spec["schedulerName"] = cfg.scheduler_name
        if spec.get("nodeName"):
            return Admission(False, pod, "pod has node assigned", code=403, mutated=False)
    if quotas is not None and not _fits_quota(pod, vendors, quotas):
        return Admission(False, pod, "exceeding resource quota", code=403, mutated=False)
    return Admission(True, pod, None, original=original)


def _fits_quota(pod: dict[str, Any], vendors: Sequence[DeviceVendor], quotas: QuotaBook) -> bool:
    """fitResourceQuota: max(sum over app containers, largest init) of memreq x nums and cores x nums."""
    spec = pod.get("spec") or {}
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    if not quotas.limited(namespace):
        return True  # FitQuota: no quota for the namespace means no limit
    for vendor in vendors:
        app_mem = app_cores = init_mem = init_cores = 0
        for container in spec.get("containers") or []:
            req = vendor.container_request(container)
            if req is not None:
                app_mem += req.memreq * req.nums
                app_cores += req.coresreq * req.nums
        for container in spec.get("initContainers") or []:
            req = vendor.container_request(container)
            if req is not None:
                init_mem = max(init_mem, req.memreq * req.nums)
                init_cores = max(init_cores, req.coresreq * req.nums)
        mem, cores = max(app_mem, init_mem), max(app_cores, init_cores)
        if mem == 0 and cores == 0:
            continue
        if not quotas.fits(namespace, {vendor.memory_resource: mem, vendor.core_resource: cores}):
            return False
    return True


def pod_requests_gpu(pod: dict[str, Any], cfg: SharingConfig) -> bool:
    """Does any container ask for a HAMi resource (as the scheduler reads it)?"""
    vendors = vendors_for(cfg)
    spec = pod.get("spec") or {}
    return any(
        v.container_request(c) is not None
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        for v in vendors
    )
