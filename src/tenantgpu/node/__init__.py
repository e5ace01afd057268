"""A simulated worker node: kubelet (pod lifecycle) and the GPU runtime model."""

from tenantgpu.hami.device_plugin import GPUSpec
from tenantgpu.node.logsource import KubeletLogSource
from tenantgpu.node.worker import Worker

__all__ = ["GPUSpec", "KubeletLogSource", "Worker"]
