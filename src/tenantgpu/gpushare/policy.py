"""Device and node scores and the GPU sort orders (`pkg/scheduler/policy/*.go`), per-pod policies."""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tenantgpu.goquote import go_quote
from tenantgpu.gpushare import annotations as ann
from tenantgpu.gpushare.config import SharingConfig
from tenantgpu.gpushare.device import DeviceUsage
from tenantgpu.gpushare.request import PERCENTAGE_UNSET, ContainerDeviceRequest

WEIGHT = 10  # HAMi's util.Weight

_FLOAT32 = struct.Struct("<f")


def float32(x: float) -> float:
    """`x` rounded to IEEE single precision, as Go's float32 holds it.

    HAMi computes device and node scores in float32, so sums that are equal in float32 but not in
    float64 (0.1 + 0.2 vs 0.3) tie there; each operation is rounded separately, as Go does on amd64.
    """
    return _FLOAT32.unpack(_FLOAT32.pack(x))[0]


def _ratio(part: int, whole: int) -> float:
    return float32(float32(part) / float32(whole))


@dataclass(frozen=True)
class ScoringWeights:
    """`hami.io/device-scoring-weights`: slot, core and memory weights of the device score."""

    slot: int = 1
    core: int = 1
    memory: int = 1


class PolicyError(ValueError):
    """A pod annotation HAMi refuses (the filter fails with this message)."""


_GO_INT64 = re.compile(r"[+-]?[0-9]+")


def parse_scoring_weights(value: str) -> ScoringWeights:
    """`slot=<int>,core=<int>,memory=<int>`: all three, non-negative, one positive at least."""
    bad = f"invalid {ann.DEVICE_SCORING_WEIGHTS} annotation {go_quote(value)}"
    parts = value.split(",")
    if len(parts) != 3:
        raise PolicyError(f"{bad}: expected slot, core, and memory weights")
    found: dict[str, int] = {}
    for part in parts:
        pair = part.strip().split("=", 1)
        if len(pair) != 2:
            raise PolicyError(f"{bad}: expected key=value entries")
        name = pair[0].strip()
        if name in found:
            raise PolicyError(f"{bad}: duplicate {go_quote(name)} weight")
        text = pair[1].strip()
        if not _GO_INT64.fullmatch(text) or not -(2**63) <= int(text) < 2**63:
            raise PolicyError(f"{bad}: {go_quote(name)} weight must be an integer")
        weight = int(text)
        if weight < 0:
            raise PolicyError(f"{bad}: {go_quote(name)} weight must not be negative")
        if name not in ("slot", "core", "memory"):
            raise PolicyError(f"{bad}: unknown weight {go_quote(name)}")
        found[name] = weight
    if not any(found.values()):
        raise PolicyError(f"{bad}: at least one weight must be positive")
    return ScoringWeights(found["slot"], found["core"], found["memory"])


def pod_annotations(pod: dict[str, Any]) -> dict[str, str]:
    return (pod.get("metadata") or {}).get("annotations") or {}


def scoring_weights_of(pod: dict[str, Any]) -> ScoringWeights:
    value = pod_annotations(pod).get(ann.DEVICE_SCORING_WEIGHTS)
    return ScoringWeights() if value is None else parse_scoring_weights(value)


def node_policy_of(pod: dict[str, Any], cfg: SharingConfig) -> str:
    """The pod's `hami.io/node-scheduler-policy` verbatim, else the configured one; only "spread" spreads."""
    return pod_annotations(pod).get(ann.NODE_SCHEDULER_POLICY, cfg.node_policy)


def gpu_policy_of(pod: dict[str, Any], cfg: SharingConfig) -> str:
    return pod_annotations(pod).get(ann.GPU_SCHEDULER_POLICY, cfg.gpu_policy)


def device_score(dev: DeviceUsage, request: ContainerDeviceRequest | None, weights: ScoringWeights) -> float:
    """ComputeScore: 10 * weighted (slots, cores, memory) fullness in float32; the request counts only
    on an exact type match.

    HAMi's request type is "NVIDIA" and registered types are model names, so in a real cluster the
    request never counts and the score is the card's fullness before the container. Where it counts,
    a percentage request takes precedence over gpumem here (unlike in Fit).
    """
    if dev.count == 0 or dev.totalcore == 0 or dev.totalmem == 0:
        return 0.0
    slots, cores, mem = dev.used, dev.usedcores, dev.usedmem
    if request is not None and request.type == dev.type:
        slots += 1
        cores += request.coresreq
        pct = request.mem_percentage
        mem += dev.totalmem * pct // 100 if pct not in (0, PERCENTAGE_UNSET) else request.memreq
    return _weighted_score(
        slots, dev.count, cores, dev.totalcore, mem, dev.totalmem, weights.slot, weights.core, weights.memory
    )


@functools.lru_cache(maxsize=65536)
def _weighted_score(
    slots: int, count: int, cores: int, totalcore: int, mem: int, totalmem: int, ws: int, wc: int, wm: int
) -> float:
    """The float32 arithmetic of ComputeScore; cached, since clusters repeat the same card states."""
    total = float32(
        float32(float32(ws * _ratio(slots, count)) + float32(wc * _ratio(cores, totalcore)))
        + float32(wm * _ratio(mem, totalmem))
    )
    return float32(WEIGHT * total)


def sort_devices(
    devices: Sequence[DeviceUsage], scores: Sequence[float], policy: str, numa_bind: bool
) -> list[int]:
    """Positions of `devices` in HAMi's sorted order; Fit scans the result from its end.

    HAMi sorts with Go's sort.Sort, which for lists of up to 12 elements is an insertion sort and so
    keeps devices its comparator calls equal in their current order (registration order for the
    first container, the previous container's sorted order after that): the last of equals is tried
    first. We keep that stable order for longer lists too (Go's pdqsort is not stable there).
    Chained policies end in HAMi's own Index tie-break.
    """
    order = range(len(devices))
    if "," in policy or policy == "numa":
        return sorted(order, key=lambda i: _chain_key(devices[i], scores[i], policy, numa_bind))
    if policy == "mutex":
        return sorted(order, key=lambda i: (-devices[i].used, devices[i].numa))
    binpack = policy == "binpack"
    sign = 1 if binpack else -1
    if numa_bind:
        numa_sign = -1 if binpack else 1
        return sorted(order, key=lambda i: (numa_sign * devices[i].numa, sign * scores[i]))
    return sorted(order, key=lambda i: (sign * scores[i], devices[i].numa))


def _chain_key(dev: DeviceUsage, score: float, policy: str, numa_bind: bool) -> tuple[float, ...]:
    chain: list[str] = []
    for part in policy.split(","):
        name = part.strip()
        if name in ("binpack", "spread", "numa") and name not in chain:
            chain.append(name)
    if not chain:
        chain = ["spread"]
    if numa_bind and chain[0] != "numa":
        chain = ["numa", *[c for c in chain if c != "numa"]]
    key: list[float] = []
    for name in chain:
        if name == "binpack":
            key.append(score)
        elif name == "spread":
            key.append(-score)
        else:
            key.append(dev.numa)
    key.append(dev.index)
    return tuple(key)


def node_score(devices: Sequence[DeviceUsage]) -> float:
    """ComputeDefaultScore: 10 * (used/count + usedcores/totalcore + usedmem/totalmem), node sums."""
    return node_score_of_sums(
        sum(d.used for d in devices),
        sum(d.count for d in devices),
        sum(d.usedcores for d in devices),
        sum(d.totalcore for d in devices),
        sum(d.usedmem for d in devices),
        sum(d.totalmem for d in devices),
    )


@functools.lru_cache(maxsize=65536)
def node_score_of_sums(
    used: int, count: int, used_core: int, total_core: int, used_mem: int, total_mem: int
) -> float:
    """The node score from the node's sums, in float32 as HAMi computes it; 0 when a total is 0."""
    if count == 0 or total_core == 0 or total_mem == 0:
        return 0.0
    total = float32(
        float32(_ratio(used, count) + _ratio(used_core, total_core)) + _ratio(used_mem, total_mem)
    )
    return float32(WEIGHT * total)


def spreads(node_policy: str) -> bool:
    """Only the exact string "spread" picks the least-used node; anything else is binpack (HAMi's Less)."""
    return node_policy == "spread"
