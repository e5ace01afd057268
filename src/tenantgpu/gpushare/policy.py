"""Device and node scores and the GPU sort orders (`pkg/scheduler/policy/*.go`), per-pod policies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tenantgpu.gpushare import annotations as ann
from tenantgpu.gpushare.config import SharingConfig
from tenantgpu.gpushare.device import DeviceUsage
from tenantgpu.gpushare.request import ContainerDeviceRequest

WEIGHT = 10  # HAMi's util.Weight


@dataclass(frozen=True)
class ScoringWeights:
    """`hami.io/device-scoring-weights`: slot, core and memory weights of the device score."""

    slot: int = 1
    core: int = 1
    memory: int = 1


class PolicyError(ValueError):
    """A pod annotation HAMi refuses (the filter fails with this message)."""


def parse_scoring_weights(value: str) -> ScoringWeights:
    """`slot=<int>,core=<int>,memory=<int>`: all three, non-negative, one positive at least."""
    key = ann.DEVICE_SCORING_WEIGHTS
    parts = value.split(",")
    if len(parts) != 3:
        raise PolicyError(f'invalid {key} annotation "{value}": expected slot, core, and memory weights')
    found: dict[str, int] = {}
    for part in parts:
        pair = part.strip().split("=", 1)
        if len(pair) != 2:
            raise PolicyError(f'invalid {key} annotation "{value}": expected key=value entries')
        name = pair[0].strip()
        if name in found:
            raise PolicyError(f'invalid {key} annotation "{value}": duplicate "{name}" weight')
        try:
            weight = int(pair[1].strip(), 10)
        except ValueError:
            raise PolicyError(
                f'invalid {key} annotation "{value}": "{name}" weight must be an integer'
            ) from None
        if weight < 0:
            raise PolicyError(f'invalid {key} annotation "{value}": "{name}" weight must not be negative')
        if name not in ("slot", "core", "memory"):
            raise PolicyError(f'invalid {key} annotation "{value}": unknown weight "{name}"')
        found[name] = weight
    if not any(found.values()):
        raise PolicyError(f'invalid {key} annotation "{value}": at least one weight must be positive')
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
    """ComputeScore: 10 * weighted (slots, cores, memory) fullness; the request counts on exact type match.

    HAMi's request type is "NVIDIA" and registered types are model names, so in a real cluster the
    request never counts and the score is the card's fullness before the container.
    """
    if dev.count == 0 or dev.totalcore == 0 or dev.totalmem == 0:
        return 0.0
    slots, cores, mem = dev.used, dev.usedcores, dev.usedmem
    if request is not None and request.type == dev.type:
        slots += 1
        cores += request.coresreq
        mem += request.memory_on(dev.totalmem)
    return WEIGHT * (
        weights.slot * slots / dev.count
        + weights.core * cores / dev.totalcore
        + weights.memory * mem / dev.totalmem
    )


def sort_devices(
    devices: Sequence[DeviceUsage], scores: Sequence[float], policy: str, numa_bind: bool
) -> list[int]:
    """Positions of `devices` in HAMi's sorted order; Fit scans the result from its end.

    Where HAMi's single-policy comparators leave ties (sort.Sort is not stable), the device with the
    lowest index sorts last, so it is tried first. Chained policies end in HAMi's own Index tie-break.
    """
    order = range(len(devices))
    if "," in policy or policy == "numa":
        return sorted(order, key=lambda i: _chain_key(devices[i], scores[i], policy, numa_bind))
    if policy == "mutex":
        return sorted(order, key=lambda i: (-devices[i].used, devices[i].numa, -devices[i].index))
    binpack = policy == "binpack"
    sign = 1 if binpack else -1
    if numa_bind:
        numa_sign = -1 if binpack else 1
        return sorted(order, key=lambda i: (numa_sign * devices[i].numa, sign * scores[i], -devices[i].index))
    return sorted(order, key=lambda i: (sign * scores[i], devices[i].numa, -devices[i].index))


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
    total = sum(d.count for d in devices)
    total_core = sum(d.totalcore for d in devices)
    total_mem = sum(d.totalmem for d in devices)
    if total == 0 or total_core == 0 or total_mem == 0:
        return 0.0
    used = sum(d.used for d in devices)
    used_core = sum(d.usedcores for d in devices)
    used_mem = sum(d.usedmem for d in devices)
    return WEIGHT * (used / total + used_core / total_core + used_mem / total_mem)


def spreads(node_policy: str) -> bool:
    """Only the exact string "spread" picks the least-used node; anything else is binpack (HAMi's Less)."""
    return node_policy == "spread"
