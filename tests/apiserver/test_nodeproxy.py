"""How kube-apiserver reads a `nodes/<segment>/proxy/<path>` request (apimachinery's SplitSchemeNamePort,
the node registry's ResourceLocation, JoinPreservingTrailingSlash)."""

from __future__ import annotations

import pytest

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.nodeproxy import (
    ProxyRequest,
    kubelet_endpoint,
    proxy_request,
    split_scheme_name_port,
)


@pytest.mark.parametrize(
    ("segment", "split"),
    [
        ("n1", ("", "n1", "")),
        ("n1:10250", ("", "n1", "10250")),
        ("https:n1:10250", ("https", "n1", "10250")),
        ("http:n1:", ("http", "n1", "")),
        ("ftp:n1:1", None),  # only http, https or none
        (":10250", None),  # a name is required
        ("a:b:c:d", None),
    ],
)
def test_a_node_segment_is_a_name_with_an_optional_scheme_and_port(
    segment: str, split: tuple[str, str, str] | None
) -> None:
    assert split_scheme_name_port(segment) == split


@pytest.mark.parametrize(
    ("path", "query", "wanted"),
    [
        ("/api/v1/nodes/n1/proxy", "", ProxyRequest("n1", None, "/")),
        ("/api/v1/nodes/n1/proxy/", "", ProxyRequest("n1", None, "/")),
        ("/api/v1/nodes/n1/proxy/pods", "", ProxyRequest("n1", None, "/pods")),
        ("/api/v1/nodes/n1/proxy/runningpods/", "", ProxyRequest("n1", None, "/runningpods/")),
        ("/api/v1/nodes/n1:10250/proxy/stats/summary", "only_cpu_and_memory=true",
         ProxyRequest("n1", 10250, "/stats/summary?only_cpu_and_memory=true")),
        ("/api/v1/nodes/n1/proxy/logs/a b", "", ProxyRequest("n1", None, "/logs/a%20b")),
    ],
)  # fmt: skip
def test_the_path_after_proxy_and_the_query_go_on_unchanged(
    path: str, query: str, wanted: ProxyRequest
) -> None:
    segment = path.split("/")[4]
    assert proxy_request(segment, path, query) == wanted


def test_a_segment_kube_cannot_split_is_a_bad_request_naming_it() -> None:
    with pytest.raises(errors.APIError) as caught:
        proxy_request("ftp:n1:1", "/api/v1/nodes/ftp:n1:1/proxy/", "")
    assert (caught.value.code, caught.value.reason, caught.value.message) == (
        400,
        "BadRequest",
        'invalid node request "ftp:n1:1"',
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
