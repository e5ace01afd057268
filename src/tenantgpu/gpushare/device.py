"""A registered GPU (DeviceInfo), one container's share of a GPU (ContainerDevice), and a GPU's usage."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DeviceInfo:
    """One GPU as the device plugin registers it in `hami.io/node-nvidia-register`."""

    id: str
    index: int = 0
    count: int = 10
    devmem: int = 0
    devcore: int = 100
    type: str = ""
    numa: int = 0
    mode: str = "hami-core"
    health: bool = True


@dataclass(frozen=True)
class ContainerDevice:
    """One GPU given to one container: `UUID,NVIDIA,<mem MiB>,<cores>` in the pod annotation."""

    uuid: str
    type: str = "NVIDIA"
    usedmem: int = 0
    usedcores: int = 0


@dataclass(slots=True)
class DeviceUsage:
    """The scheduler's working view of one GPU: its registration plus what placed pods hold on it."""

    id: str
    index: int
    count: int
    totalmem: int
    totalcore: int
    type: str
    numa: int
    mode: str
    health: bool
    used: int = 0
    usedmem: int = 0
    usedcores: int = 0

    @classmethod
    def of(cls, info: DeviceInfo) -> DeviceUsage:
        return cls(
            id=info.id,
            index=info.index,
            count=info.count,
            totalmem=info.devmem,
            totalcore=info.devcore,
            type=info.type,
            numa=info.numa,
            mode=info.mode,
            health=info.health,
        )

    def copy(self) -> DeviceUsage:
        return DeviceUsage(
            self.id, self.index, self.count, self.totalmem, self.totalcore, self.type, self.numa, self.mode,
            self.health, self.used, self.usedmem, self.usedcores,
        )  # fmt: skip


@dataclass(frozen=True)
class DeviceUsageView:
    """What `ClusterState.node_usage` reports per GPU (the shape of HAMi's node metrics)."""

    uuid: str
    type: str
    index: int
    numa: int
    health: bool
    used: int
    count: int
    usedmem: int
    totalmem: int
    usedcores: int
    totalcore: int
    pods: tuple[str, ...] = field(default=())
