"""`pods/portforward` as kube-apiserver passes it to the kubelet: the kubelet's path and `port` parameters,
the `ports` kube accepts, the tunnelled SPDY protocols a WebSocket asks for, and the feature gate that
decides whether the API server tunnels (the whole way, with real kubectl: tests/e2e/test_port_forward_e2e.py)."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from tenantgpu.apiserver import errors, featuregates, portforward

POD = {"metadata": {"name": "hami-scheduler-7c9d", "namespace": "kube-system"}}


def test_the_kubelets_path_takes_the_requests_ports_as_its_port_parameters() -> None:
    assert portforward.kubelet_path(POD, []) == "/portForward/kube-system/hami-scheduler-7c9d"
    assert (
        portforward.kubelet_path(POD, ["9395", "443"])
        == "/portForward/kube-system/hami-scheduler-7c9d?port=9395&port=443"
    )


def test_ports_must_be_int32s_as_kubes_query_conversion_reads_them() -> None:
    assert portforward.parse_ports(["9395", "443"]) == ["9395", "443"]
    with pytest.raises(errors.APIError) as refused:
        portforward.parse_ports(["http"])
    assert refused.value.code == 400
    assert refused.value.message == 'strconv.ParseInt: parsing "http": invalid syntax'
    with pytest.raises(errors.APIError, match="value out of range"):
        portforward.parse_ports(["4294967296"])


def test_only_kubernetes_protocols_behind_the_spdy_prefix_are_tunnelled() -> None:
    def offered(value: str) -> list[str]:
        headers = CIMultiDict({"Upgrade": "websocket", "Sec-WebSocket-Protocol": value})
        request = make_mocked_request("GET", "/api/v1/namespaces/default/pods/p/portforward", headers=headers)
        return portforward.tunnelled_protocols(request)

    assert offered("SPDY/3.1+portforward.k8s.io") == ["portforward.k8s.io"]
    assert offered("v4.channel.k8s.io, SPDY/3.1+portforward.k8s.io") == ["portforward.k8s.io"]
    assert offered("v4.channel.k8s.io") == []
    assert offered("SPDY/3.1+chat.example.com") == []


@pytest.mark.parametrize(("minor", "on"), [(29, False), (30, False), (31, True), (33, True)])
def test_port_forward_websockets_is_on_from_131(minor: int, on: bool) -> None:
    # alpha in 1.30 (off), beta and on from 1.31
    assert featuregates.enabled("PortForwardWebsockets", minor) is on
