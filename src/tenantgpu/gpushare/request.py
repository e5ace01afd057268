"""What a container asks of a device vendor (HAMi's ContainerDeviceRequest), read from its resources."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tenantgpu.gpushare.quantity import QuantityError, as_int64

PERCENTAGE_UNSET = 101  # HAMi's sentinel for "no gpumem-percentage"


@dataclass(frozen=True)
class ContainerDeviceRequest:
    """One container's device request: `nums` cards, each with `memreq` MiB (or a percentage) and cores."""

    nums: int
    type: str = "NVIDIA"
    memreq: int = 0
    mem_percentage: int = PERCENTAGE_UNSET
    coresreq: int = 0

    def memory_on(self, totalmem: int) -> int:
        """The MiB this request takes on a card of `totalmem` MiB (percentages by integer division)."""
        if self.memreq > 0:
            return self.memreq
        if self.mem_percentage != PERCENTAGE_UNSET:
            return totalmem * self.mem_percentage // 100
        return 0


def resource_value(container: dict[str, Any], name: str) -> Any | None:
    """`limits[name]`, else `requests[name]`, else None: HAMi reads limits before requests."""
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        values = resources.get(section) or {}
        if name in values:
            return values[name]
    return None


def resource_int(container: dict[str, Any], name: str) -> int | None:
    """The whole-number value of a resource (Go's AsInt64), None when absent or not a whole number."""
    value = resource_value(container, name)
    if value is None:
        return None
    try:
        return as_int64(value)
    except QuantityError:
        return None


def pod_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """Init containers then app containers: the order of HAMi's requests and of its annotations."""
    spec = pod.get("spec") or {}
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def init_container_count(pod: dict[str, Any]) -> int:
    return len((pod.get("spec") or {}).get("initContainers") or [])
