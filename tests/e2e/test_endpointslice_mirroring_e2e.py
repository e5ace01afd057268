"""kube-controller-manager's endpointslicemirroring controller against real kubectl: the Endpoints a
user writes for a Service without a selector are mirrored into an EndpointSlice that follows them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from apiserver_harness import Kubectl, wait_for

from tenantgpu.controlplane import ControlPlaneServices

pytestmark = pytest.mark.slow  # drives real kubectl binaries

MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


def _slices(kubectl: Kubectl, service: str) -> list[dict[str, Any]]:
    got = kubectl("get", "endpointslices", "-l", f"kubernetes.io/service-name={service}", "-o", "json")
    return json.loads(got.stdout)["items"]


def _apply(kubectl: Kubectl, obj: dict[str, Any]) -> None:
    kubectl("apply", "-f", "-", input=json.dumps(obj))


def _endpoints(
    addresses: list[str], not_ready: list[str], port: int, labels: dict[str, str]
) -> dict[str, Any]:
    subset: dict[str, Any] = {
        "addresses": [{"ip": ip} for ip in addresses],
        "ports": [{"name": "web", "port": port}],
    }
    if not_ready:
        subset["notReadyAddresses"] = [{"ip": ip} for ip in not_ready]
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": "mirrored", "namespace": "default", "labels": labels},
        "subsets": [subset],
    }


def _mirrored_becomes(kubectl: Kubectl, want: dict[str, bool], port: int) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        slices = _slices(kubectl, "mirrored")
        if len(slices) != 1:
            return None
        [slice_] = slices
        got = {e["addresses"][0]: e["conditions"]["ready"] for e in slice_.get("endpoints") or []}
        ports = [p["port"] for p in slice_.get("ports") or []]
        return slice_ if got == want and ports == [port] else None

    return wait_for(f"the mirrored slice to list {want}", probe, timeout=30)


def test_hand_written_endpoints_are_mirrored_into_a_slice(
    kubectl: Kubectl, services: ControlPlaneServices
) -> None:
    _apply(
        kubectl,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "mirrored", "namespace": "default"},
            "spec": {"ports": [{"name": "web", "port": 80, "targetPort": 8080}]},
        },
    )
    _apply(kubectl, _endpoints(["192.0.2.1", "192.0.2.2"], ["192.0.2.3"], 8080, {"team": "db"}))
    slice_ = _mirrored_becomes(kubectl, {"192.0.2.1": True, "192.0.2.2": True, "192.0.2.3": False}, 8080)
    meta = slice_["metadata"]
    assert meta["name"].startswith("mirrored-")
    assert meta["labels"] == {
        "team": "db",
        "kubernetes.io/service-name": "mirrored",
        MANAGED_BY: "endpointslicemirroring-controller.k8s.io",
    }
    assert "kubectl.kubernetes.io/last-applied-configuration" not in (meta.get("annotations") or {})
    endpoints = json.loads(kubectl("get", "endpoints", "mirrored", "-o", "json").stdout)
    [owner] = meta["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Endpoints",
        "mirrored",
        endpoints["metadata"]["uid"],
        True,
    )
    assert slice_["addressType"] == "IPv4"
    assert slice_["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
    row = kubectl("get", "endpointslices", meta["name"], "--no-headers").stdout.split()
    assert row[1:3] == ["IPv4", "8080"]

    # editing the Endpoints updates the same slice
    _apply(kubectl, _endpoints(["192.0.2.1", "192.0.2.4"], [], 9090, {"team": "db"}))
    updated = _mirrored_becomes(kubectl, {"192.0.2.1": True, "192.0.2.4": True}, 9090)
    assert updated["metadata"]["name"] == meta["name"]

    # labelled skip-mirror: the slice goes; without the label it comes back
    kubectl("label", "endpoints", "mirrored", "endpointslice.kubernetes.io/skip-mirror=true")
    wait_for("the slice to go on skip-mirror", lambda: _slices(kubectl, "mirrored") == [], timeout=30)
    kubectl("label", "endpoints", "mirrored", "endpointslice.kubernetes.io/skip-mirror-")
    _mirrored_becomes(kubectl, {"192.0.2.1": True, "192.0.2.4": True}, 9090)

    # deleting the Endpoints removes the slice; the Service stays
    kubectl("delete", "endpoints", "mirrored")
    wait_for("the slice to go with the Endpoints", lambda: _slices(kubectl, "mirrored") == [], timeout=30)
    kubectl("get", "service", "mirrored")


def test_a_service_that_gains_a_selector_loses_its_mirrored_slice(
    kubectl: Kubectl, services: ControlPlaneServices
) -> None:
    _apply(
        kubectl,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "gains", "namespace": "default"},
            "spec": {"ports": [{"port": 80}]},
        },
    )
    given = _endpoints(["192.0.2.9"], [], 80, {})
    given["metadata"]["name"] = "gains"
    _apply(kubectl, given)
    wait_for(
        "the mirrored slice",
        lambda: [
            s
            for s in _slices(kubectl, "gains")
            if s["metadata"]["labels"][MANAGED_BY].startswith("endpointslicemirroring")
        ],
        timeout=30,
    )
    kubectl("patch", "service", "gains", "-p", json.dumps({"spec": {"selector": {"app": "nothing"}}}))
    wait_for(
        "only the endpointslice controller's slice",
        lambda: (
            [s["metadata"]["labels"][MANAGED_BY] for s in _slices(kubectl, "gains")]
            == ["endpointslice-controller.k8s.io"]
        ),
        timeout=30,
    )
