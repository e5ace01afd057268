"""apps/v1 DaemonSets beside a tenant API server, through kubectl and the official client.

Nodes are registered through the API and no kubelet runs: a stand-in marks each bound pod Running and
Ready, as a kubelet would report it. What is checked is kube's DaemonSet controller (read in
kubernetes/kubernetes pkg/controller/daemon for these facts): one pod per node the pod fits, pinned by a
required node affinity on `metadata.name` and bound by the scheduler; the daemon tolerations (so a
cordoned node keeps its pod); ControllerRevisions and the `controller-revision-hash` label behind
`kubectl rollout history/undo`; RollingUpdate within maxUnavailable, OnDelete; failed pods replaced;
kube's validation messages; the delete cascading to pods and revisions. The running lab's GPU
DaemonSet is in test_running_lab.py.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from apiserver_harness import Kubectl, RunningAPIServer, StandInKubelet, wait_for
from test_controlplane_e2e import node_body

from tenantgpu.controlplane import ControlPlaneServices

pytestmark = pytest.mark.slow

NS = "default"


@pytest.fixture(scope="module")
def core(
    apiserver: RunningAPIServer, services: ControlPlaneServices
) -> Iterator[kubernetes.client.CoreV1Api]:
    """The official client, with three nodes and a stand-in kubelet marking bound pods Running and Ready."""
    api = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))
    for name in ("n1", "n2", "n3"):
        api.create_node(node_body(name, "8", "16Gi"))
    failing: set[str] = set()
    with StandInKubelet(api, NS, fails=lambda pod: (pod.metadata.labels or {}).get("app") in failing):
        api.failing_apps = failing  # type: ignore[attr-defined]
        yield api


@pytest.fixture(scope="module")
def apps(core: kubernetes.client.CoreV1Api) -> kubernetes.client.AppsV1Api:
    return kubernetes.client.AppsV1Api(core.api_client)


def daemon_set(name: str, image: str = "agent:1", **spec: Any) -> dict[str, Any]:
    template_spec = spec.pop("template_spec", {})
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}], **template_spec},
            },
            **spec,
        },
    }


def pods_of(core: kubernetes.client.CoreV1Api, app: str) -> list[Any]:
    return [
        p
        for p in core.list_namespaced_pod(NS, label_selector=f"app={app}").items
        if not p.metadata.deletion_timestamp
    ]


def running_on(core: kubernetes.client.CoreV1Api, app: str, nodes: set[str], image: str | None = None) -> Any:
    def probe() -> Any:
        pods = pods_of(core, app)
        placed = {p.spec.node_name for p in pods if p.status.phase == "Running"}
        images = {p.spec.containers[0].image for p in pods}
        if placed == nodes and len(pods) == len(nodes) and (image is None or images == {image}):
            return pods
        return None

    return probe


def test_one_pod_per_node_pinned_by_affinity_and_counted(
    core: kubernetes.client.CoreV1Api, apps: kubernetes.client.AppsV1Api, kubectl: Kubectl
) -> None:
    apps.create_namespaced_daemon_set(NS, daemon_set("agent"))
    pods = wait_for("a pod on each node", running_on(core, "agent", {"n1", "n2", "n3"}))
    for pod in pods:
        [term] = (
            pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
        )
        [field] = term.match_fields
        assert (field.key, field.operator, field.values) == ("metadata.name", "In", [pod.spec.node_name])
        keys = {(t.key, t.effect) for t in pod.spec.tolerations}
        assert ("node.kubernetes.io/unschedulable", "NoSchedule") in keys
        assert ("node.kubernetes.io/not-ready", "NoExecute") in keys
        assert pod.metadata.labels["pod-template-generation"] == "1"
        assert pod.metadata.owner_references[0].kind == "DaemonSet"
    status = wait_for(
        "the status",
        lambda: (s := apps.read_namespaced_daemon_set("agent", NS).status).number_available == 3 and s,
    )
    assert (status.desired_number_scheduled, status.current_number_scheduled, status.number_ready) == (
        3,
        3,
        3,
    )
    assert status.updated_number_scheduled == 3 and status.number_misscheduled == 0
    for version in ("1.27", "1.33"):
        table = kubectl("get", "ds", "agent", version=version).stdout.splitlines()
        assert table[0].split() == [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE",
            "SELECTOR",
            "AGE",
        ]
        assert table[1].split()[:7] == ["agent", "3", "3", "3", "3", "3", "<none>"]
    revisions = kubectl("get", "controllerrevisions").stdout
    assert "daemonset.apps/agent" in revisions


def test_node_selector_taints_and_cordons_decide_where_pods_run(
    core: kubernetes.client.CoreV1Api, apps: kubernetes.client.AppsV1Api, kubectl: Kubectl
) -> None:
    core.patch_node("n2", {"metadata": {"labels": {"gpu": "true"}}})
    apps.create_namespaced_daemon_set(
        NS, daemon_set("gpu-only", template_spec={"nodeSelector": {"gpu": "true"}})
    )
    wait_for("only the labelled node", running_on(core, "gpu-only", {"n2"}))
    assert "gpu=true" in kubectl("get", "ds", "gpu-only").stdout

    core.patch_node(
        "n3", {"spec": {"taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]}}
    )
    apps.create_namespaced_daemon_set(NS, daemon_set("polite"))
    wait_for("not on the tainted node", running_on(core, "polite", {"n1", "n2"}))
    # a cordoned node keeps and gets daemon pods: they tolerate node.kubernetes.io/unschedulable
    kubectl("cordon", "n1")
    core.patch_node("n3", {"spec": {"taints": None}})
    wait_for("the untainted node gets one too", running_on(core, "polite", {"n1", "n2", "n3"}))
    kubectl("uncordon", "n1")
    # the label goes away: its pod goes with it
    core.patch_node("n2", {"metadata": {"labels": {"gpu": None}}})
    wait_for("no node fits", lambda: pods_of(core, "gpu-only") == [] or None)
    for name in ("gpu-only", "polite"):
        apps.delete_namespaced_daemon_set(name, NS)


def test_a_new_node_gets_a_pod_and_a_failed_pod_is_replaced(
    core: kubernetes.client.CoreV1Api, apps: kubernetes.client.AppsV1Api
) -> None:
    core.create_node(node_body("n4", "8", "16Gi"))
    wait_for("the new node runs agent", running_on(core, "agent", {"n1", "n2", "n3", "n4"}))
    core.delete_node("n4")
    wait_for("its pod goes with it", running_on(core, "agent", {"n1", "n2", "n3"}))

    core.failing_apps.add("crashy")  # type: ignore[attr-defined]
    apps.create_namespaced_daemon_set(NS, daemon_set("crashy"))
    events = kubernetes.client.CoreV1Api(core.api_client)

    def replaced() -> Any:
        reasons = [
            e.reason
            for e in events.list_namespaced_event(NS, field_selector="involvedObject.name=crashy").items
        ]
        return (reasons.count("FailedDaemonPod") >= 3 and reasons.count("SuccessfulCreate") >= 6) or None

    wait_for("failed pods deleted and created again", replaced)
    core.failing_apps.discard("crashy")  # type: ignore[attr-defined]
    wait_for("running once it no longer fails", running_on(core, "crashy", {"n1", "n2", "n3"}))
    apps.delete_namespaced_daemon_set("crashy", NS)


def test_rolling_update_history_and_undo_with_kubectl(
    core: kubernetes.client.CoreV1Api, apps: kubernetes.client.AppsV1Api, kubectl: Kubectl
) -> None:
    old_hash = pods_of(core, "agent")[0].metadata.labels["controller-revision-hash"]
    seen_unavailable: list[int] = []
    stop = threading.Event()

    def watch_availability() -> None:
        while not stop.is_set():
            pods = pods_of(core, "agent")
            seen_unavailable.append(3 - sum(1 for p in pods if p.status.phase == "Running"))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch_availability, daemon=True)
    watcher.start()
    kubectl("set", "image", "ds/agent", "main=agent:2")
    out = kubectl("rollout", "status", "ds/agent", "--timeout=60s").stdout
    stop.set()
    watcher.join(5)
    assert 'daemon set "agent" successfully rolled out' in out
    pods = wait_for("agent:2 everywhere", running_on(core, "agent", {"n1", "n2", "n3"}, "agent:2"))
    new_hash = pods[0].metadata.labels["controller-revision-hash"]
    assert new_hash != old_hash and {p.metadata.labels["controller-revision-hash"] for p in pods} == {
        new_hash
    }
    assert max(seen_unavailable) <= 1, "maxUnavailable 1: one node at a time"
    # The new template is the DaemonSet's second: its pods carry that template generation.
    assert {p.metadata.labels["pod-template-generation"] for p in pods} == {"2"}

    history = kubectl("rollout", "history", "ds/agent").stdout.split()
    assert history[history.index("CHANGE-CAUSE") + 1 :: 2] == ["1", "2"]
    kubectl("rollout", "undo", "ds/agent")
    wait_for("agent:1 again", running_on(core, "agent", {"n1", "n2", "n3"}, "agent:1"))
    assert {p.metadata.labels["controller-revision-hash"] for p in pods_of(core, "agent")} == {old_hash}
    assert {p.metadata.labels["pod-template-generation"] for p in pods_of(core, "agent")} == {"3"}
    history = kubectl("rollout", "history", "ds/agent").stdout.split()
    assert history[history.index("CHANGE-CAUSE") + 1 :: 2] == ["2", "3"]  # the undone template is newest


def test_on_delete_replaces_only_deleted_pods(
    core: kubernetes.client.CoreV1Api, apps: kubernetes.client.AppsV1Api
) -> None:
    apps.create_namespaced_daemon_set(NS, daemon_set("manual", updateStrategy={"type": "OnDelete"}))
    pods = wait_for("manual everywhere", running_on(core, "manual", {"n1", "n2", "n3"}))
    apps.patch_namespaced_daemon_set(
        "manual", NS, {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "agent:9"}]}}}}
    )
    time.sleep(1)
    assert {p.spec.containers[0].image for p in pods_of(core, "manual")} == {"agent:1"}
    core.delete_namespaced_pod(pods[0].metadata.name, NS)

    def one_replaced() -> Any:
        images = sorted(
            p.spec.containers[0].image for p in pods_of(core, "manual") if p.status.phase == "Running"
        )
        return images == ["agent:1", "agent:1", "agent:9"] or None

    wait_for("only the deleted pod replaced, with the new template", one_replaced)
    status = wait_for(
        "status",
        lambda: (
            (s := apps.read_namespaced_daemon_set("manual", NS).status).updated_number_scheduled == 1 and s
        ),
    )
    assert status.desired_number_scheduled == 3


def test_validation_messages_and_cascading_delete(
    core: kubernetes.client.CoreV1Api, apps: kubernetes.client.AppsV1Api, kubectl: Kubectl
) -> None:
    bad = daemon_set("bad")
    bad["spec"]["selector"] = {}
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    bad["spec"]["updateStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1},
    }
    with pytest.raises(kubernetes.client.ApiException) as refused:
        apps.create_namespaced_daemon_set(NS, bad)
    body = json.loads(refused.value.body)
    messages = {c["field"]: c["message"] for c in body["details"]["causes"]}
    assert refused.value.status == 422 and body["message"].startswith('DaemonSet.apps "bad" is invalid')
    assert messages["spec.selector"].endswith("empty selector is invalid for daemonset")
    assert (
        messages["spec.template.spec.restartPolicy"]
        == 'Unsupported value: "Never": supported values: "Always"'
    )
    assert messages["spec.updateStrategy.rollingUpdate.maxSurge"] == (
        "Invalid value: 1: may not be set when maxUnavailable is non-zero"
    )

    kubectl("delete", "ds", "agent")
    wait_for("pods collected", lambda: pods_of(core, "agent") == [] or None)
    wait_for(
        "revisions collected", lambda: "agent" not in kubectl("get", "controllerrevisions").stdout or None
    )
