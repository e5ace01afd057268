"""The device plugin pod's vGPU monitor on a worker: HAMi's `vGPUmonitor` metrics (`hami/monitor.py`) from
what the kubelet ran, served on `host:port/metrics` (the container's 9394)."""

from __future__ import annotations

from tenantgpu.gpushare import annotations as ann
from tenantgpu.hami.device_plugin import DevicePlugin, GPUSpec
from tenantgpu.hami.metricsendpoint import MetricsEndpoint
from tenantgpu.hami.monitor import ContainerDevice, HostGPU, monitor_registry
from tenantgpu.node import gpu_runtime
from tenantgpu.node.kubelet import Kubelet

_MIB = 1024 * 1024


class VGPUMonitor:
    """What the monitor reads from the node: its GPUs (NVML) and its containers' shared regions."""

    def __init__(self, node: str, gpus: list[GPUSpec], device_plugin: DevicePlugin, kubelet: Kubelet) -> None:
        self.node = node
        self.models = [spec.model for spec in gpus for _ in range(spec.count)]
        self.device_plugin = device_plugin
        self.kubelet = kubelet
        self.registry = monitor_registry(node, self.host_gpus, self.container_devices)
        self.port: int | None = None
        self._endpoint: MetricsEndpoint | None = None

    def container_devices(self) -> list[ContainerDevice]:
        """Each device of each container HAMi allocated on this node (a shared region exists once its
        container was created), of the pods labelled `hami.io/vgpu-node=<node>`, in their spec's order."""
        physical = {d.id: d.devmem for d in self.device_plugin.devices}
        found: list[ContainerDevice] = []
        for pod in self.kubelet.informer.items():
            meta = pod.get("metadata") or {}
            if (meta.get("labels") or {}).get(ann.VGPU_NODE) != self.node:
                continue
            record = self.kubelet.pods.get(meta.get("uid", ""))
            if record is None:
                continue
            for container in (pod.get("spec") or {}).get("containers") or []:
                name = container.get("name", "")
                env = record.envs.get(name, {})
                used = record.gpu_used_mib.get(name, 0) * _MIB
                for i, uuid in enumerate(record.gpus.get(name) or []):
                    raw = env.get(f"CUDA_DEVICE_MEMORY_LIMIT_{i}", env.get("CUDA_DEVICE_MEMORY_LIMIT", ""))
                    limit = gpu_runtime.parse_memory_limit(raw) or physical.get(uuid, 0)
                    found.append(
                        ContainerDevice(
                            meta.get("namespace", ""), meta.get("name", ""), name, i, uuid, limit * _MIB, used
                        )
                    )
        return found

    def host_gpus(self) -> list[HostGPU]:
        return [
            HostGPU(d.index, d.id, model)
            for d, model in zip(self.device_plugin.devices, self.models, strict=False)
        ]

    async def start(self, host: str, port: int) -> None:
        if self._endpoint is None:
            self._endpoint = MetricsEndpoint(self.registry, host, port)
        await self._endpoint.start()
        self.port = self._endpoint.port

    async def stop(self) -> None:
        if self._endpoint is not None:
            await self._endpoint.stop()
