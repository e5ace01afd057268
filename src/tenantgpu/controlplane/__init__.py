"""What Kamaji's control-plane pod runs beside kube-apiserver: the default scheduler and controller duties."""

from tenantgpu.controlplane.manager import ControlPlaneServices
from tenantgpu.controlplane.namespaces import NamespaceController
from tenantgpu.controlplane.nodelifecycle import NodeLifecycleController
from tenantgpu.controlplane.podgc import PodGarbageCollector
from tenantgpu.controlplane.scheduler import DefaultScheduler
from tenantgpu.controlplane.serviceaccounts import ServiceAccountController

__all__ = [
    "ControlPlaneServices",
    "DefaultScheduler",
    "NamespaceController",
    "NodeLifecycleController",
    "PodGarbageCollector",
    "ServiceAccountController",
]
