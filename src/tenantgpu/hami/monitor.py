"""HAMi's vGPU monitor (`vGPUmonitor`, the device plugin pod's `vgpu-monitor` container, `:9394/metrics`,
the chart's Service `hami-device-plugin-monitor` on 31992).

Facts from HAMi v2.10.0 (`cmd/vGPUmonitor/metrics.go`, `main.go`):
- per GPU of the node, read from NVML: `hami_host_gpu_memory_used_bytes` and `hami_host_gpu_utilization_ratio`
  (labels node, device_index, device_uuid, device_type) and `hami_host_gpu_memory_controller_utilization_ratio`
  (the same without node); `device_type` is `NVIDIA-` before NVML's name (`NVIDIA-NVIDIA L4`);
- per device of each container with a HAMi-core shared region, of the pods labelled
  `hami.io/vgpu-node=<node>`: `hami_vgpu_memory_used_bytes`, `hami_vgpu_memory_limit_bytes`,
  `hami_container_device_memory_bytes`, `hami_container_device_utilization_ratio` and the region's context,
  module and buffer sizes (`hami_vgpu_memory_{context,module,buffer}_bytes`), labels namespace, pod,
  container, vdevice_index, device_uuid; `hami_container_last_kernel_elapsed_seconds` only once a kernel ran;
- the collector is registered with the constant label `zone="vGPU"`; the legacy names come only with
  `--legacy-metrics` (off in the chart).

The simulation's containers launch no kernels: utilisation is 0, no last-kernel metric is written, and
the memory in use is what the container's simulated programs hold (what its `nvidia-smi` shows).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from tenantgpu.hami.metrics import ZONE, zone_gauge

_HOST = ["node", "device_index", "device_uuid", "device_type"]
_CONTAINER = ["namespace", "pod", "container", "vdevice_index", "device_uuid"]


@dataclass(frozen=True)
class HostGPU:
    """One GPU of the node as NVML reports it."""

    index: int
    uuid: str
    name: str  # NVML's name, e.g. `NVIDIA L4`


@dataclass(frozen=True)
class ContainerDevice:
    """One device in a container's HAMi-core shared region."""

    namespace: str
    pod: str
    container: str
    vdevice_index: int
    uuid: str
    limit_bytes: int
    used_bytes: int = 0


class VGPUMonitorCollector(Collector):
    """Collects on scrape what the node's GPUs and its containers' shared regions hold."""

    def __init__(
        self,
        node: str,
        host_gpus: Callable[[], list[HostGPU]],
        containers: Callable[[], list[ContainerDevice]],
    ) -> None:
        self.node = node
        self.host_gpus = host_gpus
        self.containers = containers

    def collect(self) -> Iterator[GaugeMetricFamily]:
        host_memory = zone_gauge("hami_host_gpu_memory_used_bytes", "GPU device memory usage in bytes", _HOST)
        host_util = zone_gauge("hami_host_gpu_utilization_ratio", "GPU core utilization ratio (0-100)", _HOST)
        host_memory_util = zone_gauge(
            "hami_host_gpu_memory_controller_utilization_ratio",
            "GPU memory controller utilization ratio (0-100)",
            _HOST[1:],
        )
        devices = self.containers()
        # what NVML counts in use on a card: what its containers' programs hold
        used: dict[str, int] = defaultdict(int)
        for device in devices:
            used[device.uuid] += device.used_bytes
        for gpu in self.host_gpus():
            device_labels = [str(gpu.index), gpu.uuid, f"NVIDIA-{gpu.name}"]
            host_memory.add_metric([self.node, *device_labels, ZONE], float(used[gpu.uuid]))
            host_util.add_metric([self.node, *device_labels, ZONE], 0.0)
            host_memory_util.add_metric([*device_labels, ZONE], 0.0)
        yield from (host_memory, host_util, host_memory_util)

        used = zone_gauge("hami_vgpu_memory_used_bytes", "vGPU device memory usage in bytes", _CONTAINER)
        limit = zone_gauge("hami_vgpu_memory_limit_bytes", "vGPU device memory limit in bytes", _CONTAINER)
        memory = zone_gauge(
            "hami_container_device_memory_bytes", "Container device memory usage in bytes", _CONTAINER
        )
        util = zone_gauge(
            "hami_container_device_utilization_ratio", "Container device SM utilization ratio", _CONTAINER
        )
        context = zone_gauge(
            "hami_vgpu_memory_context_bytes", "Container device memory context size in bytes", _CONTAINER
        )
        module = zone_gauge(
            "hami_vgpu_memory_module_bytes", "Container device memory module size in bytes", _CONTAINER
        )
        buffer = zone_gauge(
            "hami_vgpu_memory_buffer_bytes", "Container device memory buffer size in bytes", _CONTAINER
        )
        for device in devices:
            labels = [
                device.namespace,
                device.pod,
                device.container,
                str(device.vdevice_index),
                device.uuid,
                ZONE,
            ]
            used.add_metric(labels, float(device.used_bytes))
            limit.add_metric(labels, float(device.limit_bytes))
            memory.add_metric(labels, float(device.used_bytes))
            util.add_metric(labels, 0.0)
            # what the simulated programs hold is counted as buffers: no contexts or modules are loaded
            context.add_metric(labels, 0.0)
            module.add_metric(labels, 0.0)
            buffer.add_metric(labels, float(device.used_bytes))
        yield from (used, limit, memory, util, context, module, buffer)


def monitor_registry(
    node: str, host_gpus: Callable[[], list[HostGPU]], containers: Callable[[], list[ContainerDevice]]
) -> CollectorRegistry:
    """A registry of its own per node (a process runs many workers)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(VGPUMonitorCollector(node, host_gpus, containers))
    return registry
