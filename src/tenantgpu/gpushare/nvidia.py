"""NVIDIA behind the vendor seam: requests, webhook defaults, registry and Fit, as HAMi v2.10."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

from tenantgpu.gpushare import annotations as ann
from tenantgpu.gpushare import reasons as r
from tenantgpu.gpushare.codec import CodecError, decode_node_register
from tenantgpu.gpushare.config import SharingConfig
from tenantgpu.gpushare.device import ContainerDevice, DeviceInfo, DeviceUsage
from tenantgpu.gpushare.quantity import QuantityError, ceil_value
from tenantgpu.gpushare.request import (
    PERCENTAGE_UNSET,
    ContainerDeviceRequest,
    resource_int,
    resource_value,
)
from tenantgpu.gpushare.usage import collapse_usage
from tenantgpu.gpushare.vendor import AdmissionDenied, FitContext, FitResult

NVIDIA = "NVIDIA"
_INT32_MAX = 2**31 - 1
_REGISTER_MEMO_SIZE = 256  # distinct register annotations remembered (a node has one at a time)


def _policy_contains(policy: str, name: str) -> bool:
    return any(p.strip() == name for p in policy.split(","))


def type_allowed(annotations: dict[str, str], card_type: str) -> bool:
    """use-/nouse-gputype: case-insensitive substring of a listed model; empty = no constraint."""
    upper = card_type.upper()

    def match(listed: str) -> bool:
        return any(t.strip() and t.strip().upper() in upper for t in listed.split(","))

    use = annotations.get(ann.USE_GPU_TYPE, "")
    if use.strip() and not match(use):
        return False
    nouse = annotations.get(ann.NOUSE_GPU_TYPE, "")
    return not (nouse.strip() and match(nouse))


def uuid_allowed(annotations: dict[str, str], uuid: str) -> bool:
    """use-/nouse-gpuuuid: exact (trimmed) UUIDs; empty value = no constraint."""

    def match(listed: str) -> bool:
        return any(u.strip() == uuid for u in listed.split(","))

    use = annotations.get(ann.USE_GPU_UUID, "")
    if use.strip() and not match(use):
        return False
    nouse = annotations.get(ann.NOUSE_GPU_UUID, "")
    return not (nouse.strip() and match(nouse))


def numa_bind_requested(annotations: dict[str, str]) -> bool:
    return _parse_go_bool(annotations.get(ann.NUMA_BIND, ""))


def _parse_go_bool(text: str) -> bool:
    return text in ("1", "t", "T", "true", "TRUE", "True")


def cordoned_devices(node: dict[str, Any] | None) -> frozenset[str]:
    """UUIDs in the node's `hami.io/device-cordon` list (trimmed, empties skipped)."""
    if not node:
        return frozenset()
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(ann.DEVICE_CORDON, "")
    return frozenset(u.strip() for u in raw.split(",") if u.strip())


class NvidiaGPUs:
    """HAMi's NVIDIA backend (`pkg/device/nvidia/device.go`) under a SharingConfig."""

    name = NVIDIA
    allocated_annotation = ann.DEVICES_ALLOCATED
    to_allocate_annotation = ann.DEVICES_TO_ALLOCATE
    register_annotation = ann.NODE_REGISTER

    def __init__(self, cfg: SharingConfig) -> None:
        self.cfg = cfg
        self.memory_resource = cfg.resource_memory_name
        self.core_resource = cfg.resource_core_name
        # Register annotation text -> its devices (or why it is refused). Every node-lock PATCH brings the
        # node again with the same registration; decoding it once per distinct text saves the JSON work.
        self._registered: dict[str, list[DeviceInfo] | CodecError] = {}

    # --- requests ------------------------------------------------------------------------------
    def container_request(self, container: dict[str, Any]) -> ContainerDeviceRequest | None:
        """GenerateResourceRequests: None unless `nvidia.com/gpu` is a whole number > 0 (and gpumem sane)."""
        cfg = self.cfg
        nums = resource_int(container, cfg.resource_count_name)
        if nums is None or nums <= 0:
            return None
        memreq = 0
        if resource_value(container, cfg.resource_memory_name) is not None:
            mem = resource_int(container, cfg.resource_memory_name)
            factor = max(cfg.memory_factor, 1)
            if mem is None or mem < 0 or mem > _INT32_MAX // factor:
                return None  # HAMi rejects the request rather than under-allocate
            memreq = mem * factor
        percentage = PERCENTAGE_UNSET
        pct = resource_int(container, cfg.resource_memory_percentage_name)
        if pct is not None:
            pct = min(pct, 100)
            percentage = pct if pct > 0 else PERCENTAGE_UNSET
        if percentage == PERCENTAGE_UNSET and memreq == 0:
            if cfg.default_memory != 0:
                memreq = cfg.default_memory
            else:
                percentage = 100
        cores = cfg.default_cores
        core_value = resource_int(container, cfg.resource_core_name)
        if core_value is not None:
            cores = core_value
        return ContainerDeviceRequest(
            nums=nums, type=NVIDIA, memreq=memreq, mem_percentage=percentage, coresreq=cores
        )

    # --- admission -----------------------------------------------------------------------------
    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """MutateAdmission: validate the percentage, inject env, default gpu count and exclusive cores."""
        cfg = self.cfg
        pct_raw = resource_value(container, cfg.resource_memory_percentage_name)
        if pct_raw is not None:
            pct = _go_value(pct_raw)
            if pct < 0 or pct > 100:
                raise AdmissionDenied(
                    f"invalid {cfg.resource_memory_percentage_name} value {pct} in container "
                    f"{container.get('name', '')}: must be an integer between 0 and 100"
                )
        had_resources = "resources" in container
        resources = container.setdefault("resources", {})
        had_limits = "limits" in resources
        limits = resources.get("limits")
        if limits is None:
            limits = resources["limits"] = {}
        if cfg.resource_priority_name in limits:
            _append_env(container, ann.ENV_TASK_PRIORITY, str(_go_value(limits[cfg.resource_priority_name])))
        if cfg.gpu_core_policy not in ("", "default"):
            _append_env(container, ann.ENV_CORE_LIMIT_SWITCH, cfg.gpu_core_policy)
        has_resource = self._default_gpu_count(limits)
        if self._default_exclusive_cores(container, limits):
            has_resource = True
        spec = pod.setdefault("spec", {})
        if has_resource and cfg.runtime_class_name and spec.get("runtimeClassName") is None:
            spec["runtimeClassName"] = cfg.runtime_class_name
        if not has_resource and cfg.overwrite_env:
            _append_env(container, "NVIDIA_VISIBLE_DEVICES", "none")
        if not limits and not had_limits:  # leave the container as it came when nothing was added
            del resources["limits"]
            if not had_resources:
                del container["resources"]
        return has_resource

    def _default_gpu_count(self, limits: dict[str, Any]) -> bool:
        cfg = self.cfg
        if cfg.resource_count_name in limits:
            return True
        names = (cfg.resource_core_name, cfg.resource_memory_name, cfg.resource_memory_percentage_name)
        if any(n in limits for n in names) and cfg.default_gpu_num > 0:
            limits[cfg.resource_count_name] = str(cfg.default_gpu_num)
            return True
        return False

    def _default_exclusive_cores(self, container: dict[str, Any], limits: dict[str, Any]) -> bool:
        """PR #1354: whole-card memory without gpucores means the card exclusively (gpucores: 100)."""
        cfg = self.cfg
        if resource_value(container, cfg.resource_count_name) is None:
            return False
        if resource_value(container, cfg.resource_core_name) is not None:
            return False
        pct_raw = resource_value(container, cfg.resource_memory_percentage_name)
        if pct_raw is not None:
            exclusive = _go_value(pct_raw) == 100
        else:
            exclusive = resource_value(container, cfg.resource_memory_name) is None
        if exclusive:
            limits[cfg.resource_core_name] = "100"
        return exclusive

    # --- registry ------------------------------------------------------------------------------
    def node_devices(self, node: dict[str, Any]) -> list[DeviceInfo] | None:
        """Devices in `hami.io/node-nvidia-register`; None if absent; raises CodecError if malformed."""
        notes = (node.get("metadata") or {}).get("annotations") or {}
        raw = notes.get(ann.NODE_REGISTER)
        if raw is None:
            return None
        devices = self._decode_register(raw)
        if ann.NODE_SCORE in notes:
            pair_scores(node)  # GetNodeDevices fails the node on a malformed score annotation too
        return devices

    def _decode_register(self, raw: str) -> list[DeviceInfo]:
        known = self._registered.get(raw)
        if known is None:
            if len(self._registered) >= _REGISTER_MEMO_SIZE:
                self._registered.clear()  # registrations rarely change: a full memo is stale, not hot
            try:
                known = decode_node_register(raw, decode_legacy=False)  # v2.10 reads JSON only
            except CodecError as exc:
                known = exc
            self._registered[raw] = known
        if isinstance(known, CodecError):
            raise CodecError(str(known))
        return list(known)  # DeviceInfo is frozen; the list is the caller's own

    def owns(self, device: DeviceUsage) -> bool:
        return "nvidia" in device.type.lower()

    # --- fit -----------------------------------------------------------------------------------
    def fit(
        self, devices: Sequence[DeviceUsage], request: ContainerDeviceRequest, ctx: FitContext
    ) -> FitResult:
        """HAMi's Fit: scan from the last device; the first failing check is the device's reason."""
        annotations = ctx.annotations
        wanted = request.nums
        remaining = wanted
        prev_numa: int | None = None
        numa_bind = numa_bind_requested(annotations)
        mutex = _policy_contains(ctx.gpu_policy, "mutex")
        cordoned = cordoned_devices(ctx.node)
        mode = annotations.get(ann.VGPU_MODE)
        topology = _policy_contains(ctx.gpu_policy, "topology-aware")
        cores = min(request.coresreq, 100)
        chosen: list[ContainerDevice] = []
        counts: dict[str, int] = {}

        def miss(reason: str) -> None:
            counts[reason] = counts.get(reason, 0) + 1

        by_type = bool(
            annotations.get(ann.USE_GPU_TYPE, "").strip() or annotations.get(ann.NOUSE_GPU_TYPE, "").strip()
        )
        by_uuid = bool(
            annotations.get(ann.USE_GPU_UUID, "").strip() or annotations.get(ann.NOUSE_GPU_UUID, "").strip()
        )
        for dev in reversed(devices):
            if not dev.health:
                miss(r.CARD_NOT_HEALTH)
                continue
            if dev.id in cordoned:
                miss(r.CARD_CORDONED)
                continue
            if (by_type and not type_allowed(annotations, dev.type)) or (
                mode is not None and dev.mode not in mode
            ):
                miss(r.CARD_TYPE_MISMATCH)
                continue
            if numa_bind and prev_numa != dev.numa:
                if remaining != wanted:
                    counts[r.NUMA_NOT_FIT] = counts.get(r.NUMA_NOT_FIT, 0) + len(chosen)
                remaining = wanted
                prev_numa = dev.numa
                chosen = []
            if by_uuid and not uuid_allowed(annotations, dev.id):
                miss(r.CARD_UUID_MISMATCH)
                continue
            if dev.count <= dev.used:
                miss(r.CARD_TIME_SLICING_EXHAUSTED)
                continue
            if mutex and dev.used > 0:
                miss(r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT)
                continue
            memreq = request.memory_on(dev.totalmem)
            if ctx.quota_fits is not None and not self._quota_fits(ctx, chosen, dev.id, memreq, cores):
                miss(r.RESOURCE_QUOTA_NOT_FIT)
                continue
            if dev.totalmem - dev.usedmem < memreq:
                miss(r.CARD_INSUFFICIENT_MEMORY)
                continue
            if dev.totalcore - dev.usedcores < cores:
                miss(r.CARD_INSUFFICIENT_CORE)
                continue
            if dev.totalcore == 100 and cores == 100 and dev.used > 0:
                miss(r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT)
                continue
            if dev.totalcore != 0 and dev.usedcores == dev.totalcore and cores == 0:
                miss(r.CARD_COMPUTE_UNITS_EXHAUSTED)
                continue
            if remaining > 0:
                if not topology:  # topology-aware collects every fitting card, then chooses
                    remaining -= 1
                chosen.append(ContainerDevice(uuid=dev.id, type=NVIDIA, usedmem=memreq, usedcores=cores))
            if remaining == 0 and not topology:
                return FitResult(True, chosen)
        if topology and len(chosen) >= wanted:
            if len(chosen) > wanted:
                scores = pair_scores(ctx.node)
                chosen = (
                    _worst_single(chosen, scores)
                    if wanted == 1
                    else _best_combination(chosen, wanted, scores)
                )
            return FitResult(True, chosen)
        if chosen:
            counts[r.ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = len(chosen)
        return FitResult(False, chosen, r.gen_reason(counts, len(devices)))

    def _quota_fits(
        self, ctx: FitContext, chosen: list[ContainerDevice], uuid: str, memreq: int, cores: int
    ) -> bool:
        """fitQuota: the whole pod so far plus this card, collapsed as the scheduler will account it."""
        hypothetical = [*ctx.allocated, [*chosen, ContainerDevice(uuid, NVIDIA, memreq, cores)]]
        holds = collapse_usage(hypothetical, ctx.num_init)
        assert ctx.quota_fits is not None
        return ctx.quota_fits(sum(h.usedmem for h in holds), sum(h.usedcores for h in holds))


def pair_scores(node: dict[str, Any] | None) -> dict[str, dict[str, int]]:
    """`hami.io/node-nvidia-score`: per GPU UUID, its link score to every other GPU (empty if absent)."""
    raw = (((node or {}).get("metadata") or {}).get("annotations") or {}).get(ann.NODE_SCORE)
    if raw is None:
        return {}
    try:
        entries = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CodecError(f"node score annotation is not valid JSON: {exc.msg}") from exc
    if entries is None:
        return {}
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise CodecError("node score annotation must be a JSON array of objects")
    table: dict[str, dict[str, int]] = {}
    for entry in entries:
        scores = entry.get("score") or {}
        if not isinstance(scores, dict) or not all(type(v) is int for v in scores.values()):
            raise CodecError("node score entries must map UUIDs to integers")
        table.setdefault(str(entry.get("uuid", "")), scores)
    return table


def _worst_single(cards: list[ContainerDevice], scores: dict[str, dict[str, int]]) -> list[ContainerDevice]:
    """computeWorstSingleCard: the card least connected to the other candidates (first one on ties)."""
    best: ContainerDevice | None = None
    best_total = 0
    for card in cards:
        links = scores.get(card.uuid, {})
        total = sum(links.get(other.uuid, 0) for other in cards if other.uuid != card.uuid)
        if best is None or total < best_total:
            best, best_total = card, total
    assert best is not None
    return [best]


def _best_combination(
    cards: list[ContainerDevice], wanted: int, scores: dict[str, dict[str, int]]
) -> list[ContainerDevice]:
    """computeBestCombination: the N cards with the highest summed pair scores (first combination on ties)."""
    best: tuple[ContainerDevice, ...] = ()
    best_total = -1
    for combo in itertools.combinations(cards, wanted):
        total = sum(
            scores.get(a.uuid, {}).get(b.uuid, 0) for i, a in enumerate(combo) for b in combo[i + 1 :]
        )
        if not best or total > best_total:
            best, best_total = combo, total
    return list(best)


def _go_value(raw: Any) -> int:
    """Go's Quantity.Value (rounded up); a malformed quantity counts as 0 like an unparsable field."""
    try:
        return ceil_value(raw)
    except QuantityError:
        return 0


def _append_env(container: dict[str, Any], name: str, value: str) -> None:
    container.setdefault("env", []).append({"name": name, "value": value})


__all__ = ["NVIDIA", "CodecError", "NvidiaGPUs", "cordoned_devices", "type_allowed", "uuid_allowed"]
