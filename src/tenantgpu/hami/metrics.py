"""HAMi scheduler metrics (`hami_gpu_*`, `hami_vgpu_*`, `hami_node_*`) from the scheduler's state."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from tenantgpu.gpushare import ClusterState, decode_pod_devices
from tenantgpu.gpushare import annotations as ann

_MIB = 1024 * 1024
_DEV = ["node", "device_uuid", "device_index", "device_type"]
ZONE = "vGPU"  # HAMi wraps its collector with the constant label zone="vGPU"


def zone_gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    """A gauge of HAMi's collectors, whose registerer adds the constant label `zone`."""
    return GaugeMetricFamily(name, doc, labels=[*labels, "zone"])


def _core_ratio(total: int, allocated: int) -> tuple[float, float]:
    if total <= 0:
        return 0.0, 0.0
    return 100.0, float(math.ceil(allocated / total * 100))


class SchedulerCollector(Collector):
    """Collects on scrape from a ClusterState and the pods the scheduler has placed."""

    def __init__(
        self,
        state: Callable[[], ClusterState],
        placed_pods: Callable[[], list[dict]],
        quota_objects: Callable[[], list[dict]] | None = None,
    ) -> None:
        self._state = state
        self.placed_pods = placed_pods
        self.quota_objects = quota_objects or list

    @property
    def state(self) -> ClusterState:
        return self._state()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        mem_limit = zone_gauge("hami_gpu_memory_limit_bytes", "Device memory limit for a certain GPU", _DEV)
        core_limit = zone_gauge("hami_gpu_core_limit_ratio", "Device core limit for a certain GPU", _DEV)
        mem_alloc = zone_gauge(
            "hami_gpu_memory_allocated_bytes",
            "Device memory allocated for a certain GPU",
            ["node", "device_uuid", "device_index", "device_cores", "device_type"],
        )
        shared = zone_gauge("hami_gpu_shared_count", "Number of containers sharing this GPU", _DEV)
        core_alloc = zone_gauge(
            "hami_gpu_core_allocated_ratio", "Device core allocated for a certain GPU", _DEV
        )
        overview = zone_gauge(
            "hami_node_gpu_overview",
            "GPU overview on a certain node",
            ["node", "device_uuid", "device_index", "device_cores", "device_memory_limit", "device_type"],
        )
        mem_ratio = zone_gauge(
            "hami_node_gpu_memory_allocated_ratio",
            "GPU Memory Allocated Percentage on a certain GPU",
            ["node", "device_uuid", "device_index"],
        )
        totals: dict[str, int] = {}
        for node in self.state.node_names:
            for d in self.state.node_usage(node):
                totals[d.uuid] = d.totalcore
                idx = str(d.index)
                limit, allocated = _core_ratio(d.totalcore, d.usedcores)
                mem_limit.add_metric([node, d.uuid, idx, d.type, ZONE], d.totalmem * _MIB)
                core_limit.add_metric([node, d.uuid, idx, d.type, ZONE], limit)
                mem_alloc.add_metric([node, d.uuid, idx, str(d.totalcore), d.type, ZONE], d.usedmem * _MIB)
                shared.add_metric([node, d.uuid, idx, d.type, ZONE], d.used)
                core_alloc.add_metric([node, d.uuid, idx, d.type, ZONE], allocated)
                overview.add_metric(
                    [node, d.uuid, idx, str(d.totalcore), str(d.totalmem), d.type, ZONE], d.usedmem * _MIB
                )
                if d.totalmem > 0:
                    mem_ratio.add_metric([node, d.uuid, idx, ZONE], d.usedmem / d.totalmem)
        ctr = ["namespace", "node", "pod", "container_index", "device_uuid"]
        vmem = zone_gauge("hami_vgpu_memory_allocated_bytes", "vGPU memory allocated from a container", ctr)
        vcore = zone_gauge("hami_vgpu_core_allocated_ratio", "vGPU core allocated from a container", ctr)
        for pod in self.placed_pods():
            meta = pod.get("metadata") or {}
            a = meta.get("annotations") or {}
            try:
                segments = decode_pod_devices(a.get(ann.DEVICES_ALLOCATED) or "")
            except ValueError:
                continue
            for i, devices in enumerate(segments):
                for dev in devices:
                    labels = [
                        meta.get("namespace", ""),
                        a.get(ann.VGPU_NODE, ""),
                        meta.get("name", ""),
                        str(i),
                    ]
                    _, core = _core_ratio(totals.get(dev.uuid, 100), dev.usedcores)
                    vmem.add_metric([*labels, dev.uuid, ZONE], dev.usedmem * _MIB)
                    vcore.add_metric([*labels, dev.uuid, ZONE], core)
        quota_used = zone_gauge(
            "hami_resource_quota_used",
            "resourcequota usage for a certain device",
            ["namespace", "quota_name", "limit"],
        )
        seen: set[tuple[str, str]] = set()
        for quota in self.quota_objects():
            namespace = (quota.get("metadata") or {}).get("namespace", "")
            for key in (quota.get("spec") or {}).get("hard") or {}:
                resource = key.removeprefix("limits.")
                limit = self.state.quotas.limit(namespace, resource) if key.startswith("limits.") else None
                if limit is None or (namespace, resource) in seen:
                    continue
                seen.add((namespace, resource))  # HAMi keys quotas by resource name per namespace
                used = self.state.quotas.used(namespace, resource)
                quota_used.add_metric([namespace, resource, str(limit), ZONE], used)
        yield from (
            mem_limit,
            core_limit,
            mem_alloc,
            shared,
            core_alloc,
            overview,
            mem_ratio,
            vmem,
            vcore,
            quota_used,
        )


def scheduler_registry(
    state: Callable[[], ClusterState],
    placed_pods: Callable[[], list[dict]],
    quota_objects: Callable[[], list[dict]] | None = None,
) -> CollectorRegistry:
    """A registry of its own per scheduler instance (many tenants share one process)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SchedulerCollector(state, placed_pods, quota_objects))
    return registry
