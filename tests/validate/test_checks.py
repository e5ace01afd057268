"""Each check's verdict and failure message against small fake clusters (the real wire is in tests/e2e)."""

from __future__ import annotations

import pytest

from tenantgpu.validate.checks import admission, isolation, nodes, planes, recovery, scheduling
from tenantgpu.validate.context import (
    CheckContext,
    DeclaredGPU,
    DeclaredNode,
    Expectations,
    RunSettings,
    Targets,
)
from tenantgpu.validate.outcome import CheckFailed, CheckSkipped, Outcome

from .fake import FakeCluster, node, register_json

A100 = ("GPU-a100", "NVIDIA A100-SXM4-80GB", 81920)
L4_0 = ("GPU-l4-0", "NVIDIA L4", 23034)
L4_1 = ("GPU-l4-1", "NVIDIA L4", 23034)


def _lab() -> tuple[FakeCluster, FakeCluster, Expectations]:
    a, b = FakeCluster("tenant-a"), FakeCluster("tenant-b")
    a.add("Node", node("worker-a1", register=register_json(A100)))
    b.add("Node", node("worker-b1", register=register_json(L4_0, L4_1)))
    expectations = Expectations(
        {
            "tenant-a": (DeclaredNode("worker-a1", (DeclaredGPU(*A100),)),),
            "tenant-b": (DeclaredNode("worker-b1", (DeclaredGPU(*L4_0), DeclaredGPU(*L4_1))),),
        }
    )
    return a, b, expectations


def _ctx(check: str, tenant: str | None, a: FakeCluster, b: FakeCluster, **kw) -> CheckContext:
    targets = Targets(
        {"tenant-a": a, "tenant-b": b}, kw.pop("management", None), kw.pop("expectations", None)
    )
    return CheckContext(targets, RunSettings(timeout_seconds=1.0, poll_seconds=0.01), check, tenant)


def _run(fn, ctx: CheckContext) -> Outcome:
    try:
        return fn(ctx)
    except (CheckFailed, CheckSkipped) as exc:
        return exc.outcome


def test_workers_joined_passes_on_exactly_the_declared_ready_nodes() -> None:
    a, b, exp = _lab()
    outcome = _run(nodes.workers_joined, _ctx("workers-joined", "tenant-a", a, b, expectations=exp))
    assert outcome.status == "passed", outcome.explain()
    assert "worker-a1" in outcome.detail


def test_workers_joined_names_a_missing_worker_and_a_foreign_one() -> None:
    a, b, exp = _lab()
    a.objects["Node"].clear()
    a.add("Node", node("worker-b1"))
    outcome = _run(nodes.workers_joined, _ctx("workers-joined", "tenant-a", a, b, expectations=exp))
    assert outcome.status == "failed"
    assert "missing worker-a1" in outcome.detail and "not this tenant's: worker-b1" in outcome.detail
    assert outcome.expected == "worker-a1" and outcome.seen == "worker-b1"
    assert outcome.command == "kubectl --kubeconfig /fake/tenant-a.kubeconfig get nodes -o wide"


def test_workers_joined_fails_on_a_stopped_worker() -> None:
    a, b, exp = _lab()
    a.add("Node", node("worker-a1", ready=False))
    outcome = _run(nodes.workers_joined, _ctx("workers-joined", "tenant-a", a, b, expectations=exp))
    assert outcome.status == "failed"
    assert outcome.seen == "worker-a1 NotReady"


def test_gpus_registered_compares_uuid_type_and_memory_with_the_lab() -> None:
    a, b, exp = _lab()
    ok = _run(nodes.gpus_registered, _ctx("gpus-registered", "tenant-b", a, b, expectations=exp))
    assert ok.status == "passed", ok.explain()
    b.add("Node", node("worker-b1", register=register_json(L4_0, ("GPU-l4-1", "NVIDIA L4", 16000))))
    bad = _run(nodes.gpus_registered, _ctx("gpus-registered", "tenant-b", a, b, expectations=exp))
    assert bad.status == "failed"
    assert "GPU-l4-1 registered as NVIDIA L4 16000MiB" in bad.detail
    assert "declared NVIDIA L4 23034MiB" in bad.detail


def test_gpus_registered_without_a_lab_needs_one_healthy_gpu() -> None:
    a, b, _ = _lab()
    assert _run(nodes.gpus_registered, _ctx("gpus-registered", "tenant-a", a, b)).status == "passed"
    a.add("Node", node("worker-a1"))
    outcome = _run(nodes.gpus_registered, _ctx("gpus-registered", "tenant-a", a, b))
    assert outcome.status == "failed" and "no node registers a healthy GPU" in outcome.detail


def test_tenant_control_plane_with_the_other_tenants_ca_fails() -> None:
    a = FakeCluster("tenant-a", ca="shared")
    b = FakeCluster("tenant-b", ca="shared")
    outcome = _run(planes.tenant_control_planes_ready, _ctx("tenant-control-planes-ready", "tenant-a", a, b))
    assert outcome.status == "failed"
    assert "same CA as tenant-b" in outcome.seen


def test_tenant_control_plane_that_does_not_answer_fails_with_the_error() -> None:
    a, b, _ = _lab()
    a.unreachable = "TLS: the server's certificate is not signed by the kubeconfig's CA"
    outcome = _run(planes.tenant_control_planes_ready, _ctx("tenant-control-planes-ready", "tenant-a", a, b))
    assert outcome.status == "failed"
    assert "not signed by the kubeconfig's CA" in outcome.seen
    assert outcome.command.endswith("version")


def test_management_plane_is_skipped_without_its_kubeconfig_and_checks_tcp_status() -> None:
    a, b, _ = _lab()
    assert _run(planes.management_plane_ready, _ctx("m", None, a, b)).status == "skipped"
    management = FakeCluster("management")
    for name, status in (("tenant-a", "Ready"), ("tenant-b", "NotReady")):
        tcp = {"metadata": {"name": name}, "status": {"kubernetesResources": {"version": {"status": status}}}}
        management.add("TenantControlPlane", tcp, "default")
    outcome = _run(planes.management_plane_ready, _ctx("m", None, a, b, management=management))
    assert outcome.status == "failed"
    assert outcome.seen == "default/tenant-b: NotReady"
    management.objects["TenantControlPlane"][("default", "tenant-b")]["status"]["kubernetesResources"][
        "version"
    ]["status"] = "Ready"
    assert (
        _run(planes.management_plane_ready, _ctx("m", None, a, b, management=management)).status == "passed"
    )


def _hami(uuid_for: dict[str, str], env_override: dict[str, str] | None = None):
    """Plays webhook + scheduler + device plugin: mutates, places on `uuid_for[pod]`, runs, logs the env."""

    def on_create(cluster: FakeCluster, pod: dict) -> None:
        pod["spec"]["schedulerName"] = "hami-scheduler"
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        mem, cores = limits.get("nvidia.com/gpumem", "0"), limits.get("nvidia.com/gpucores", "0")
        uuid = uuid_for.get(pod["metadata"]["name"], "GPU-l4-0")
        pod["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = f"{uuid},NVIDIA,{mem},{cores}:;"
        pod["spec"]["nodeName"] = "worker-b1"
        pod["status"] = {"phase": "Running"}
        env = {"CUDA_DEVICE_MEMORY_LIMIT_0": f"{mem}m", "CUDA_DEVICE_SM_LIMIT": cores, **(env_override or {})}
        log = "\n".join(f"{k}={v}" for k, v in env.items())
        cluster.logs[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = log

    return on_create


def test_fractional_scheduling_passes_when_slices_share_a_card_and_see_their_limits() -> None:
    a, b, _ = _lab()
    b.on_create_pod = _hami({"slice-1": "GPU-l4-1", "slice-2": "GPU-l4-1"})
    outcome = _run(scheduling.fractional_scheduling, _ctx("fractional-scheduling", "tenant-b", a, b))
    assert outcome.status == "passed", outcome.explain()
    assert "share GPU-l4-1 on worker-b1" in outcome.detail
    # its namespace is gone afterwards
    assert not b.list("Namespace")


def test_fractional_scheduling_fails_when_the_slices_land_on_two_cards() -> None:
    a, b, _ = _lab()
    b.on_create_pod = _hami({"slice-1": "GPU-l4-0", "slice-2": "GPU-l4-1"})
    outcome = _run(scheduling.fractional_scheduling, _ctx("fractional-scheduling", "tenant-b", a, b))
    assert outcome.status == "failed"
    assert outcome.detail == "the slices did not share one physical GPU"
    assert outcome.seen == "slice-1 on GPU-l4-0, slice-2 on GPU-l4-1"


def test_fractional_scheduling_fails_when_the_env_is_missing() -> None:
    a, b, _ = _lab()
    b.on_create_pod = _hami({}, env_override={"CUDA_DEVICE_SM_LIMIT": "<unset>"})
    outcome = _run(scheduling.fractional_scheduling, _ctx("fractional-scheduling", "tenant-b", a, b))
    assert outcome.status == "failed"
    assert "does not see the limits it asked for" in outcome.detail
    assert "CUDA_DEVICE_SM_LIMIT=20" in outcome.expected and "CUDA_DEVICE_SM_LIMIT=<unset>" in outcome.seen


def test_webhook_through_tunnel_fails_when_the_pod_comes_back_unmutated() -> None:
    a, b, _ = _lab()
    outcome = _run(admission.webhook_through_tunnel, _ctx("webhook-through-tunnel", "tenant-a", a, b))
    assert outcome.status == "failed"
    assert outcome.expected == "schedulerName hami-scheduler"
    assert outcome.seen == "schedulerName default-scheduler; webhooks: no HAMi webhook configured"
    assert [kind for kind, _, _ in a.deleted if kind == "Namespace"] == ["Namespace"]  # cleaned up


def test_webhook_through_tunnel_passes_when_mutated() -> None:
    a, b, _ = _lab()
    a.on_create_pod = _hami({})
    assert (
        _run(admission.webhook_through_tunnel, _ctx("webhook-through-tunnel", "tenant-a", a, b)).status
        == "passed"
    )


def test_pending_pod_that_gets_placed_fails_the_oversize_check() -> None:
    a, b, _ = _lab()
    a.on_create_pod = _hami({})
    outcome = _run(scheduling.oversize_request_pending, _ctx("oversize-request-pending", "tenant-a", a, b))
    assert outcome.status == "failed"
    assert "was placed although it should not fit" in outcome.detail
    assert outcome.expected == "Pending with CardInsufficientMemory"


def test_oversize_passes_on_the_hami_reason() -> None:
    a, b, _ = _lab()

    def unschedulable(cluster: FakeCluster, pod: dict) -> None:
        pod["status"]["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 CardInsufficientMemory.",
            }
        ]

    a.on_create_pod = unschedulable
    outcome = _run(scheduling.oversize_request_pending, _ctx("oversize-request-pending", "tenant-a", a, b))
    assert outcome.status == "passed", outcome.explain()
    assert "81921 MiB" in outcome.detail


def test_isolation_names_what_leaks() -> None:
    a, b, _ = _lab()
    assert _run(isolation.tenant_isolation, _ctx("tenant-isolation", "tenant-a", a, b)).status == "passed"
    shared = b.list("Node")[0]
    a.add("Node", shared)
    b.accepts_foreign_credentials = True
    outcome = _run(isolation.tenant_isolation, _ctx("tenant-isolation", "tenant-a", a, b))
    assert outcome.status == "failed"
    assert "sees tenant-b's nodes worker-b1" in outcome.seen
    assert "GPUs GPU-l4-0, GPU-l4-1" in outcome.seen
    assert "its credentials work against tenant-b's API server" in outcome.seen


def test_isolation_alone_is_skipped() -> None:
    a = FakeCluster("tenant-a")
    ctx = CheckContext(Targets({"tenant-a": a}), RunSettings(), "tenant-isolation", "tenant-a")
    outcome = _run(isolation.tenant_isolation, ctx)
    assert outcome.status == "skipped" and "only one tenant" in outcome.detail


@pytest.mark.parametrize(
    "fn", [recovery.scheduler_recovers, admission.webhook_unreachable_behaviour], ids=["scheduler", "webhook"]
)
def test_lab_control_checks_are_skipped_on_a_cluster_without_lab_control(fn) -> None:
    a, b, _ = _lab()
    outcome = _run(fn, _ctx("x", "tenant-a", a, b))
    assert outcome.status == "skipped"
    assert "ConfigMap kube-system/tenantgpu-lab-control" in outcome.detail


def _lab_control(cluster: FakeCluster, components: dict[str, str]) -> dict[str, str]:
    """A ConfigMap the fake 'lab' honours at once; returns the live state dict."""
    live = dict(components)
    data = {f"{c}.observed": s for c, s in live.items()}
    cluster.add("ConfigMap", {"metadata": {"name": "tenantgpu-lab-control"}, "data": data}, "kube-system")
    original = cluster.patch

    def patch(kind, name, body, namespace=None):
        result = original(kind, name, body, namespace)
        if kind == "ConfigMap":
            for key, value in body["data"].items():
                component = key.removesuffix(".desired")
                live[component] = value
                cluster.objects["ConfigMap"][("kube-system", name)]["data"][f"{component}.observed"] = value
                if component == "hami-scheduler" and value == "running":
                    for pod in cluster.objects.get("Pod", {}).values():
                        pod["spec"]["nodeName"] = "worker-a1"
                        pod["status"] = {"phase": "Running"}
        return result

    cluster.patch = patch  # type: ignore[method-assign]
    return live


def test_scheduler_recovers_places_pods_once_the_scheduler_is_back() -> None:
    a, b, _ = _lab()
    live = _lab_control(a, {"hami-scheduler": "running"})

    def webhook_only(cluster: FakeCluster, pod: dict) -> None:
        pod["spec"]["schedulerName"] = "hami-scheduler"
        if live["hami-scheduler"] == "running":
            pod["spec"]["nodeName"] = "worker-a1"
            pod["status"] = {"phase": "Running"}

    a.on_create_pod = webhook_only
    outcome = _run(recovery.scheduler_recovers, _ctx("scheduler-recovers", "tenant-a", a, b))
    assert outcome.status == "passed", outcome.explain()
    assert live["hami-scheduler"] == "running"


def test_scheduler_recovers_fails_if_pods_are_placed_while_it_is_stopped() -> None:
    a, b, _ = _lab()
    live = _lab_control(a, {"hami-scheduler": "running"})
    a.on_create_pod = _hami({})
    outcome = _run(recovery.scheduler_recovers, _ctx("scheduler-recovers", "tenant-a", a, b))
    assert outcome.status == "failed"
    assert "was placed while the scheduler was stopped" in outcome.detail
    assert live["hami-scheduler"] == "running"  # restored even though the check failed


def test_gpu_type_selection_fails_when_the_pod_lands_on_another_type() -> None:
    a, b, _ = _lab()
    b.add("Node", node("worker-b1", register=register_json(L4_0, ("GPU-t4", "Tesla T4", 15360))))
    b.on_create_pod = _hami({"typed": "GPU-t4"})
    outcome = _run(scheduling.gpu_type_selection, _ctx("gpu-type-selection", "tenant-b", a, b))
    assert outcome.status == "failed"
    assert "absent-type was placed although it should not fit" in outcome.detail  # the fake ignores types
    assert outcome.expected == "Pending with CardTypeMismatch"
    b.on_create_pod = _hami({"typed": "GPU-l4-0"})
    outcome = _run(scheduling.gpu_type_selection, _ctx("gpu-type-selection", "tenant-b", a, b))
    assert outcome.status == "failed"
    assert outcome.detail == "the pod asking for Tesla T4 got another GPU type"
    assert outcome.seen == "NVIDIA L4"


def test_no_lock_contention_fails_on_a_lock_left_behind() -> None:
    a, b, _ = _lab()
    a.on_create_pod = _hami({})
    a.objects["Node"][(None, "worker-a1")]["metadata"]["annotations"]["hami.io/mutex.lock"] = (
        "2026-11-29T19:00:00Z,ns,pod"
    )
    outcome = _run(scheduling.no_lock_contention, _ctx("no-lock-contention", "tenant-a", a, b))
    assert outcome.status == "failed"
    assert "no hami.io/mutex.lock left on worker-a1" in outcome.detail
    assert outcome.seen == "hami.io/mutex.lock=2026-11-29T19:00:00Z,ns,pod"
    del a.objects["Node"][(None, "worker-a1")]["metadata"]["annotations"]["hami.io/mutex.lock"]
    outcome = _run(scheduling.no_lock_contention, _ctx("no-lock-contention", "tenant-a", a, b))
    assert outcome.status == "passed", outcome.explain()
    assert outcome.detail.startswith("6 GPU pods on worker-a1 all Running")


def test_quota_refused_at_admission_passes_and_a_second_running_pod_fails() -> None:
    from tenantgpu.validate.checks import quota
    from tenantgpu.validate.cluster import ApiError

    a, b, _ = _lab()
    place = _hami({})

    def webhook_quota(cluster: FakeCluster, pod: dict) -> None:
        if pod["metadata"]["name"] == "beyond":
            del cluster.objects["Pod"][(pod["metadata"]["namespace"], "beyond")]
            raise ApiError(
                403,
                "Forbidden",
                'admission webhook "vgpu.hami.io" denied the request: exceeding resource quota',
            )
        place(cluster, pod)

    a.on_create_pod = webhook_quota
    outcome = _run(quota.quota_enforced, _ctx("quota-enforced", "tenant-a", a, b))
    assert outcome.status == "passed", outcome.explain()
    assert "refused at admission" in outcome.detail
    a.on_create_pod = place
    outcome = _run(quota.quota_enforced, _ctx("quota-enforced", "tenant-a", a, b))
    assert outcome.status == "failed"
    assert "beyond was placed although it should not fit" in outcome.detail


def test_webhook_unreachable_behaviour_with_lab_control() -> None:
    a, b, _ = _lab()
    a.add(
        "MutatingWebhookConfiguration",
        {
            "metadata": {"name": "hami-webhook"},
            "webhooks": [
                {
                    "name": "vgpu.hami.io",
                    "failurePolicy": "Ignore",
                    "clientConfig": {"service": {"name": "hami-scheduler"}},
                }
            ],
        },
    )
    live = _lab_control(a, {"konnectivity-agent": "running"})
    mutate = _hami({})

    def webhook_via_tunnel(cluster: FakeCluster, pod: dict) -> None:
        if live["konnectivity-agent"] == "running":
            mutate(cluster, pod)

    a.on_create_pod = webhook_via_tunnel
    outcome = _run(
        admission.webhook_unreachable_behaviour, _ctx("webhook-unreachable-behaviour", "tenant-a", a, b)
    )
    assert outcome.status == "passed", outcome.explain()
    assert "admitted unmutated (schedulerName default-scheduler, failurePolicy Ignore)" in outcome.detail
    a.on_create_pod = mutate  # a lab whose "stopped" agent still carries webhook calls
    outcome = _run(
        admission.webhook_unreachable_behaviour, _ctx("webhook-unreachable-behaviour", "tenant-a", a, b)
    )
    assert outcome.status == "failed"
    assert outcome.detail == "the pod was mutated although the tunnel agent was stopped"
    assert live["konnectivity-agent"] == "running"


def test_gpus_registered_checks_the_split_count_against_the_lab() -> None:
    a, b, exp = _lab()
    a.add("Node", node("worker-a1", register=register_json(A100).replace('"count": 10', '"count": 4')))
    outcome = _run(nodes.gpus_registered, _ctx("gpus-registered", "tenant-a", a, b, expectations=exp))
    assert outcome.status == "failed"
    assert "registered with count 4, the lab's deviceSplitCount is 10" in outcome.detail


def test_gpu_checks_are_skipped_for_a_tenant_the_lab_gives_no_gpu() -> None:
    a, b, exp = _lab()
    cpu_only = Expectations({**exp.nodes, "tenant-a": (DeclaredNode("worker-a1", ()),)})
    outcome = _run(scheduling.exclusive_card, _ctx("exclusive-card", "tenant-a", a, b, expectations=cpu_only))
    assert outcome.status == "skipped"
    assert outcome.detail == "the lab declares no GPU for tenant tenant-a"


def _holder(name: str, uuid: str, phase: str = "Running") -> dict:
    """Somebody else's pod holding a slice of `uuid`, as HAMi annotates it."""
    return {
        "metadata": {
            "name": name,
            "annotations": {"hami.io/vgpu-devices-allocated": f"{uuid},NVIDIA,4000,20:;"},
        },
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": phase},
    }


def _whole_card_hami(pinned: list[str]):
    """Places the whole-card pod on the card it is pinned to and keeps the pinned slice Pending."""

    def on_create(cluster: FakeCluster, pod: dict) -> None:
        pod["spec"]["schedulerName"] = "hami-scheduler"
        uuid = pod["metadata"]["annotations"]["nvidia.com/use-gpuuuid"]
        pinned.append(uuid)
        if pod["metadata"]["name"] == "whole-card":
            pod["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = f"{uuid},NVIDIA,23034,100:;"
            pod["status"] = {"phase": "Running"}
        else:
            pod["status"]["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 CardInsufficientMemory.",
                }
            ]

    return on_create


def test_exclusive_card_takes_a_card_no_other_pod_holds() -> None:
    a, b, exp = _lab()
    b.add("Pod", _holder("inference", "GPU-l4-0"), "team-x")
    b.add("Pod", _holder("finished", "GPU-l4-1", phase="Succeeded"), "team-x")  # holds nothing any more
    pinned: list[str] = []
    b.on_create_pod = _whole_card_hami(pinned)
    outcome = _run(scheduling.exclusive_card, _ctx("exclusive-card", "tenant-b", a, b, expectations=exp))
    assert outcome.status == "passed", outcome.explain()
    assert pinned == ["GPU-l4-1", "GPU-l4-1"]
    assert "whole-card pod holds GPU-l4-1" in outcome.detail


@pytest.mark.parametrize(
    ("fn", "check"),
    [(scheduling.exclusive_card, "exclusive-card"), (scheduling.capacity_freed, "capacity-freed")],
)
def test_whole_card_checks_are_skipped_when_every_card_has_pods(fn, check: str) -> None:
    a, b, exp = _lab()
    a.add("Pod", _holder("slice", "GPU-a100"), "default")
    created: list[str] = []
    a.on_create_pod = lambda cluster, pod: created.append(pod["metadata"]["name"])
    outcome = _run(fn, _ctx(check, "tenant-a", a, b, expectations=exp))
    assert outcome.status == "skipped"
    assert outcome.detail == (
        "needs an idle GPU, and every GPU of tenant tenant-a has pods on it: GPU-a100 by default/slice"
    )
    assert created == []  # nothing was started on the busy card
