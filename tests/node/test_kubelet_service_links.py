"""Which Services' variables a container gets (kubelet_pods.go getServiceEnvVarMap), and a kubelet that
may not list Services runs on without them."""

from __future__ import annotations

from typing import Any

from tenantgpu.gpushare import SharingConfig
from tenantgpu.hami.device_plugin import DevicePlugin, GPUSpec
from tenantgpu.kubeclient import ApiError, KubeClient, KubeConfig
from tenantgpu.node.kubelet import Kubelet


def _service(namespace: str, name: str, ip: str, port: int = 80) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"clusterIP": ip, "ports": [{"port": port, "protocol": "TCP"}]},
    }


def _kubelet() -> Kubelet:
    client = KubeClient(KubeConfig(server="http://127.0.0.1:9"))  # never contacted here
    cfg = SharingConfig()
    return Kubelet(client, "w", cfg, DevicePlugin(client, "w", [GPUSpec("NVIDIA L4", 23034, 1)], cfg))


def test_the_kubernetes_service_always_and_the_namespace_s_own_with_links() -> None:
    kubelet = _kubelet()
    kubelet._services_seen = True
    for service in (
        _service("default", "kubernetes", "10.96.0.1", 443),
        _service("team", "model-api", "10.96.4.2", 8080),
        _service("team", "db", "None"),  # headless: no variables
        _service("other", "cache", "10.96.7.7"),
    ):
        meta = service["metadata"]
        kubelet.service_informer.cache[(meta["namespace"], meta["name"])] = service
    linked = kubelet.service_env("team")
    assert linked["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert linked["MODEL_API_SERVICE_HOST"] == "10.96.4.2" and linked["MODEL_API_SERVICE_PORT"] == "8080"
    assert not any(name.startswith(("DB_", "CACHE_")) for name in linked)
    unlinked = kubelet.service_env("team", links=False)
    assert unlinked["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert not any(name.startswith("MODEL_API_") for name in unlinked)
    # a Service named `kubernetes` in the pod's own namespace takes the name's variables
    shadow = _service("team", "kubernetes", "10.96.9.9")
    kubelet.service_informer.cache[("team", "kubernetes")] = shadow
    kubelet._on_service("ADDED", shadow, None)  # as the informer tells its handlers
    assert kubelet.service_env("team")["KUBERNETES_SERVICE_HOST"] == "10.96.9.9"
    assert kubelet.service_env("elsewhere")["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"


async def test_a_kubelet_refused_the_service_list_runs_on_without_service_variables() -> None:
    kubelet = _kubelet()
    asked: list[str] = []

    async def refuse(resource: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        asked.append(resource)
        raise ApiError({"code": 403, "reason": "Forbidden", "message": "services is forbidden"})

    kubelet.client.list = refuse  # type: ignore[method-assign]
    await kubelet._watch_services()
    assert asked == ["services"] and kubelet.service_env("default") == {}
    await kubelet.service_informer.stop()
