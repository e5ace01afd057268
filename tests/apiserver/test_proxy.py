"""How kube-apiserver reads a `proxy` request and finds where it goes (apimachinery's SplitSchemeNamePort,
the node, pod and service registries' ResourceLocation, JoinPreservingTrailingSlash)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.proxy import (
    Location,
    ProxyRequest,
    kubelet_endpoint,
    pod_location,
    proxy_request,
    service_location,
    split_scheme_name_port,
)


@pytest.mark.parametrize(
    ("segment", "split"),
    [
        ("n1", ("", "n1", "")),
        ("n1:10250", ("", "n1", "10250")),
        ("https:n1:10250", ("https", "n1", "10250")),
        ("http:n1:", ("http", "n1", "")),
        ("svc:monitor", ("", "svc", "monitor")),
        ("ftp:n1:1", None),  # only http, https or none
        (":10250", None),  # a name is required
        ("a:b:c:d", None),
    ],
)
def test_a_segment_is_a_name_with_an_optional_scheme_and_port(
    segment: str, split: tuple[str, str, str] | None
) -> None:
    assert split_scheme_name_port(segment) == split


@pytest.mark.parametrize(
    ("path", "query", "wanted"),
    [
        ("/api/v1/nodes/n1/proxy", "", ProxyRequest("n1", "", "/")),
        ("/api/v1/nodes/n1/proxy/", "", ProxyRequest("n1", "", "/")),
        ("/api/v1/nodes/n1/proxy/pods", "", ProxyRequest("n1", "", "/pods")),
        ("/api/v1/nodes/n1/proxy/runningpods/", "", ProxyRequest("n1", "", "/runningpods/")),
        ("/api/v1/nodes/n1:10250/proxy/stats/summary", "only_cpu_and_memory=true",
         ProxyRequest("n1", "10250", "/stats/summary?only_cpu_and_memory=true")),
        ("/api/v1/nodes/n1/proxy/logs/a b", "", ProxyRequest("n1", "", "/logs/a%20b")),
        ("/api/v1/namespaces/kube-system/services/https:hami-scheduler:monitor/proxy/metrics", "",
         ProxyRequest("hami-scheduler", "monitor", "/metrics", "https")),
    ],
)  # fmt: skip
def test_the_path_after_proxy_and_the_query_go_on_unchanged(
    path: str, query: str, wanted: ProxyRequest
) -> None:
    parts = path.split("/")
    index = parts.index("proxy")
    plural, segment = parts[index - 2], parts[index - 1]
    assert proxy_request(plural, segment, path, query) == wanted


@pytest.mark.parametrize(("plural", "kind"), [("nodes", "node"), ("pods", "pod"), ("services", "service")])
def test_a_segment_kube_cannot_split_is_a_bad_request_naming_it(plural: str, kind: str) -> None:
    with pytest.raises(errors.APIError) as caught:
        proxy_request(plural, "ftp:x:1", f"/api/v1/{plural}/ftp:x:1/proxy/", "")
    assert (caught.value.code, caught.value.reason, caught.value.message) == (
        400,
        "BadRequest",
        f'invalid {kind} request "ftp:x:1"',
    )


def test_the_kubelet_is_found_at_the_nodes_internal_address_and_daemon_endpoint() -> None:
    node = {
        "status": {
            "addresses": [
                {"type": "Hostname", "address": "n1"},
                {"type": "InternalIP", "address": "10.0.0.7"},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 41000}},
        }
    }
    assert kubelet_endpoint(node) == ("10.0.0.7", 41000)
    assert kubelet_endpoint({"status": {"addresses": [{"type": "Hostname", "address": "n1"}]}}) == (
        "n1",
        10250,
    )


def _pod(ip: str, *ports: int) -> dict[str, Any]:
    containers = [{"name": "sidecar"}, {"name": "app", "ports": [{"containerPort": p} for p in ports]}]
    return {"spec": {"containers": containers}, "status": {"podIP": ip}}


def test_a_pod_is_reached_at_its_ip_and_the_port_asked_or_its_first_declared_one() -> None:
    assert pod_location(_pod("10.244.1.5", 9395, 443), ProxyRequest("p", "", "/")) == Location(
        "http", "10.244.1.5", 9395
    )
    assert pod_location(_pod("10.244.1.5", 9395), ProxyRequest("p", "8080", "/", "https")) == Location(
        "https", "10.244.1.5", 8080
    )
    # no port anywhere: the scheme's own
    assert pod_location(_pod("10.244.1.5"), ProxyRequest("p", "", "/")).port == 80
    assert pod_location(_pod("10.244.1.5"), ProxyRequest("p", "", "/", "https")).port == 443


@pytest.mark.parametrize("ip", ["", "127.0.0.1", "169.254.1.1", "0.0.0.0"])
def test_a_pod_without_a_global_unicast_address_is_not_proxied(ip: str) -> None:
    with pytest.raises(errors.APIError) as caught:
        pod_location(_pod(ip, 80), ProxyRequest("p", "", "/"))
    assert (caught.value.code, caught.value.message) == (400, "address not allowed")


SERVICE = {
    "metadata": {"name": "hami-scheduler"},
    "spec": {"ports": [{"name": "http", "port": 443}, {"name": "monitor", "port": 31993}]},
}
ENDPOINTS = {
    "subsets": [
        {
            "addresses": [{"ip": "10.244.1.5"}],
            "ports": [{"name": "http", "port": 443}, {"name": "monitor", "port": 9395}],
        }
    ]
}


def test_a_service_port_by_number_or_name_goes_to_an_endpoint_at_its_target_port() -> None:
    rng = random.Random(1)
    by_name = service_location(SERVICE, ENDPOINTS, ProxyRequest("hami-scheduler", "monitor", "/metrics"), rng)
    by_number = service_location(SERVICE, ENDPOINTS, ProxyRequest("hami-scheduler", "31993", "/metrics"), rng)
    assert by_name == by_number == Location("http", "10.244.1.5", 9395)


@pytest.mark.parametrize(
    ("port", "endpoints", "message"),
    [
        ("8080", ENDPOINTS, 'no service port 8080 found for service "hami-scheduler"'),
        ("monitor", {"subsets": []}, 'no endpoints available for service "hami-scheduler"'),
        ("monitor", None, 'no endpoints available for service "hami-scheduler"'),
        ("metrics", ENDPOINTS, 'no endpoints available for service "hami-scheduler:metrics"'),
    ],
)
def test_a_service_without_a_matching_endpoint_is_unavailable(
    port: str, endpoints: dict[str, Any] | None, message: str
) -> None:
    with pytest.raises(errors.APIError) as caught:
        service_location(SERVICE, endpoints, ProxyRequest("hami-scheduler", port, "/"), random.Random(1))
    assert (caught.value.code, caught.value.reason, caught.value.message) == (
        503,
        "ServiceUnavailable",
        message,
    )
