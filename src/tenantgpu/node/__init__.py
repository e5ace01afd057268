"""A simulated worker node: kubelet (pod lifecycle) and the GPU runtime model."""

from tenantgpu.hami.device_plugin import GPUSpec
from tenantgpu.node.kubeletclient import KubeletClient
from tenantgpu.node.worker import Worker

__all__ = ["GPUSpec", "KubeletClient", "Worker"]
