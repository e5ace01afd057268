"""The seam between the scheduler's orchestration and one device vendor (HAMi's `Devices` interface)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tenantgpu.gpushare.device import ContainerDevice, DeviceInfo, DeviceUsage
from tenantgpu.gpushare.request import ContainerDeviceRequest

QuotaCheck = Callable[[int, int], bool]
"""Would the pod's namespace stay within quota with this much (memory MiB, cores) in total for the pod?"""


class AdmissionDenied(Exception):
    """The webhook refuses the pod; the message is HAMi's text."""


@dataclass(frozen=True)
class FitContext:
    """What a vendor's Fit may look at besides the devices: the pod, the node, the policy, the quota."""

    pod: dict[str, Any]
    annotations: dict[str, str]
    node: dict[str, Any] | None
    gpu_policy: str
    num_init: int
    quota_fits: QuotaCheck | None = None
    # The pod's earlier containers' allocations of this vendor (for the quota's per-pod total).
    allocated: Sequence[Sequence[ContainerDevice]] = field(default=())


@dataclass(frozen=True)
class FitResult:
    ok: bool
    devices: list[ContainerDevice]
    reason: str = ""


class DeviceVendor(Protocol):
    """Everything vendor-specific: requests, admission, registry, fit, annotations."""

    name: str  # the request type and the key devices are filed under ("NVIDIA")
    memory_resource: str
    core_resource: str
    allocated_annotation: str
    to_allocate_annotation: str

    def container_request(self, container: dict[str, Any]) -> ContainerDeviceRequest | None: ...

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """Apply the webhook's defaults in place; True if the container uses this vendor; may raise."""
        ...

    def node_devices(self, node: dict[str, Any]) -> list[DeviceInfo] | None:
        """The node's registered devices, None when the node carries no registration of this vendor."""
        ...

    def owns(self, device: DeviceUsage) -> bool:
        """Is this device one of the vendor's (HAMi's getNodeResources type match)?"""
        ...

    def fit(
        self, devices: Sequence[DeviceUsage], request: ContainerDeviceRequest, ctx: FitContext
    ) -> FitResult:
        """Pick devices for one container; `devices` are sorted by GPU policy and scanned from the end."""
        ...
