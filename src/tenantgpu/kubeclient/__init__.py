"""A small async Kubernetes client: kubeconfig, REST verbs, watch, informer — how components reach the API."""

from tenantgpu.kubeclient.client import KubeClient, WatchEvent
from tenantgpu.kubeclient.config import KubeConfig, load_kubeconfig
from tenantgpu.kubeclient.errors import ApiError
from tenantgpu.kubeclient.informer import Informer
from tenantgpu.kubeclient.resources import ResourceKind, resource_kind

__all__ = [
    "ApiError",
    "Informer",
    "KubeClient",
    "KubeConfig",
    "ResourceKind",
    "WatchEvent",
    "load_kubeconfig",
    "resource_kind",
]
