"""HAMi's components on the wire: webhook, scheduler, device plugin, metrics."""

from tenantgpu.hami.device_plugin import DevicePlugin, GPUSpec
from tenantgpu.hami.install import install_hami
from tenantgpu.hami.scheduler import HamiScheduler
from tenantgpu.hami.webhook import HamiWebhook

__all__ = ["DevicePlugin", "GPUSpec", "HamiScheduler", "HamiWebhook", "install_hami"]
