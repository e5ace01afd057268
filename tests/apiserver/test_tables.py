"""Tables carry the cells `kubectl get` prints: READY, STATUS, RESTARTS, AGE, ROLES… computed as kube does."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tenantgpu.apiserver.tables import format_age, to_table, watch_event_table

NOW = datetime(2026, 11, 29, 20, 0, 0, tzinfo=UTC)


def ago(**delta: float) -> str:
    return (NOW - timedelta(**delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(seconds=-5), "<invalid>"),
        (timedelta(seconds=-0.5), "0s"),
        (timedelta(seconds=5), "5s"),
        (timedelta(seconds=119), "119s"),
        (timedelta(minutes=3, seconds=2), "3m2s"),
        (timedelta(minutes=5), "5m"),
        (timedelta(minutes=15, seconds=30), "15m"),
        (timedelta(hours=2, minutes=59), "179m"),
        (timedelta(hours=5, minutes=10), "5h10m"),
        (timedelta(hours=7), "7h"),
        (timedelta(hours=30), "30h"),
        (timedelta(days=2, hours=3), "2d3h"),
        (timedelta(days=4), "4d"),
        (timedelta(days=90, hours=5), "90d"),
        (timedelta(days=365 * 3 + 45), "3y45d"),
        (timedelta(days=365 * 10), "10y"),
    ],
)
def test_age_reads_like_kubectl(delta: timedelta, text: str) -> None:
    assert format_age(delta) == text


def pod(name: str = "web", **status: Any) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "creationTimestamp": ago(minutes=3, seconds=2),
            "uid": "u",
        },
        "spec": {"containers": [{"name": "app"}, {"name": "side"}]},
        "status": status,
    }


def cells(kind: str, obj: dict[str, Any]) -> list[Any]:
    return to_table(kind, [obj], now=NOW)["rows"][0]["cells"]


def running(name: str, restarts: int = 0, ready: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "ready": ready,
        "restartCount": restarts,
        "state": {"running": {"startedAt": ago(minutes=3)}},
    }


def test_pod_columns_and_a_running_pod() -> None:
    obj = pod(
        phase="Running",
        podIP="10.244.0.5",
        containerStatuses=[running("app"), running("side")],
        conditions=[{"type": "Ready", "status": "True"}],
    )
    obj["spec"]["nodeName"] = "worker-a1"
    table = to_table("Pod", [obj], now=NOW, resource_version="42")
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "42"}
    columns = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
    assert columns == [
        ("Name", 0),
        ("Ready", 0),
        ("Status", 0),
        ("Restarts", 0),
        ("Age", 0),
        ("IP", 1),
        ("Node", 1),
        ("Nominated Node", 1),
        ("Readiness Gates", 1),
    ]
    assert table["columnDefinitions"][0]["format"] == "name"
    assert table["rows"][0]["cells"] == [
        "web",
        "2/2",
        "Running",
        "0",
        "3m2s",
        "10.244.0.5",
        "worker-a1",
        "<none>",
        "<none>",
    ]
    assert table["rows"][0]["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"],
    }


def test_pending_unscheduled_pod() -> None:
    row = cells("Pod", pod(phase="Pending"))
    assert row[:5] == ["web", "0/2", "Pending", "0", "3m2s"]
    assert row[5:7] == ["<none>", "<none>"]


def test_container_creating_and_admission_error() -> None:
    waiting = {
        "name": "app",
        "ready": False,
        "restartCount": 0,
        "state": {"waiting": {"reason": "ContainerCreating"}},
    }
    assert cells("Pod", pod(phase="Pending", containerStatuses=[waiting]))[2] == "ContainerCreating"
    rejected = pod(phase="Failed", reason="UnexpectedAdmissionError", message="Allocate failed")
    table = to_table("Pod", [rejected], now=NOW)
    assert table["rows"][0]["cells"][2] == "UnexpectedAdmissionError"
    assert table["rows"][0]["conditions"][0]["reason"] == "Failed"


def test_completed_and_error_and_exit_codes() -> None:
    done = {"name": "app", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
    assert cells("Pod", pod(phase="Succeeded", containerStatuses=[done]))[2] == "Completed"
    failed = {"name": "app", "restartCount": 0, "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}
    assert cells("Pod", pod(phase="Failed", containerStatuses=[failed]))[2] == "Error"
    bare = {"name": "app", "restartCount": 0, "state": {"terminated": {"exitCode": 137}}}
    assert cells("Pod", pod(phase="Failed", containerStatuses=[bare]))[2] == "ExitCode:137"
    signal = {"name": "app", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "signal": 9}}}
    assert cells("Pod", pod(phase="Failed", containerStatuses=[signal]))[2] == "Signal:9"


def test_completed_sidecar_with_running_container_reads_running() -> None:
    done = {
        "name": "side",
        "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
    }
    obj = pod(
        phase="Running",
        containerStatuses=[running("app"), done],
        conditions=[{"type": "Ready", "status": "False"}],
    )
    assert cells("Pod", obj)[1:3] == ["1/2", "Running"]


def test_init_containers() -> None:
    obj = pod(
        phase="Pending", initContainerStatuses=[{"name": "init", "state": {"running": {}}, "restartCount": 0}]
    )
    obj["spec"]["initContainers"] = [{"name": "init"}]
    assert cells("Pod", obj)[2] == "Init:0/1"
    crashing = {"name": "init", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
    obj["status"]["initContainerStatuses"] = [crashing]
    assert cells("Pod", obj)[2:4] == ["Init:CrashLoopBackOff", "3"]
    failed = {"name": "init", "restartCount": 0, "state": {"terminated": {"exitCode": 2}}}
    obj["status"]["initContainerStatuses"] = [failed]
    assert cells("Pod", obj)[2] == "Init:ExitCode:2"


def test_restarts_show_how_long_ago() -> None:
    restarted = running("app", restarts=2)
    restarted["lastState"] = {"terminated": {"exitCode": 1, "finishedAt": ago(seconds=40)}}
    assert cells("Pod", pod(phase="Running", containerStatuses=[restarted]))[3] == "2 (40s ago)"


def test_terminating_and_readiness_gates() -> None:
    obj = pod(
        phase="Running",
        containerStatuses=[running("app")],
        conditions=[{"type": "www.example.com/gate", "status": "True"}],
    )
    obj["metadata"]["deletionTimestamp"] = ago(seconds=1)
    obj["spec"]["readinessGates"] = [{"conditionType": "www.example.com/gate"}, {"conditionType": "other"}]
    row = cells("Pod", obj)
    assert row[2] == "Terminating"
    assert row[8] == "1/2"


def test_scheduling_gated() -> None:
    obj = pod(
        phase="Pending", conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]
    )
    assert cells("Pod", obj)[2] == "SchedulingGated"


def node(ready: str | None = "True", **extra: Any) -> dict[str, Any]:
    conditions = (
        []
        if ready is None
        else [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]
    )
    obj = {
        "metadata": {
            "name": "worker-a1",
            "creationTimestamp": ago(days=2, hours=3),
            "labels": {
                "node-role.kubernetes.io/worker": "",
                "node-role.kubernetes.io/gpu": "",
                "kubernetes.io/role": "edge",
            },
        },
        "spec": {},
        "status": {
            "conditions": conditions,
            "nodeInfo": {
                "kubeletVersion": "v1.30.2",
                "osImage": "tenantgpu sim",
                "kernelVersion": "6.1",
                "containerRuntimeVersion": "sim://1",
            },
            "addresses": [
                {"type": "Hostname", "address": "worker-a1"},
                {"type": "InternalIP", "address": "127.0.0.1"},
            ],
        },
    }
    obj.update(extra)
    return obj


def test_node_row() -> None:
    assert cells("Node", node()) == [
        "worker-a1",
        "Ready",
        "edge,gpu,worker",
        "2d3h",
        "v1.30.2",
        "127.0.0.1",
        "<none>",
        "tenantgpu sim",
        "6.1",
        "sim://1",
    ]


@pytest.mark.parametrize(
    ("ready", "unschedulable", "status"),
    [
        ("True", True, "Ready,SchedulingDisabled"),
        ("False", False, "NotReady"),
        ("Unknown", False, "NotReady"),
        (None, True, "Unknown,SchedulingDisabled"),
    ],
)
def test_node_status(ready: str | None, unschedulable: bool, status: str) -> None:
    obj = node(ready, spec={"unschedulable": unschedulable})
    assert cells("Node", obj)[1] == status


def test_node_without_roles_or_info() -> None:
    bare = {"metadata": {"name": "n", "creationTimestamp": ago(seconds=5)}}
    assert cells("Node", bare) == [
        "n",
        "Unknown",
        "<none>",
        "5s",
        "",
        "<none>",
        "<none>",
        "<unknown>",
        "<unknown>",
        "<unknown>",
    ]


def test_event_row() -> None:
    event = {
        "metadata": {"name": "web.17", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
        "type": "Warning",
        "reason": "FailedScheduling",
        "message": " 0/1 nodes are available: 1 Insufficient nvidia.com/gpu. ",
        "firstTimestamp": ago(minutes=5),
        "lastTimestamp": ago(seconds=30),
        "count": 4,
        "source": {"component": "hami-scheduler"},
    }
    table = to_table("Event", [event], now=NOW)
    assert [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0] == [
        "Last Seen",
        "Type",
        "Reason",
        "Object",
        "Message",
    ]
    assert table["rows"][0]["cells"] == [
        "30s",
        "Warning",
        "FailedScheduling",
        "pod/web",
        "spec.containers{app}",
        "hami-scheduler",
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
        "5m",
        4,
        "web.17",
    ]


def test_new_style_event_with_event_time_and_no_count() -> None:
    event = {
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Node"},
        "eventTime": ago(seconds=8),
        "reportingComponent": "kubelet",
        "reportingInstance": "w1",
    }
    row = cells("Event", event)
    assert row[0] == "8s" and row[3] == "node" and row[5] == "kubelet, w1" and row[8] == 1


def test_small_kinds() -> None:
    created = ago(seconds=90)
    ns = {"metadata": {"name": "team-a", "creationTimestamp": created}, "status": {"phase": "Active"}}
    assert cells("Namespace", ns) == ["team-a", "Active", "90s"]
    lease = {
        "metadata": {"name": "hami-scheduler", "creationTimestamp": created},
        "spec": {"holderIdentity": "sched-1"},
    }
    assert cells("Lease", lease) == ["hami-scheduler", "sched-1", "90s"]
    secret = {
        "metadata": {"name": "admin-kubeconfig", "creationTimestamp": created},
        "type": "Opaque",
        "data": {"a": "", "b": ""},
    }
    assert cells("Secret", secret) == ["admin-kubeconfig", "Opaque", "2", "90s"]
    cm = {
        "metadata": {"name": "c", "creationTimestamp": created},
        "data": {"a": "1"},
        "binaryData": {"b": ""},
    }
    assert cells("ConfigMap", cm) == ["c", "2", "90s"]
    sa = {"metadata": {"name": "default", "creationTimestamp": created}}
    assert cells("ServiceAccount", sa) == ["default", "0", "90s"]
    mwc = {"metadata": {"name": "hami-webhook", "creationTimestamp": created}, "webhooks": [{}, {}]}
    assert cells("MutatingWebhookConfiguration", mwc) == ["hami-webhook", 2, "90s"]


def test_resource_quota_usage() -> None:
    quota = {
        "metadata": {"name": "gpu", "creationTimestamp": ago(seconds=10)},
        "spec": {"hard": {"requests.nvidia.com/gpu": "4", "limits.nvidia.com/gpumem": "8000", "pods": "10"}},
        "status": {
            "hard": {"requests.nvidia.com/gpu": "4", "limits.nvidia.com/gpumem": "8000", "pods": "10"},
            "used": {"pods": "3"},
        },
    }
    assert cells("ResourceQuota", quota) == [
        "gpu",
        "10s",
        "pods: 3/10, requests.nvidia.com/gpu: 0/4",
        "limits.nvidia.com/gpumem: 0/8000",
    ]


def test_services() -> None:
    svc = {
        "metadata": {"name": "hami-scheduler", "creationTimestamp": ago(seconds=10)},
        "spec": {
            "type": "NodePort",
            "clusterIP": "10.96.0.12",
            "ports": [{"port": 443, "nodePort": 31998, "protocol": "TCP"}, {"port": 9395}],
            "selector": {"b": "2", "a": "1"},
        },
    }
    assert cells("Service", svc) == [
        "hami-scheduler",
        "NodePort",
        "10.96.0.12",
        "<none>",
        "443:31998/TCP,9395/TCP",
        "10s",
        "a=1,b=2",
    ]
    lb = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": []}}
    assert cells("Service", lb)[2:5] == ["<none>", "<pending>", "<none>"]


def test_tenant_control_plane_uses_kamaji_printer_columns() -> None:
    tcp = {
        "metadata": {
            "name": "tenant-a",
            "namespace": "default",
            "creationTimestamp": ago(minutes=2, seconds=20),
        },
        "spec": {"kubernetes": {"version": "v1.30.2"}},
        "status": {
            "kubernetesResources": {"version": {"version": "v1.30.2", "status": "Ready"}},
            "controlPlaneEndpoint": "127.0.0.1:6443",
            "kubeconfig": {"admin": {"secretName": "tenant-a-admin-kubeconfig"}},
            "storage": {"dataStoreName": "default"},
        },
    }
    table = to_table("TenantControlPlane", [tcp], now=NOW)
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Version",
        "Installed Version",
        "Status",
        "Control-Plane endpoint",
        "Kubeconfig",
        "Datastore",
        "Age",
    ]
    assert table["rows"][0]["cells"] == [
        "tenant-a",
        "v1.30.2",
        "v1.30.2",
        "Ready",
        "127.0.0.1:6443",
        "tenant-a-admin-kubeconfig",
        "default",
        "2m20s",
    ]
    provisioning = {
        "metadata": {"name": "tenant-b", "creationTimestamp": ago(seconds=3)},
        "spec": {"kubernetes": {"version": "v1.30.2"}},
    }
    assert cells("TenantControlPlane", provisioning) == [
        "tenant-b",
        "v1.30.2",
        None,
        None,
        None,
        None,
        None,
        "3s",
    ]
    store = {
        "metadata": {"name": "default", "creationTimestamp": ago(seconds=3)},
        "spec": {"driver": "etcd"},
        "status": {"ready": True},
    }
    assert cells("DataStore", store) == ["default", "etcd", True, "3s"]


def test_unknown_kinds_get_kubes_default_table() -> None:
    obj = {"metadata": {"name": "x", "creationTimestamp": "2026-11-29T19:00:00Z"}}
    table = to_table("Widget", [obj], now=NOW)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Created At"]
    assert table["rows"][0]["cells"] == ["x", "2026-11-29T19:00:00Z"]


def test_include_object_modes() -> None:
    obj = pod(phase="Pending")
    assert to_table("Pod", [obj], now=NOW, include_object="Object")["rows"][0]["object"] == obj
    assert "object" not in to_table("Pod", [obj], now=NOW, include_object="None")["rows"][0]
    with pytest.raises(ValueError):
        to_table("Pod", [obj], now=NOW, include_object="All")


def test_missing_creation_time_reads_unknown() -> None:
    assert cells("Namespace", {"metadata": {"name": "x"}}) == ["x", "", "<unknown>"]


def test_watch_event_is_a_one_row_table() -> None:
    obj = pod(phase="Pending")
    obj["metadata"]["resourceVersion"] = "17"
    first = watch_event_table("ADDED", "Pod", obj, now=NOW, include_columns=True)
    assert first["type"] == "ADDED"
    assert first["object"]["kind"] == "Table"
    assert len(first["object"]["rows"]) == 1
    assert first["object"]["metadata"] == {"resourceVersion": "17"}
    assert "columnDefinitions" in first["object"]
    later = watch_event_table("MODIFIED", "Pod", obj, now=NOW)
    assert "columnDefinitions" not in later["object"]
    assert later["object"]["rows"][0]["cells"][0] == "web"
