"""What the endpoints and endpointslice controllers write for a Service, worked out without an API
server: which pods count and how, ports, repacking, slices of 100 and the 1000-address cap."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from tenantgpu.controlplane import endpointsbuild as eb
from tenantgpu.controlplane.endpoints import EndpointsController, EndpointSliceController
from tenantgpu.kubeclient import Informer

NODE = {"metadata": {"name": "node-a", "labels": {eb.ZONE_LABEL: "zone-1"}}}


def service(
    name: str = "web",
    *,
    ports: list[dict[str, Any]] | None = None,
    cluster_ip: str = "10.96.0.10",
    selector: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"svc-{name}",
            "labels": {"team": "a"},
            "creationTimestamp": "2025-05-01T10:00:00Z",
        },
        "spec": {
            "selector": {"app": "web"} if selector is None else selector,
            "clusterIP": cluster_ip,
            "ipFamilies": ["IPv4"],
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]
            if ports is None
            else ports,
            **spec,
        },
    }


def pod(
    name: str,
    ip: str,
    *,
    ready: bool = True,
    ports: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    phase: str = "Running",
    deleting: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "labels": {"app": "web"} if labels is None else labels,
    }
    if deleting:
        meta["deletionTimestamp"] = "2025-05-01T10:05:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": "node-a", "containers": [{"name": "c", "ports": ports or []}], **spec},
        "status": {
            "phase": phase,
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": "2025-05-01T10:01:00Z",
                }
            ],
        },
    }


def ips(subsets: list[dict[str, Any]], key: str = "addresses") -> list[str]:
    return [a["ip"] for s in subsets for a in s.get(key) or []]


def test_ready_pods_are_addresses_and_the_others_not_ready_addresses() -> None:
    pods = [
        pod("a", "10.0.0.2"),
        pod("b", "10.0.0.1", ready=False),
        pod("other", "10.0.0.9", labels={"app": "db"}),  # not selected
        pod("elsewhere", "10.0.0.8", namespace="other"),  # selected, but not in the Service's namespace
        pod("done", "10.0.0.7", phase="Succeeded"),
        pod("no-ip", ""),
        pod("going", "10.0.0.6", deleting=True),  # terminating: out of the Endpoints
    ]
    pods[5]["status"]["podIPs"] = []
    content = eb.endpoints_subsets(service(), pods)
    assert content.subsets == [
        {
            "addresses": [
                {
                    "ip": "10.0.0.2",
                    "nodeName": "node-a",
                    "targetRef": {"kind": "Pod", "namespace": "default", "name": "a", "uid": "uid-a"},
                }
            ],
            "notReadyAddresses": [
                {
                    "ip": "10.0.0.1",
                    "nodeName": "node-a",
                    "targetRef": {"kind": "Pod", "namespace": "default", "name": "b", "uid": "uid-b"},
                }
            ],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        }
    ]
    assert (content.ready, content.not_ready, content.truncated) == (1, 1, False)


def test_publish_not_ready_addresses_lists_every_pod_as_ready_and_keeps_terminating_ones() -> None:
    pods = [pod("a", "10.0.0.2", ready=False), pod("going", "10.0.0.3", deleting=True)]
    published = service(publishNotReadyAddresses=True)
    assert ips(eb.endpoints_subsets(published, pods).subsets) == ["10.0.0.2", "10.0.0.3"]
    assert ips(eb.endpoints_subsets(published, pods).subsets, "notReadyAddresses") == []
    # the slices say what the pods are: ready because published, serving only when Ready
    plan = eb.plan_slices(published, pods, lambda n: NODE, [])
    [created] = plan.create
    assert [e["conditions"] for e in created["endpoints"]] == [
        {"ready": True, "serving": False, "terminating": False},
        {"ready": True, "serving": True, "terminating": True},
    ]


def test_terminating_pods_stay_in_the_slices_as_terminating_but_leave_the_endpoints() -> None:
    pods = [pod("a", "10.0.0.2"), pod("going", "10.0.0.3", deleting=True)]
    assert ips(eb.endpoints_subsets(service(), pods).subsets) == ["10.0.0.2"]
    [created] = eb.plan_slices(service(), pods, lambda n: NODE, []).create
    conditions = {e["targetRef"]["name"]: e["conditions"] for e in created["endpoints"]}
    assert conditions == {
        "a": {"ready": True, "serving": True, "terminating": False},
        "going": {"ready": False, "serving": True, "terminating": True},
    }
    assert {e["zone"] for e in created["endpoints"]} == {"zone-1"}


def test_named_target_ports_resolve_per_pod_and_a_pod_without_the_name_is_left_out_of_that_port() -> None:
    svc = service(
        ports=[
            {"name": "http", "port": 80, "targetPort": "web", "protocol": "TCP"},
            {"name": "metrics", "port": 9090, "targetPort": 9090, "protocol": "TCP", "appProtocol": "http"},
        ]
    )
    pods = [
        pod("a", "10.0.0.1", ports=[{"name": "web", "containerPort": 8080}]),
        pod("b", "10.0.0.2", ports=[{"name": "web", "containerPort": 8081}]),
        pod("c", "10.0.0.3", ports=[{"name": "web", "containerPort": 8080, "protocol": "UDP"}]),
        pod("d", "10.0.0.4"),
    ]
    subsets = eb.endpoints_subsets(svc, pods).subsets
    by_ports = {tuple((p["name"], p["port"]) for p in s["ports"]): ips([s]) for s in subsets}
    # pods that share the same ports share a subset; a port of another protocol does not match the name
    assert by_ports == {
        (("http", 8080),): ["10.0.0.1"],
        (("http", 8081),): ["10.0.0.2"],
        (("metrics", 9090),): ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"],
    }
    metrics = next(s for s in subsets if s["ports"][0]["name"] == "metrics")
    assert metrics["ports"] == [{"name": "metrics", "port": 9090, "protocol": "TCP", "appProtocol": "http"}]
    # slices group pods by their resolved ports
    plan = eb.plan_slices(svc, pods, lambda n: NODE, [])
    groups = sorted(
        (tuple((p["name"], p["port"]) for p in s["ports"]), [e["addresses"][0] for e in s["endpoints"]])
        for s in plan.create
    )
    assert groups == sorted(
        [
            ((("http", 8080), ("metrics", 9090)), ["10.0.0.1"]),
            ((("http", 8081), ("metrics", 9090)), ["10.0.0.2"]),
            ((("metrics", 9090),), ["10.0.0.3", "10.0.0.4"]),
        ]
    )
    # a sidecar (restartable init container) may carry the named port; a plain init container may not
    sidecar = pod("e", "10.0.0.5")
    sidecar["spec"]["initContainers"] = [
        {"name": "init", "ports": [{"name": "web", "containerPort": 7000}]},
        {"name": "side", "restartPolicy": "Always", "ports": [{"name": "web", "containerPort": 7001}]},
    ]
    assert eb.find_port(sidecar, svc["spec"]["ports"][0]) == 7001


def test_repacking_merges_ports_with_the_same_addresses_and_orders_as_kube() -> None:
    svc = service(
        ports=[
            {"name": "a", "port": 1, "targetPort": 1001, "protocol": "TCP"},
            {"name": "b", "port": 2, "targetPort": 1002, "protocol": "TCP"},
            {"name": "c", "port": 3, "targetPort": 1003, "protocol": "UDP"},
        ]
    )
    pods = [pod("x", "10.0.0.10"), pod("y", "10.0.0.9"), pod("z", "10.0.0.11", ready=False)]
    [subset] = eb.endpoints_subsets(svc, pods).subsets
    # one subset for all three ports; addresses bytewise by IP ("10.0.0.10" < "10.0.0.9")
    assert ips([subset]) == ["10.0.0.10", "10.0.0.9"] and ips([subset], "notReadyAddresses") == ["10.0.0.11"]

    # ports in the order of the md5 of their Go dump, as SortSubsets orders them
    def digest(port: dict[str, Any]) -> bytes:
        text = (
            f"(v1.EndpointPort){{Name:(string){port['name']} Port:(int32){port['port']} "
            f"Protocol:(v1.Protocol){port['protocol']} AppProtocol:(*string)<nil>}}"
        )
        return hashlib.md5(text.encode()).digest()

    assert subset["ports"] == sorted(subset["ports"], key=digest)
    assert {p["name"] for p in subset["ports"]} == {"a", "b", "c"}


def test_an_address_not_ready_for_a_port_anywhere_is_not_ready_for_it() -> None:
    first = {"ip": "10.0.0.1", "nodeName": "n", "targetRef": {"kind": "Pod", "uid": "u1"}}
    port = {"name": "p", "port": 80, "protocol": "TCP"}
    packed = eb.repack_subsets([eb._Subset([first], None, [port]), eb._Subset(None, [dict(first)], [port])])
    assert [(s.addresses, s.not_ready) for s in packed] == [(None, [first])]


def test_a_headless_service_names_pods_by_hostname_when_their_subdomain_is_the_service() -> None:
    svc = service("peers", cluster_ip="None", ports=[])
    named = pod("peer-0", "10.0.0.1", hostname="peer-0", subdomain="peers")
    other = pod("peer-1", "10.0.0.2", hostname="peer-1", subdomain="something-else")
    content = eb.endpoints_subsets(svc, [named, other])
    # no ports: a headless Service may have none, its subset has none either
    assert content.subsets == [
        {
            "addresses": [
                {**eb.endpoint_address(svc, named), "hostname": "peer-0"},  # type: ignore[dict-item]
                eb.endpoint_address(svc, other),
            ]
        }
    ]
    assert content.subsets[0]["addresses"][0]["hostname"] == "peer-0"
    assert "hostname" not in content.subsets[0]["addresses"][1]
    assert eb.endpoints_labels(svc) == {
        "team": "a",
        "service.kubernetes.io/headless": "",
        "endpoints.kubernetes.io/managed-by": "endpoint-controller",
    }
    [created] = eb.plan_slices(svc, [named, other], lambda n: NODE, []).create
    assert created["ports"] == []
    assert [e.get("hostname") for e in created["endpoints"]] == ["peer-0", None]
    assert created["metadata"]["labels"] == {
        "team": "a",
        "service.kubernetes.io/headless": "",
        "kubernetes.io/service-name": "peers",
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
    }
    # a Service with a cluster IP and no ports gives nothing to the Endpoints
    assert eb.endpoints_subsets(service(ports=[]), [named]).subsets == []


def test_slices_hold_at_most_100_endpoints_and_existing_ones_are_filled_first() -> None:
    pods = [pod(f"p{i:03}", f"10.0.{i // 250}.{i % 250 + 1}") for i in range(250)]
    plan = eb.plan_slices(service(), pods, lambda n: NODE, [])
    assert [len(s["endpoints"]) for s in plan.create] == [100, 100, 50]
    assert not plan.update and not plan.delete
    for slice_ in plan.create:
        assert slice_["metadata"]["generateName"] == "web-" and "name" not in slice_["metadata"]
        assert slice_["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "name": "web",
                "uid": "svc-web",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    # as stored: named, with what was written
    stored = []
    for i, slice_ in enumerate(plan.create):
        meta = {k: v for k, v in slice_["metadata"].items() if k != "generateName"}
        stored.append({**slice_, "metadata": {**meta, "name": f"web-{i}", "namespace": "default"}})
    assert eb.plan_slices(service(), pods, lambda n: NODE, stored).empty
    # ten more pods go into the slice with room, not into a new one
    more = [*pods, *(pod(f"q{i}", f"10.1.0.{i + 1}") for i in range(10))]
    plan = eb.plan_slices(service(), more, lambda n: NODE, stored)
    assert not plan.create and not plan.delete
    assert [(s["metadata"]["name"], len(s["endpoints"])) for s in plan.update] == [("web-2", 60)]
    # pods gone from a slice: it is updated; emptied: deleted
    fewer = pods[:150]
    plan = eb.plan_slices(service(), fewer, lambda n: NODE, stored)
    assert [(s["metadata"]["name"], len(s["endpoints"])) for s in plan.update] == [("web-1", 50)]
    assert [s["metadata"]["name"] for s in plan.delete] == ["web-2"]


def test_a_service_without_endpoints_keeps_one_placeholder_slice() -> None:
    plan = eb.plan_slices(service(), [], lambda n: NODE, [])
    [placeholder] = plan.create
    assert placeholder["endpoints"] == [] and placeholder["ports"] == []
    stored = {
        **placeholder,
        "metadata": {**placeholder["metadata"], "name": "web-abcde", "namespace": "default"},
    }
    assert eb.plan_slices(service(), [], lambda n: NODE, [stored]).empty
    # the first pod takes the placeholder over: it is written over, not replaced
    plan = eb.plan_slices(service(), [pod("a", "10.0.0.1")], lambda n: NODE, [stored])
    assert not plan.create and not plan.delete
    [updated] = plan.update
    assert updated["metadata"]["name"] == "web-abcde" and len(updated["endpoints"]) == 1


def test_a_pod_on_a_missing_node_is_skipped_with_an_error_unless_not_ready_addresses_are_published() -> None:
    plan = eb.plan_slices(service(), [pod("a", "10.0.0.1")], lambda n: None, [])
    assert plan.errors == ["skipping Pod a for Service default/web: Node node-a Not Found"]
    assert [s["endpoints"] for s in plan.create] == [[]]
    plan = eb.plan_slices(service(publishNotReadyAddresses=True), [pod("a", "10.0.0.1")], lambda n: None, [])
    assert not plan.errors and "zone" not in plan.create[0]["endpoints"][0]


def test_endpoints_over_1000_addresses_are_truncated_ready_ones_first() -> None:
    svc = service()
    ready = [pod(f"r{i:04}", f"10.1.{i // 250}.{i % 250 + 1}") for i in range(900)]
    not_ready = [pod(f"n{i:04}", f"10.2.{i // 250}.{i % 250 + 1}", ready=False) for i in range(300)]
    body = eb.desired_endpoints(svc, [*ready, *not_ready], None, None)
    assert body is not None
    assert len(ips(body["subsets"])) == 900 and len(ips(body["subsets"], "notReadyAddresses")) == 100
    assert body["metadata"]["annotations"] == {"endpoints.kubernetes.io/over-capacity": "truncated"}
    more_ready = [pod(f"r{i:04}", f"10.3.{i // 250}.{i % 250 + 1}") for i in range(1200)]
    body = eb.desired_endpoints(svc, more_ready, None, None)
    assert body is not None and len(ips(body["subsets"])) == 1000
    assert not ips(body["subsets"], "notReadyAddresses")
    # back under the cap, the annotation goes
    body["metadata"]["resourceVersion"] = "5"
    again = eb.desired_endpoints(svc, ready[:10], body, None)
    assert again is not None and "annotations" not in again["metadata"]
    assert len(ips(again["subsets"])) == 10


def test_endpoints_are_written_only_when_they_change() -> None:
    svc = service()
    pods = [pod("a", "10.0.0.1")]
    body = eb.desired_endpoints(svc, pods, None, 1746093600.0)
    assert body is not None
    assert body["metadata"]["labels"] == {
        "team": "a",
        "endpoints.kubernetes.io/managed-by": "endpoint-controller",
    }
    assert body["metadata"]["annotations"] == {
        "endpoints.kubernetes.io/last-change-trigger-time": "2025-05-01T10:00:00Z"
    }
    # as the API server keeps it: a pod resourceVersion in the reference changes nothing
    stored = {**body, "metadata": {**body["metadata"], "resourceVersion": "7"}}
    stored["subsets"][0]["addresses"][0]["targetRef"]["resourceVersion"] = "12"
    assert eb.desired_endpoints(svc, pods, stored, None) is None
    # a new label on the Service, or the pod turning unready, is written
    relabelled = {**svc, "metadata": {**svc["metadata"], "labels": {"team": "b"}}}
    assert eb.desired_endpoints(relabelled, pods, stored, None) is not None
    assert eb.desired_endpoints(svc, [pod("a", "10.0.0.1", ready=False)], stored, None) is not None


def test_the_trigger_time_is_the_service_creation_first_then_the_earliest_new_change() -> None:
    times = eb.TriggerTimes()
    svc = service()
    pods = [pod("a", "10.0.0.1")]
    assert eb.go_time(times.compute(svc, pods) or 0) == "2025-05-01T10:00:00Z"
    assert times.compute(svc, pods) is None  # nothing new
    later = pod("a", "10.0.0.1", ready=False)
    later["status"]["conditions"][0]["lastTransitionTime"] = "2025-05-01T10:07:30Z"
    assert eb.go_time(times.compute(svc, [later]) or 0) == "2025-05-01T10:07:30Z"
    assert eb.go_time(1746093600.25) == "2025-05-01T10:00:00.25Z"


def test_services_without_a_selector_or_external_names_get_nothing() -> None:
    assert not eb.has_selector(service(selector={}))
    assert not eb.has_selector(service(type="ExternalName"))
    assert eb.has_selector(service())


def test_which_services_a_pod_change_concerns() -> None:
    web, db = service("web"), service("db", selector={"app": "db"})
    before = pod("a", "10.0.0.1")
    before["metadata"]["resourceVersion"] = "1"
    assert eb.services_for_pod_change([web, db], None, before) == {("default", "web")}
    # an annotation changes nothing the endpoints show
    annotated = {
        **before,
        "metadata": {**before["metadata"], "resourceVersion": "2", "annotations": {"x": "y"}},
    }
    assert eb.services_for_pod_change([web, db], before, annotated) == set()
    # relabelled from web to db: both, as the pod leaves one and joins the other
    moved = {**before, "metadata": {**before["metadata"], "resourceVersion": "3", "labels": {"app": "db"}}}
    assert eb.services_for_pod_change([web, db], before, moved) == {("default", "web"), ("default", "db")}
    unready = pod("a", "10.0.0.1", ready=False)
    unready["metadata"]["resourceVersion"] = "4"
    assert eb.services_for_pod_change([web, db], before, unready) == {("default", "web")}


@pytest.mark.parametrize("controller", ["endpoints", "endpointslices"])
def test_a_pod_event_queues_only_the_services_that_select_in_its_namespace(controller: str) -> None:
    """Both controllers' pod handler: a Service without a selector (`default/kubernetes`) or in another
    namespace never counts the pod, so a pod's change queues nothing for it; one that selects the pod
    (here added after the first pod events) is queued when what the endpoints show changes, and when the
    pod stops being selected."""
    services = Informer(None, "services")  # type: ignore[arg-type]
    pods = Informer(None, "pods")  # type: ignore[arg-type]
    found: EndpointsController | EndpointSliceController = (
        EndpointsController(None, pods=pods, services=services)  # type: ignore[arg-type]
        if controller == "endpoints"
        else EndpointSliceController(None, pods=pods, nodes=Informer(None, "nodes"), services=services)  # type: ignore[arg-type]
    )
    queue = found.queue
    bare = service("kubernetes", selector={})
    elsewhere = service("web-b")
    elsewhere["metadata"]["namespace"] = "team-b"
    services.cache = {("default", "kubernetes"): bare, ("team-b", "web-b"): elsewhere}
    old, new = pod("p", "10.0.0.1", ready=False), pod("p", "10.0.0.1")
    old["metadata"]["resourceVersion"], new["metadata"]["resourceVersion"] = "1", "2"
    found._pod_changed("MODIFIED", new, old)
    found._pod_changed("ADDED", new, None)
    assert not queue._queued

    # the Service informer stores the new Service, then tells its handlers
    services.cache[("default", "web")] = service("web")
    found._service_changed("ADDED", service("web"), None)
    queue._queued.clear()
    found._pod_changed("MODIFIED", new, old)
    assert queue._queued == {("default", "web")}
    queue._queued.clear()
    unchanged = pod("p", "10.0.0.1")
    unchanged["metadata"]["resourceVersion"] = "3"
    found._pod_changed("MODIFIED", unchanged, new)  # nothing the endpoints show
    assert not queue._queued
    relabelled = pod("p", "10.0.0.1", labels={"app": "other"})
    relabelled["metadata"]["resourceVersion"] = "4"
    found._pod_changed("MODIFIED", relabelled, unchanged)
    assert queue._queued == {("default", "web")}

    # and when the Service goes, its pods' events queue nothing more
    queue._queued.clear()
    del services.cache[("default", "web")]
    found._service_changed("DELETED", service("web"), service("web"))
    queue._queued.clear()
    found._pod_changed("MODIFIED", new, relabelled)
    assert not queue._queued
