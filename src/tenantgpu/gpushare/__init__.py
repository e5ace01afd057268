"""HAMi's GPU-sharing semantics as a pure library: requests, codecs, fit, scoring, quota. No I/O."""

from tenantgpu.gpushare.allocate import allocate_env
from tenantgpu.gpushare.cluster import ClusterState, Decision
from tenantgpu.gpushare.codec import (
    CodecError,
    decode_node_register,
    decode_pod_devices,
    encode_node_register,
    encode_pod_devices,
)
from tenantgpu.gpushare.config import SharingConfig
from tenantgpu.gpushare.device import ContainerDevice, DeviceInfo, DeviceUsageView
from tenantgpu.gpushare.objects import ObjectsError, load_objects
from tenantgpu.gpushare.plan import Placement, PlanInputError, plan
from tenantgpu.gpushare.quantity import QuantityError, parse_quantity
from tenantgpu.gpushare.quota import QuotaBook
from tenantgpu.gpushare.register import register_device
from tenantgpu.gpushare.request import ContainerDeviceRequest
from tenantgpu.gpushare.webhook import Admission, mutate_pod, pod_requests_gpu

__all__ = [
    "Admission",
    "ClusterState",
    "CodecError",
    "ContainerDevice",
    "ContainerDeviceRequest",
    "Decision",
    "DeviceInfo",
    "DeviceUsageView",
    "ObjectsError",
    "Placement",
    "PlanInputError",
    "QuantityError",
    "QuotaBook",
    "SharingConfig",
    "allocate_env",
    "decode_node_register",
    "decode_pod_devices",
    "encode_node_register",
    "encode_pod_devices",
    "load_objects",
    "mutate_pod",
    "parse_quantity",
    "plan",
    "pod_requests_gpu",
    "register_device",
]
