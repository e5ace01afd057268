"""The endpointslicemirroring controller's reconciler: hand-written Endpoints into EndpointSlices."""

from __future__ import annotations

from typing import Any

from tenantgpu.controlplane.endpointslicemirroring import (
    CONTROLLER_NAME,
    parse_ip,
    plan_mirroring,
    service_without_selector,
    should_mirror,
)


def _endpoints(subsets: list[dict[str, Any]], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": "db", "namespace": "ns", "uid": "ep-uid", **meta},
        "subsets": subsets,
    }


PORT = {"name": "sql", "port": 5432, "protocol": "TCP"}


def test_ready_and_not_ready_addresses_make_one_slice_owned_by_the_endpoints() -> None:
    endpoints = _endpoints(
        [
            {
                "addresses": [{"ip": "10.0.0.2", "nodeName": "n1", "hostname": "a"}],
                "notReadyAddresses": [{"ip": "10.0.0.1"}],
                "ports": [PORT],
            }
        ],
        labels={"team": "x"},
        annotations={
            "note": "kept",
            "kubectl.kubernetes.io/last-applied-configuration": "{}",
            "endpoints.kubernetes.io/last-change-trigger-time": "t",
        },
    )
    plan = plan_mirroring(endpoints, [])
    [slice_] = plan.create
    assert not plan.update and not plan.delete
    meta = slice_["metadata"]
    assert meta["generateName"] == "db-"
    assert meta["labels"] == {
        "team": "x",
        "kubernetes.io/service-name": "db",
        "endpointslice.kubernetes.io/managed-by": CONTROLLER_NAME,
    }
    assert meta["annotations"] == {"note": "kept"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "name": "db",
            "uid": "ep-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert slice_["addressType"] == "IPv4"
    assert slice_["ports"] == [{"name": "sql", "port": 5432, "protocol": "TCP"}]
    assert slice_["endpoints"] == [
        {"addresses": ["10.0.0.2"], "conditions": {"ready": True}, "nodeName": "n1", "hostname": "a"},
        {"addresses": ["10.0.0.1"], "conditions": {"ready": False}},
    ]


def test_address_families_split_and_invalid_ips_are_skipped_with_a_warning() -> None:
    endpoints = _endpoints(
        [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "fd00::0001"}, {"ip": "not-an-ip"}], "ports": [PORT]}]
    )
    plan = plan_mirroring(endpoints, [])
    by_type = {s["addressType"]: s["endpoints"] for s in plan.create}
    assert by_type == {
        "IPv4": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
        "IPv6": [{"addresses": ["fd00::1"], "conditions": {"ready": True}}],
    }
    assert plan.warnings() == [
        ("InvalidIPAddress", "Skipped 1 invalid IP addresses when mirroring to EndpointSlices")
    ]


def test_ip_parsing_is_sloppy_like_kube() -> None:
    assert parse_ip("010.000.000.001") == ("10.0.0.1", "IPv4")
    assert parse_ip("::ffff:192.0.2.1") == ("192.0.2.1", "IPv4")
    assert parse_ip("256.0.0.1") is None
    assert parse_ip("example.com") is None


def test_at_most_the_limit_per_subset_ready_first() -> None:
    ready = [{"ip": f"10.0.{i // 256}.{i % 256}"} for i in range(4)]
    not_ready = [{"ip": "10.1.0.1"}, {"ip": "10.1.0.2"}]
    plan = plan_mirroring(
        _endpoints([{"addresses": ready, "notReadyAddresses": not_ready, "ports": [PORT]}]), [], limit=5
    )
    [slice_] = plan.create
    assert len(slice_["endpoints"]) == 5
    assert [e["conditions"]["ready"] for e in slice_["endpoints"]] == [True] * 4 + [False]
    assert plan.warnings(5) == [
        (
            "TooManyAddressesToMirror",
            "A max of 5 addresses can be mirrored to EndpointSlices per Endpoints subset. 1 addresses were skipped",
        )
    ]


def _existing(plan_body: dict[str, Any], name: str, uid: str = "s-uid") -> dict[str, Any]:
    meta = dict(plan_body["metadata"])
    meta.pop("generateName", None)
    return {**plan_body, "metadata": {**meta, "name": name, "uid": uid, "generation": 1}}


def test_an_unchanged_slice_is_left_alone_and_a_change_updates_it_in_place() -> None:
    endpoints = _endpoints([{"addresses": [{"ip": "10.0.0.1"}], "ports": [PORT]}])
    current = _existing(plan_mirroring(endpoints, []).create[0], "db-abcde")
    assert plan_mirroring(endpoints, [current]).empty
    # a new address
    endpoints["subsets"][0]["addresses"].append({"ip": "10.0.0.2"})
    plan = plan_mirroring(endpoints, [current])
    [updated] = plan.update
    assert updated["metadata"]["name"] == "db-abcde" and "generateName" not in updated["metadata"]
    assert {e["addresses"][0] for e in updated["endpoints"]} == {"10.0.0.1", "10.0.0.2"}
    # a new label on the Endpoints
    labelled = _endpoints(endpoints["subsets"][:1], labels={"a": "b"})
    labelled["subsets"][0]["addresses"] = [{"ip": "10.0.0.1"}]
    assert plan_mirroring(labelled, [current]).update
    # the Endpoints recreated under a new uid
    recreated = _endpoints([{"addresses": [{"ip": "10.0.0.1"}], "ports": [PORT]}], uid="other")
    assert plan_mirroring(recreated, [current]).update


def test_new_ports_recycle_the_old_slice_and_no_subsets_delete_it() -> None:
    endpoints = _endpoints([{"addresses": [{"ip": "10.0.0.1"}], "ports": [PORT]}])
    current = _existing(plan_mirroring(endpoints, []).create[0], "db-abcde")
    endpoints["subsets"][0]["ports"] = [{"name": "sql", "port": 6543, "protocol": "TCP"}]
    plan = plan_mirroring(endpoints, [current])
    assert not plan.create and not plan.delete
    [updated] = plan.update
    assert updated["metadata"]["name"] == "db-abcde" and updated["ports"][0]["port"] == 6543
    emptied = plan_mirroring(_endpoints([]), [current])
    assert emptied.delete == [current] and not emptied.create and not emptied.update


def test_duplicate_slices_for_the_same_ports_are_trimmed_to_one() -> None:
    endpoints = _endpoints([{"addresses": [{"ip": "10.0.0.1"}], "ports": [PORT]}])
    body = plan_mirroring(endpoints, []).create[0]
    first, second = _existing(body, "db-1", "u1"), _existing(body, "db-2", "u2")
    plan = plan_mirroring(endpoints, [first, second])
    assert plan.delete == [second] and not plan.create and not plan.update


def test_which_endpoints_and_services_are_mirrored() -> None:
    assert should_mirror(_endpoints([]))
    assert not should_mirror(_endpoints([], labels={"endpointslice.kubernetes.io/skip-mirror": "true"}))
    assert should_mirror(_endpoints([], labels={"endpointslice.kubernetes.io/skip-mirror": "false"}))
    assert not should_mirror(_endpoints([], annotations={"control-plane.alpha.kubernetes.io/leader": "{}"}))
    assert service_without_selector({"spec": {"ports": [{"port": 80}]}})
    assert service_without_selector({"spec": {"type": "ExternalName", "externalName": "x"}})
    assert not service_without_selector({"spec": {"selector": {"app": "x"}}})
