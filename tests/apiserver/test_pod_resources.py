"""A pod's requests and limits as kube sums them (PodRequests / PodLimits), which ResourceQuota and a
LimitRange's `Pod` items both read: containers add up, an init container runs alone, a restartable init
container (a sidecar) runs beside everything started after it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from tenantgpu.apiserver.limitranger import violations
from tenantgpu.apiserver.quota import pod_resources, pod_usage


def _container(cpu: str, **extra: Any) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}, **extra}


def _spec(containers: list[dict[str, Any]], init: list[dict[str, Any]]) -> dict[str, Any]:
    return {"containers": containers, "initContainers": init}


def test_containers_add_up_and_an_init_container_runs_alone() -> None:
    spec = _spec([_container("2"), _container("3")], [_container("4"), _container("500m")])
    assert pod_resources(spec, "requests") == {"cpu": Decimal(5)}
    spec = _spec([_container("2")], [_container("4")])
    assert pod_resources(spec, "limits") == {"cpu": Decimal(4)}


def test_a_sidecar_runs_beside_the_containers_and_the_init_containers_after_it() -> None:
    sidecar = _container("1", restartPolicy="Always")
    # containers 2 + sidecar 1 = 3; the init container after the sidecar needs 5 + 1 = 6
    assert pod_resources(_spec([_container("2")], [sidecar, _container("5")]), "requests") == {"cpu": 6}
    # an init container before the sidecar runs without it: max(0 + 1, 10) = 10
    assert pod_resources(_spec([], [_container("10"), sidecar]), "requests") == {"cpu": 10}
    pod = {"spec": _spec([_container("2")], [sidecar, _container("5")])}
    assert pod_usage(pod)["requests.cpu"] == 6
    limit_range = {"spec": {"limits": [{"type": "Pod", "max": {"cpu": "4"}}]}}
    assert violations(limit_range, pod) == ["maximum cpu usage per Pod is 4, but limit is 6"]
