"""Cluster IPs and node ports as kube-apiserver allocates them.

Facts from kubernetes/kubernetes (pkg/registry/core/service): a refused IP is reported on
`spec.clusterIPs` as `failed to allocate IP <ip>: <reason>` with the reasons `provided IP is already
allocated` and `the provided IP (<ip>) is not in the valid range. The range of valid IPs is <cidr>`; an
update that changes the IP is refused on `spec.clusterIPs[0]` with `may not change once set`; the
ServiceIPStaticSubrange feature draws dynamic IPs from the upper part of the range (the lower band is
min(max(16, size/16), 256) addresses), leaving the lower part for Services that name their IP.
"""

from __future__ import annotations

import ipaddress
import random
from typing import Any

from tenantgpu.apiserver.serviceips import ServiceNetwork


def _service(name: str, uid: str | None = None, **spec: Any) -> dict[str, Any]:
    spec.setdefault("ports", [{"port": 80, "protocol": "TCP"}])
    return {"metadata": {"name": name, "uid": uid or name}, "spec": spec}


def test_the_kubernetes_service_takes_the_first_address() -> None:
    assert ServiceNetwork().kubernetes_ip == "10.96.0.1"
    assert ServiceNetwork("10.100.0.0/24").kubernetes_ip == "10.100.0.1"


def test_dynamic_ips_come_from_the_upper_band_and_never_repeat() -> None:
    network = ServiceNetwork("10.96.0.0/24", _random=random.Random(7))
    stored: list[dict[str, Any]] = []
    for i in range(200):
        svc = _service(f"s{i}")
        assert network.assign(svc, None, stored) == []
        stored.append(svc)
    ips = [ipaddress.IPv4Address(s["spec"]["clusterIP"]) for s in stored]
    assert len(set(ips)) == 200
    # a /24 keeps its lowest 16 addresses for Services that ask for one
    assert all(ipaddress.IPv4Address("10.96.0.16") <= ip < ipaddress.IPv4Address("10.96.0.255") for ip in ips)
    assert stored[0]["spec"]["clusterIPs"] == [stored[0]["spec"]["clusterIP"]]
    assert stored[0]["spec"]["ipFamilies"] == ["IPv4"]
    assert stored[0]["spec"]["ipFamilyPolicy"] == "SingleStack"


def test_a_full_upper_band_spills_into_the_lower_one() -> None:
    network = ServiceNetwork("10.96.0.0/27")  # 32 addresses: 16 low, 15 usable high
    stored: list[dict[str, Any]] = []
    for i in range(30):
        svc = _service(f"s{i}")
        assert network.assign(svc, None, stored) == []
        stored.append(svc)
    assert len({s["spec"]["clusterIP"] for s in stored}) == 30


def test_a_requested_ip_that_is_taken_or_outside_the_range_is_refused() -> None:
    network = ServiceNetwork()
    taken = _service("a", clusterIP="10.96.0.10")
    assert network.assign(taken, None, []) == []
    [cause] = network.assign(_service("b", clusterIP="10.96.0.10"), None, [taken])
    assert cause.field == "spec.clusterIPs"
    assert cause.message == (
        'Invalid value: ["10.96.0.10"]: failed to allocate IP 10.96.0.10: provided IP is already allocated'
    )
    [outside] = network.assign(_service("c", clusterIP="10.0.0.5"), None, [taken])
    assert outside.message.endswith(
        "failed to allocate IP 10.0.0.5: the provided IP (10.0.0.5) is not in the valid range. "
        "The range of valid IPs is 10.96.0.0/16"
    )
    [garbage] = network.assign(_service("d", clusterIP="ten"), None, [])
    assert "must be a valid IP address" in garbage.message


def test_headless_services_get_no_ip() -> None:
    svc = _service("h", clusterIP="None", ports=[])
    assert ServiceNetwork().assign(svc, None, []) == []
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["clusterIPs"] == ["None"]


def test_an_update_keeps_the_ip_and_may_not_change_it() -> None:
    network = ServiceNetwork()
    old = _service("a")
    network.assign(old, None, [])
    ip = old["spec"]["clusterIP"]
    put = _service("a")  # a PUT that leaves the IP out keeps it
    assert network.assign(put, old, [old]) == []
    assert put["spec"]["clusterIP"] == ip and put["spec"]["clusterIPs"] == [ip]
    [cause] = network.assign(_service("a", clusterIP="10.96.0.99"), old, [old])
    assert (cause.field, cause.message) == (
        "spec.clusterIPs[0]",
        'Invalid value: ["10.96.0.99"]: may not change once set',
    )


def test_an_external_name_service_gives_its_ip_back() -> None:
    network = ServiceNetwork()
    old = _service("a")
    network.assign(old, None, [])
    new = {
        "metadata": old["metadata"],
        "spec": {**old["spec"], "type": "ExternalName", "externalName": "x.org"},
    }
    assert network.assign(new, old, [old]) == []
    assert "clusterIP" not in new["spec"] and "clusterIPs" not in new["spec"]
    reuse = _service("b", clusterIP=old["spec"]["clusterIP"])
    assert network.assign(reuse, None, [new]) == []


def test_node_ports_are_allocated_kept_and_checked() -> None:
    network = ServiceNetwork()
    web = _service(
        "web", type="NodePort", ports=[{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}]
    )
    assert network.assign(web, None, []) == []
    ports = [p["nodePort"] for p in web["spec"]["ports"]]
    assert all(30000 <= p <= 32767 for p in ports) and len(set(ports)) == 2

    again = _service("web", uid="web", type="NodePort", ports=[{"port": 80, "protocol": "TCP"}])
    assert network.assign(again, web, [web]) == []
    assert again["spec"]["ports"][0]["nodePort"] == ports[0]

    clash = _service("other", type="NodePort", ports=[{"port": 80, "protocol": "TCP", "nodePort": ports[1]}])
    [taken] = network.assign(clash, None, [web])
    assert (taken.field, taken.message) == (
        "spec.ports[0].nodePort",
        f"Invalid value: {ports[1]}: provided port is already allocated",
    )
    low = _service("low", type="NodePort", ports=[{"port": 80, "protocol": "TCP", "nodePort": 80}])
    [outside] = network.assign(low, None, [])
    assert "The range of valid ports is 30000-32767" in outside.message
    plain = _service("plain")
    network.assign(plain, None, [])
    assert "nodePort" not in plain["spec"]["ports"][0]
