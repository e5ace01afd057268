"""What a placed pod holds on each GPU: HAMi's CollapseInitContainerUsage (init peak vs app sum)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tenantgpu.gpushare.device import ContainerDevice


@dataclass(frozen=True)
class DeviceHold:
    """A pod's effective hold on one GPU: slots (at least 1), memory MiB, cores."""

    uuid: str
    slots: int
    usedmem: int
    usedcores: int


def collapse_usage(segments: Sequence[Sequence[ContainerDevice]], num_init: int) -> list[DeviceHold]:
    """Per GPU: max(peak over init segments, sum over app segments); segments before `num_init` count as init.

    The classification uses the segment index, as HAMi does, even when the annotation has no segments
    for GPU-less containers (see the "Container segments" correction in hami.md).
    """
    init_peak: dict[str, list[int]] = {}
    app_sum: dict[str, list[int]] = {}
    for position, container in enumerate(segments):
        for dev in container:
            if position < num_init:
                cur = init_peak.setdefault(dev.uuid, [0, 0, 0])
                cur[0] = 1
                cur[1] = max(cur[1], dev.usedmem)
                cur[2] = max(cur[2], dev.usedcores)
            else:
                cur = app_sum.setdefault(dev.uuid, [0, 0, 0])
                cur[0] += 1
                cur[1] += dev.usedmem
                cur[2] += dev.usedcores
    holds = []
    for uuid in sorted(set(init_peak) | set(app_sum)):
        i = init_peak.get(uuid, [0, 0, 0])
        a = app_sum.get(uuid, [0, 0, 0])
        holds.append(DeviceHold(uuid, max(i[0], a[0], 1), max(i[1], a[1]), max(i[2], a[2])))
    return holds
