"""End to end: the default scheduler and the controller duties beside a tenant API server.

Driven through the official Python client, as a user of the tenant would; the services themselves
reach the API only over the wire.
"""

from __future__ import annotations

import time
from typing import Any

import kubernetes
import pytest
from apiserver_harness import BackgroundLoop, RunningAPIServer, wait_for

from tenantgpu.controlplane import ControlPlaneServices, NodeLifecycleController
from tenantgpu.kubeclient import KubeClient

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def core(apiserver: RunningAPIServer, services: ControlPlaneServices) -> kubernetes.client.CoreV1Api:
    api_client = kubernetes.config.new_client_from_config(str(apiserver.kubeconfig))
    return kubernetes.client.CoreV1Api(api_client)


def node_body(name: str, cpu: str, memory: str, *, taints: list[dict] | None = None) -> dict:
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": taints} if taints else {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now}
            ],
        },
    }


def renew_lease(core: kubernetes.client.CoreV1Api, apiserver: RunningAPIServer, node: str) -> None:
    coordination = kubernetes.client.CoordinationV1Api(core.api_client)
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    body = {
        "metadata": {"name": node, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": node, "renewTime": now, "leaseDurationSeconds": 40},
    }
    try:
        coordination.create_namespaced_lease("kube-node-lease", body)
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise
        coordination.patch_namespaced_lease(node, "kube-node-lease", {"spec": {"renewTime": now}})


def pod_body(name: str, cpu: str, *, scheduler: str | None = None, extra: dict | None = None) -> dict:
    container: dict[str, Any] = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    if extra:
        container["resources"]["limits"] = extra
    spec: dict[str, Any] = {"containers": [container]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"metadata": {"name": name}, "spec": spec}


def ensure_namespace(core: kubernetes.client.CoreV1Api, name: str) -> None:
    try:
        core.create_namespace({"metadata": {"name": name}})
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise


def test_default_service_account_appears_in_new_namespaces(core: kubernetes.client.CoreV1Api) -> None:
    ensure_namespace(core, "team-x")
    wait_for(
        "default SA",
        lambda: [
            sa for sa in core.list_namespaced_service_account("team-x").items if sa.metadata.name == "default"
        ],
    )


def test_pod_is_bound_to_the_least_allocated_node(
    core: kubernetes.client.CoreV1Api, apiserver: RunningAPIServer
) -> None:
    ensure_namespace(core, "sched")
    core.create_node(node_body("small", "2", "4Gi"))
    core.create_node(node_body("large", "16", "64Gi"))
    core.create_namespaced_pod("sched", pod_body("web", "500m"))
    pod = wait_for("binding", lambda: (p := core.read_namespaced_pod("web", "sched")).spec.node_name and p)
    assert pod.spec.node_name == "large"
    wait_for(
        "a Scheduled event",
        lambda: any(
            e.reason == "Scheduled" and "sched/web to large" in e.message
            for e in core.list_namespaced_event("sched", field_selector="involvedObject.name=web").items
        ),
    )


def test_pod_that_fits_nowhere_is_unschedulable_then_placed_when_a_node_appears(
    core: kubernetes.client.CoreV1Api,
) -> None:
    ensure_namespace(core, "big")
    core.create_namespaced_pod("big", pod_body("huge", "64"))

    def unschedulable() -> Any:
        pod = core.read_namespaced_pod("huge", "big")
        return [c for c in pod.status.conditions or [] if c.type == "PodScheduled" and c.status == "False"]

    condition = wait_for("PodScheduled=False", unschedulable)[0]
    assert condition.reason == "Unschedulable"
    assert "nodes are available" in condition.message and "Insufficient cpu" in condition.message
    # The event is a write of its own after the status: it may land a moment later.
    wait_for(
        "a FailedScheduling warning",
        lambda: any(
            e.reason == "FailedScheduling" and e.type == "Warning"
            for e in core.list_namespaced_event("big", field_selector="involvedObject.name=huge").items
        ),
    )

    core.create_node(node_body("giant", "128", "512Gi"))
    pod = wait_for(
        "binding to giant", lambda: (p := core.read_namespaced_pod("huge", "big")).spec.node_name and p
    )
    assert pod.spec.node_name == "giant"


def test_pods_naming_another_scheduler_are_left_alone(core: kubernetes.client.CoreV1Api) -> None:
    ensure_namespace(core, "other")
    core.create_namespaced_pod("other", pod_body("gpu", "100m", scheduler="hami-scheduler"))
    time.sleep(0.5)
    assert core.read_namespaced_pod("gpu", "other").spec.node_name is None


def test_taints_and_extended_resources_are_honoured(core: kubernetes.client.CoreV1Api) -> None:
    ensure_namespace(core, "ext")
    tainted = node_body(
        "gpu-node", "8", "16Gi", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    )
    tainted["status"]["allocatable"]["nvidia.com/gpu"] = "10"
    tainted["status"]["capacity"]["nvidia.com/gpu"] = "10"
    core.create_node(tainted)
    core.create_namespaced_pod("ext", pod_body("wants-gpu", "100m", extra={"nvidia.com/gpu": "1"}))

    def message() -> Any:
        pod = core.read_namespaced_pod("wants-gpu", "ext")
        return [
            c.message for c in pod.status.conditions or [] if c.type == "PodScheduled" and c.status == "False"
        ]

    # The scheduler may first judge the pod before its informer has seen the new node; the condition
    # is rewritten when the node arrives, so wait for the verdict that covers it.
    def covers_gpu_node() -> Any:
        return [m for m in message() if "untolerated taint" in m]

    text = wait_for("unschedulable on every node", covers_gpu_node)[0]
    assert "1 node(s) had untolerated taint {dedicated: gpu}" in text
    assert "Insufficient nvidia.com/gpu" in text


def test_silent_node_turns_unknown_and_unreachable(
    core: kubernetes.client.CoreV1Api, apiserver: RunningAPIServer, background_loop: BackgroundLoop
) -> None:
    async def start() -> tuple[KubeClient, NodeLifecycleController]:
        client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
        controller = NodeLifecycleController(client, grace_seconds=1.0, monitor_seconds=0.2)
        await controller.start()
        return client, controller

    client, controller = background_loop.run(start())
    try:
        _silent_node_scenario(core, apiserver)
    finally:

        async def stop() -> None:
            await controller.stop()
            await client.close()

        background_loop.run(stop())


def _silent_node_scenario(core: kubernetes.client.CoreV1Api, apiserver: RunningAPIServer) -> None:
    core.create_node(node_body("flaky", "4", "8Gi"))
    renew_lease(core, apiserver, "flaky")

    def unknown() -> Any:
        node = core.read_node("flaky")
        ready = [c for c in node.status.conditions if c.type == "Ready"]
        taints = {(t.key, t.effect) for t in node.spec.taints or []}
        return ready and ready[0].status == "Unknown" and taints and (node, ready[0], taints)

    _, ready, taints = wait_for("NotReady", unknown, timeout=10)
    assert ready.reason == "NodeStatusUnknown"
    assert taints == {
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
    }

    # The kubelet comes back: renews its lease and reports Ready; the taints go.
    renew_lease(core, apiserver, "flaky")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    core.patch_node_status(
        "flaky",
        {
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now}
                ]
            }
        },
    )
    wait_for("taints removed", lambda: not core.read_node("flaky").spec.taints, timeout=5)


def test_pods_of_a_silent_node_are_marked_not_ready_and_evicted_by_their_tolerations(
    core: kubernetes.client.CoreV1Api, background_loop: BackgroundLoop, apiserver: RunningAPIServer
) -> None:
    """Found by probing: pods of a node that went away stayed Ready and were never evicted. As
    kube-controller-manager: MarkPodsNotReady (Ready=False, a NodeNotReady event), then the taint
    eviction controller deletes each pod once its toleration of `unreachable:NoExecute` runs out (300 s
    by default, 1 s here), with a DisruptionTarget condition and a TaintManagerEviction event; a
    toleration without seconds keeps the pod."""

    async def start() -> tuple[KubeClient, NodeLifecycleController]:
        client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
        controller = NodeLifecycleController(client, grace_seconds=1.0, monitor_seconds=0.2)
        await controller.start()
        return client, controller

    ensure_namespace(core, "lost")
    core.create_node(node_body("gone", "4", "8Gi"))
    renew_lease(core, apiserver, "gone")
    tolerations = {
        "brief": [
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 1,
            }
        ],
        "forever": [{"operator": "Exists"}],
        "default": None,  # DefaultTolerationSeconds: 300 s
    }
    for name, toleration in tolerations.items():
        body = pod_body(name, "100m")
        body["spec"]["nodeName"] = "gone"
        if toleration:
            body["spec"]["tolerations"] = toleration
        core.create_namespaced_pod("lost", body)
        ready = {
            "type": "Ready",
            "status": "True",
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        core.patch_namespaced_pod_status(
            name, "lost", {"status": {"phase": "Running", "conditions": [ready]}}
        )
    client, controller = background_loop.run(start())
    try:

        def condition(pod: Any, kind: str) -> Any:
            return next((c for c in pod.status.conditions or [] if c.type == kind), None)

        def all_not_ready() -> bool:
            pods = core.list_namespaced_pod("lost").items
            return len(pods) == 3 and all(condition(p, "Ready").status == "False" for p in pods)

        wait_for("every pod not Ready", all_not_ready, timeout=10)
        evicted = wait_for(
            "the brief pod evicted",
            lambda: (p := core.read_namespaced_pod("brief", "lost")).metadata.deletion_timestamp and p,
            timeout=10,
        )
        target = condition(evicted, "DisruptionTarget")
        assert (target.status, target.reason) == ("True", "DeletionByTaintManager")
        events = {(e.reason, e.involved_object.name) for e in core.list_namespaced_event("lost").items}
        assert ("TaintManagerEviction", "brief") in events and ("NodeNotReady", "forever") in events
        time.sleep(1.0)  # longer than the brief pod's toleration: the others are still not due
        for name in ("forever", "default"):
            assert core.read_namespaced_pod(name, "lost").metadata.deletion_timestamp is None
    finally:

        async def stop() -> None:
            await controller.stop()
            await client.close()

        background_loop.run(stop())


def test_pods_of_a_deleted_node_are_removed(core: kubernetes.client.CoreV1Api) -> None:
    ensure_namespace(core, "gc")
    core.create_node(node_body("doomed", "4", "8Gi"))
    pod = pod_body("orphan", "100m")
    pod["spec"]["nodeName"] = "doomed"
    core.create_namespaced_pod("gc", pod)
    core.delete_node("doomed")
    wait_for(
        "orphan deleted",
        lambda: not [p for p in core.list_namespaced_pod("gc").items if p.metadata.name == "orphan"],
    )


def test_a_deleted_namespace_is_emptied_and_removed(core: kubernetes.client.CoreV1Api) -> None:
    ensure_namespace(core, "short-lived")
    wait_for(
        "its default service account",
        lambda: [
            a
            for a in core.list_namespaced_service_account("short-lived").items
            if a.metadata.name == "default"
        ],
    )
    core.create_namespaced_pod("short-lived", pod_body("unscheduled", "64", scheduler="nobody"))
    core.delete_namespace("short-lived")

    def gone() -> bool:
        try:
            core.read_namespace("short-lived")
        except kubernetes.client.ApiException as exc:
            return exc.status == 404
        return False

    wait_for("the namespace removed", gone)
    assert not core.list_namespaced_pod("short-lived").items


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def test_a_higher_priority_pod_preempts_what_it_needs_as_kube_scheduler_does(
    core: kubernetes.client.CoreV1Api,
) -> None:
    """DefaultPreemption: the fewest lower-priority pods go (DisruptionTarget condition, deletion, a
    `Preempted` event), the preemptor is nominated to their node and bound there once they are gone."""
    scheduling = kubernetes.client.SchedulingV1Api(core.api_client)
    for name, value in (("batch-low", 100), ("serving-high", 100000)):
        try:
            scheduling.create_priority_class(_priority_class(name, value))
        except kubernetes.client.ApiException as exc:
            if exc.status != 409:
                raise
    ensure_namespace(core, "arena")
    core.create_node(node_body("arena-node", "4", "16Gi"))
    pinned = {"nodeSelector": {"kubernetes.io/hostname": "arena-node"}}

    def pod(name: str, cpu: str, priority_class: str) -> dict[str, Any]:
        body = pod_body(name, cpu)
        body["spec"].update(pinned, priorityClassName=priority_class)
        return body

    for name in ("batch-1", "batch-2"):
        core.create_namespaced_pod("arena", pod(name, "2", "batch-low"))
        wait_for(f"{name} bound", lambda n=name: core.read_namespaced_pod(n, "arena").spec.node_name)

    # Too big even without the batch pods: nothing is preempted, and the message says why per node.
    core.create_namespaced_pod("arena", pod("too-big", "8", "serving-high"))

    def scheduled_condition(name: str) -> Any:
        conditions = core.read_namespaced_pod(name, "arena").status.conditions or []
        return next((c for c in conditions if c.type == "PodScheduled" and c.status == "False"), None)

    message = wait_for("too-big unschedulable", lambda: scheduled_condition("too-big")).message
    assert "preemption: 0/" in message and "1 Insufficient cpu" in message.split("preemption:")[1]
    core.delete_namespaced_pod("too-big", "arena", grace_period_seconds=0)

    vip = core.create_namespaced_pod("arena", pod("vip", "2", "serving-high"))
    nominated = wait_for(
        "vip nominated", lambda: core.read_namespaced_pod("vip", "arena").status.nominated_node_name
    )
    assert nominated == "arena-node"
    # one batch pod is enough to make room, so only one goes
    victims = [
        p for p in core.list_namespaced_pod("arena").items
        if p.metadata.name.startswith("batch") and p.metadata.deletion_timestamp
    ]  # fmt: skip
    assert len(victims) == 1
    victim = victims[0]
    (target,) = [c for c in victim.status.conditions if c.type == "DisruptionTarget"]
    assert (target.status, target.reason, target.message) == (
        "True",
        "PreemptionByScheduler",
        "default-scheduler: preempting to accommodate a higher priority pod",
    )
    wait_for(
        "a Preempted event on the victim",
        lambda: any(
            e.reason == "Preempted" and e.message == f"Preempted by pod {vip.metadata.uid} on node arena-node"
            for e in core.list_namespaced_event(
                "arena", field_selector=f"involvedObject.name={victim.metadata.name}"
            ).items
        ),
    )

    # kube's message for the attempt that preempted ends with the nodes' reasons, no dry run after it;
    # while the victim terminates, a retry may not preempt again
    def vip_failures() -> list[str]:
        events = core.list_namespaced_event("arena", field_selector="involvedObject.name=vip").items
        return [e.message for e in events if e.reason == "FailedScheduling"]

    wait_for("the preempting attempt's event", lambda: any("preemption" not in m for m in vip_failures()))
    assert all("Insufficient cpu" in m for m in vip_failures())
    waiting = wait_for("vip unschedulable", lambda: scheduled_condition("vip")).message
    assert (
        waiting.endswith("preemption: not eligible due to a terminating pod on the nominated node..")
        or "preemption" not in waiting
    )
    # No kubelet runs here: remove the victim as its kubelet would once its containers stopped.
    core.delete_namespaced_pod(victim.metadata.name, "arena", grace_period_seconds=0)
    bound = wait_for("vip bound", lambda: core.read_namespaced_pod("vip", "arena").spec.node_name)
    assert bound == "arena-node"
