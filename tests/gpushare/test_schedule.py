"""ClusterState.schedule decides as HAMi v2.10's Filter (scheduler/score.go, nvidia/device.go Fit)."""

import dataclasses

import pytest
from gpushare_objects import A100, container, gpu, gpu_pod, node, placed, pod, with_allocatable

from tenantgpu.gpushare import ClusterState, SharingConfig, mutate_pod
from tenantgpu.gpushare.device import DeviceUsage
from tenantgpu.gpushare.policy import ScoringWeights, device_score
from tenantgpu.gpushare.request import ContainerDeviceRequest

CFG = SharingConfig()
NODE_A = node("node-a", gpu("GPU-a100", mem=81920, model=A100))
NODE_B = node("node-b", gpu("GPU-l4-0", 0), gpu("GPU-l4-1", 1, numa=1))


def state(*nodes: dict, cfg: SharingConfig = CFG, pods: tuple = ()) -> ClusterState:
    s = ClusterState(cfg)
    for n in nodes:
        s.upsert_node(n)
    for p in pods:
        s.upsert_pod(p)
    return s


def admitted(p: dict) -> dict:
    return mutate_pod(p, CFG).pod


WORKED_POD = placed("old", "node-b", "GPU-l4-0,NVIDIA,10000,50:;")
NEW_POD = gpu_pod("new", mem=5000, cores=20)


# --- hami.md §3.3 worked example, as the v2.10 code computes it (see "Corrections") ---------------
def test_worked_example_node_scores() -> None:
    """policy/node_policy.go ComputeDefaultScore on pre-pod usage: B = 10*(1/20+50/200+10000/46068) = 5.17."""
    d = state(NODE_A, NODE_B, pods=(WORKED_POD,)).schedule(NEW_POD)
    assert round(d.node_scores["node-b"], 2) == 5.17
    assert d.node_scores["node-a"] == 0
    assert d.node == "node-b"  # binpack (default) takes the highest node score


def test_worked_example_device_scores_ignore_the_request() -> None:
    """policy/gpu_policy.go ComputeScore counts the request only if request.Type == device.Type;
    "NVIDIA" never equals a model name, so production scores are
    GPU0 = 10.34 and GPU1 = 0 (not 15.51 / 5.17)."""
    s = state(NODE_A, NODE_B, pods=(WORKED_POD,))
    devs = s.node_devices("node-b")
    req = ContainerDeviceRequest(1, "NVIDIA", 5000, 101, 20)
    assert [round(device_score(d, req, ScoringWeights()), 2) for d in devs] == [10.34, 0.0]
    # HAMi's unit tests register type "NVIDIA": then the request counts, giving the documented 15.51 / 5.17
    as_nvidia = [dataclasses.replace(d, type="NVIDIA") for d in devs]
    assert [round(device_score(d, req, ScoringWeights()), 2) for d in as_nvidia] == [15.51, 5.17]


def test_worked_example_gpu_policies() -> None:
    spread = state(NODE_A, NODE_B, pods=(WORKED_POD,)).schedule(NEW_POD)
    assert spread.annotation == "GPU-l4-1,NVIDIA,5000,20:;"
    binpack = state(NODE_A, NODE_B, cfg=dataclasses.replace(CFG, gpu_policy="binpack"), pods=(WORKED_POD,))
    assert binpack.schedule(NEW_POD).annotation == "GPU-l4-0,NVIDIA,5000,20:;"


def test_worked_example_node_spread_picks_the_empty_node() -> None:
    d = state(
        NODE_A, NODE_B, cfg=dataclasses.replace(CFG, node_policy="spread"), pods=(WORKED_POD,)
    ).schedule(NEW_POD)
    assert d.node == "node-a" and d.annotation == "GPU-a100,NVIDIA,5000,20:;"


def test_per_pod_policy_annotations_override_config() -> None:
    p = gpu_pod(
        "new",
        mem=5000,
        cores=20,
        annotations={"hami.io/node-scheduler-policy": "spread", "hami.io/gpu-scheduler-policy": "binpack"},
    )
    assert state(NODE_A, NODE_B, pods=(WORKED_POD,)).schedule(p).node == "node-a"
    only_b = state(NODE_B, pods=(WORKED_POD,))
    assert only_b.schedule(p).annotation == "GPU-l4-0,NVIDIA,5000,20:;"


def test_scheduled_annotations() -> None:
    d = state(NODE_B).schedule(NEW_POD)
    assert d.scheduled_annotations(1766199067) == {
        "hami.io/vgpu-node": "node-b",
        "hami.io/vgpu-time": "1766199067",
        "hami.io/vgpu-devices-to-allocate": d.annotation,
        "hami.io/vgpu-devices-allocated": d.annotation,
    }


def test_scheduled_patch_also_labels_the_pod() -> None:
    """pkg/util/util.go PatchPodAnnotations adds the label hami.io/vgpu-node beside the annotations."""
    d = state(NODE_B).schedule(NEW_POD)
    patch = d.scheduled_patch(7)
    assert patch["metadata"]["labels"] == {"hami.io/vgpu-node": "node-b"}
    assert patch["metadata"]["annotations"] == d.scheduled_annotations(7)
    assert state(NODE_B).schedule(gpu_pod("big", mem=10**6)).scheduled_patch(7) == {}


# --- Fit check order and reasons ------------------------------------------------------------------
def test_insufficient_memory_reason_counts_devices() -> None:
    d = state(NODE_A, NODE_B).schedule(gpu_pod("big", mem=30000, cores=10))
    assert d.node == "node-a"
    d = state(NODE_B).schedule(gpu_pod("big", mem=30000, cores=10))
    assert d.node is None and d.failed_nodes == {"node-b": "2/2 CardInsufficientMemory"}
    assert "CardInsufficientMemory" in (d.reason or "")


def test_exclusive_card_conflicts_with_any_user() -> None:
    """Fit: Totalcore==100 && Coresreq==100 && Used>0 -> ExclusiveDeviceAllocateConflict."""
    s = state(node("n", gpu("G0")), pods=(placed("small", "n", "G0,NVIDIA,1000,0:;"),))
    d = s.schedule(gpu_pod("exclusive", mem=100, cores=100))
    assert d.failed_nodes == {"n": "1/1 ExclusiveDeviceAllocateConflict"}
    # a bare whole card fails earlier in the check order, on memory
    assert s.schedule(admitted(gpu_pod("whole"))).failed_nodes == {"n": "1/1 CardInsufficientMemory"}


def test_full_cores_exhaust_zero_core_requests() -> None:
    """A 100-core tenant: others fail CardInsufficientCore, or CardComputeUnitsExhausted at 0 cores."""
    s = state(node("n", gpu("G0")), pods=(placed("whole", "n", "G0,NVIDIA,2000,100:;"),))
    assert s.schedule(gpu_pod("a", mem=10, cores=10)).failed_nodes == {"n": "1/1 CardInsufficientCore"}
    assert s.schedule(gpu_pod("b", mem=10, cores=0)).failed_nodes == {"n": "1/1 CardComputeUnitsExhausted"}


def test_time_slicing_exhausted_after_count_slots() -> None:
    pods = tuple(placed(f"p{i}", "n", "G0,NVIDIA,1,0:;") for i in range(3))
    s = state(node("n", gpu("G0", count=3)), pods=pods)
    assert s.schedule(gpu_pod("x", mem=1, cores=0)).failed_nodes == {"n": "1/1 CardTimeSlicingExhausted"}


def test_unhealthy_and_cordoned_cards() -> None:
    n = node(
        "n",
        gpu("G0", health=False),
        gpu("G1", 1),
        gpu("G2", 2),
        annotations={"hami.io/device-cordon": " G1 ,"},
    )
    d = state(n).schedule(gpu_pod("x", mem=10, cores=10))
    assert d.annotation == "G2,NVIDIA,10,10:;"
    d = state(n).schedule(gpu_pod("x", gpus=2, mem=10, cores=10))
    assert d.failed_nodes == {
        "n": "1/3 AllocatedCardsInsufficientRequest, 1/3 CardCordoned, 1/3 CardNotHealth"
    }


def test_type_selection_is_a_case_insensitive_substring() -> None:
    s = state(NODE_A, NODE_B)
    assert s.schedule(gpu_pod("x", mem=10, annotations={"nvidia.com/use-gputype": "a100"})).node == "node-a"
    d = s.schedule(gpu_pod("x", mem=10, annotations={"nvidia.com/nouse-gputype": "A100,L4"}))
    assert d.failed_nodes == {"node-a": "1/1 CardTypeMismatch", "node-b": "2/2 CardTypeMismatch"}
    # an empty value is no constraint: both nodes fit, equal scores, the first node wins
    assert s.schedule(gpu_pod("x", mem=10, annotations={"nvidia.com/use-gputype": ""})).node == "node-a"


def test_uuid_selection() -> None:
    s = state(NODE_A, NODE_B)
    d = s.schedule(gpu_pod("x", mem=10, annotations={"nvidia.com/use-gpuuuid": "GPU-l4-1"}))
    assert d.annotation == "GPU-l4-1,NVIDIA,10,0:;"
    assert d.failed_nodes == {"node-a": "1/1 CardUuidMismatch"}
    d = s.schedule(gpu_pod("x", mem=10, annotations={"nvidia.com/nouse-gpuuuid": "GPU-l4-0, GPU-a100"}))
    assert d.annotation == "GPU-l4-1,NVIDIA,10,0:;"


def test_multi_gpu_needs_distinct_cards() -> None:
    s = state(NODE_A, NODE_B)
    d = s.schedule(gpu_pod("x", gpus=2, mem=1000, cores=10))
    assert d.node == "node-b" and len(d.devices[0]) == 2  # type: ignore[index]
    assert d.failed_nodes == {"node-a": "NodeInsufficientDevice"}
    assert {c.uuid for c in d.devices[0]} == {"GPU-l4-0", "GPU-l4-1"}  # type: ignore[index]


def test_numa_bind_keeps_cards_on_one_numa_node() -> None:
    n = node("n", gpu("G0", 0, numa=0), gpu("G1", 1, numa=1), gpu("G2", 2, numa=1))
    p = gpu_pod("x", gpus=2, mem=10, cores=10, annotations={"nvidia.com/numa-bind": "true"})
    d = state(n).schedule(p)
    assert {c.uuid for c in d.devices[0]} == {"G1", "G2"}  # type: ignore[index]
    two_numas = node("m", gpu("G0", 0, numa=0), gpu("G1", 1, numa=1))
    d = state(two_numas).schedule(p)
    assert d.node is None and "NumaNotFit" in d.failed_nodes["m"]


def test_mutex_takes_only_idle_cards() -> None:
    cfg = dataclasses.replace(CFG, gpu_policy="mutex")
    s = state(NODE_B, cfg=cfg, pods=(placed("o", "node-b", "GPU-l4-1,NVIDIA,10,10:;"),))
    assert s.schedule(gpu_pod("x", mem=10, cores=10)).annotation == "GPU-l4-0,NVIDIA,10,10:;"
    s.upsert_pod(placed("o2", "node-b", "GPU-l4-0,NVIDIA,10,10:;"))
    assert s.schedule(gpu_pod("x", mem=10, cores=10)).failed_nodes == {
        "node-b": "2/2 ExclusiveDeviceAllocateConflict"
    }


def test_equal_scores_pick_the_first_node_and_lowest_index_card() -> None:
    s = state(node("n1", gpu("X0", 0), gpu("X1", 1)), node("n2", gpu("Y0", 0), gpu("Y1", 1)))
    d = s.schedule(gpu_pod("x", mem=10, cores=10))
    assert d.node == "n1" and d.annotation == "X0,NVIDIA,10,10:;"
    spread = state(
        node("n1", gpu("X0")), node("n2", gpu("Y0")), cfg=dataclasses.replace(CFG, node_policy="spread")
    )
    assert spread.schedule(gpu_pod("x", mem=10, cores=10)).node == "n1"


def test_device_scoring_weights() -> None:
    """hami.io/device-scoring-weights (PR #2469): memory-only weight: spread by memory alone."""
    s = state(
        NODE_B,
        pods=(
            placed("a", "node-b", "GPU-l4-0,NVIDIA,100,60:;"),
            placed("b", "node-b", "GPU-l4-1,NVIDIA,9000,0:;"),
        ),
    )
    assert s.schedule(gpu_pod("x", mem=10, cores=10)).annotation == "GPU-l4-1,NVIDIA,10,10:;"
    weighted = gpu_pod(
        "x", mem=10, cores=10, annotations={"hami.io/device-scoring-weights": "slot=0,core=0,memory=1"}
    )
    assert s.schedule(weighted).annotation == "GPU-l4-0,NVIDIA,10,10:;"
    bad = gpu_pod("x", mem=10, annotations={"hami.io/device-scoring-weights": "slot=1,core=1"})
    d = s.schedule(bad)
    assert d.node is None and "expected slot, core, and memory weights" in (d.reason or "")


def test_cores_above_100_are_clamped_in_fit() -> None:
    """device.go Fit: "core limit can't exceed 100" -> Coresreq = 100 (then the exclusive rule applies)."""
    d = state(NODE_A).schedule(gpu_pod("x", mem=10, cores=150))
    assert d.annotation == "GPU-a100,NVIDIA,10,100:;"


def test_percentage_resolves_on_each_card() -> None:
    d = state(NODE_A).schedule(gpu_pod("x", pct=50, cores=10))
    assert d.annotation == "GPU-a100,NVIDIA,40960,10:;"


def test_unregistered_and_malformed_nodes_fail() -> None:
    bad = node("bad")
    bad["metadata"]["annotations"]["hami.io/node-nvidia-register"] = "[{"
    d = state(node("plain"), bad).schedule(gpu_pod("x", mem=10))
    assert d.failed_nodes == {"plain": "node unregistered", "bad": "node unregistered"}


# --- containers, init containers ------------------------------------------------------------------
def test_gpu_less_container_leaves_no_segment_with_model_types() -> None:
    """score.go allocateAppContainers files placeholders under the device type strings; the NVIDIA key holds
    only real allocations, so with model names there is no empty segment."""
    p = pod(
        "x",
        container("side"),
        container("main", limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 30}),
    )
    assert state(node("n", gpu("G0"))).schedule(p).annotation == "G0,NVIDIA,1000,30:;"


def test_gpu_less_container_leaves_an_empty_segment_when_type_is_nvidia() -> None:
    """As in HAMi's unit tests, where devices register with Type "NVIDIA": `;UUID,NVIDIA,1000,30:;`."""
    p = pod(
        "x",
        container("side"),
        container("main", limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 30}),
    )
    assert state(node("n", gpu("G0", model="NVIDIA"))).schedule(p).annotation == ";G0,NVIDIA,1000,30:;"


def test_init_container_peak_is_not_added_to_app_usage() -> None:
    """Init containers fit on copies of the pre-pod usage; the pod holds max(init peak, app sum) per card."""
    init = [
        container("init", limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 20000, "nvidia.com/gpucores": 10})
    ]
    p = pod(
        "x",
        container(
            "main", limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 15000, "nvidia.com/gpucores": 10}
        ),
        init=init,
    )
    s = state(node("n", gpu("G0")))
    d = s.schedule(p)
    assert d.annotation == "G0,NVIDIA,20000,10:;G0,NVIDIA,15000,10:;"
    p["metadata"]["annotations"].update(d.scheduled_annotations(0))
    s.upsert_pod(p)
    [view] = s.node_usage("n")
    assert (view.used, view.usedmem, view.usedcores) == (1, 20000, 10)


def test_init_container_that_does_not_fit_fails_the_node() -> None:
    init = [container("init", limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 30000})]
    p = pod("x", container("main", limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10}), init=init)
    assert state(node("n", gpu("G0"))).schedule(p).failed_nodes == {"n": "1/1 CardInsufficientMemory"}


def test_two_gpu_containers_are_charged_cumulatively() -> None:
    c = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 15000, "nvidia.com/gpucores": 10}
    p = pod("x", container("a", limits=c), container("b", limits=c))
    d = state(NODE_B).schedule(p)
    # equal scores: lower NUMA sorts first and the tail scan tries GPU1 (NUMA 1) first
    assert d.annotation == "GPU-l4-1,NVIDIA,15000,10:;GPU-l4-0,NVIDIA,15000,10:;"


# --- usage from pods --------------------------------------------------------------------------------
def test_usage_comes_from_placed_pods_and_ends_with_them() -> None:
    s = state(NODE_B)
    s.upsert_pod(placed("p", "node-b", "GPU-l4-1,NVIDIA,5000,20:;"))
    s.upsert_pod(placed("p", "node-b", "GPU-l4-1,NVIDIA,5000,20:;"))  # idempotent
    assert [(v.used, v.usedmem, v.usedcores, v.pods) for v in s.node_usage("node-b")] == [
        (0, 0, 0, ()),
        (1, 5000, 20, ("default/p",)),
    ]
    s.upsert_pod(placed("p", "node-b", "GPU-l4-1,NVIDIA,5000,20:;", phase="Succeeded"))
    assert all(v.used == 0 for v in s.node_usage("node-b"))
    s.upsert_pod(placed("q", "node-b", "GPU-l4-0,NVIDIA,7,7:;"))
    s.remove_pod("default", "q")
    assert all(v.usedmem == 0 for v in s.node_usage("node-b"))


def test_malformed_device_annotation_is_skipped_like_hami() -> None:
    """scheduler.go onAddPod: DecodePodDevices fails -> log and return, the pod is not cached."""
    s = state(NODE_B)
    s.upsert_pod(placed("bad", "node-b", "GPU-l4-1,NVIDIA,lots,20:;"))
    assert all(v.used == 0 for v in s.node_usage("node-b"))


def test_pods_placed_before_their_node_arrives_still_count() -> None:
    s = ClusterState(CFG)
    s.upsert_pod(placed("p", "node-b", "GPU-l4-1,NVIDIA,5000,20:;"))
    s.upsert_node(NODE_B)
    assert s.node_usage("node-b")[1].usedmem == 5000


def test_schedule_ignores_the_pods_own_previous_allocation() -> None:
    s = state(node("n", gpu("G0")))
    p = admitted(gpu_pod("whole"))
    p["metadata"]["annotations"].update(s.schedule(p).scheduled_annotations(0))
    s.upsert_pod(p)
    assert s.schedule(p).node == "n"  # re-filter after a failed bind
    assert s.node_usage("n")[0].used == 1  # and the cache is as before


# --- quotas -----------------------------------------------------------------------------------------
def quota(ns: str, **hard: str) -> dict:
    return {
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu", "namespace": ns},
        "spec": {"hard": {f"limits.nvidia.com/{k}": v for k, v in hard.items()}},
    }


def test_namespace_quota_fails_devices_with_resource_quota_not_fit() -> None:
    s = state(NODE_B, pods=(placed("p", "node-b", "GPU-l4-0,NVIDIA,6000,10:;", namespace="team"),))
    s.upsert_quota(quota("team", gpumem="10000"))
    assert s.schedule(gpu_pod("x", mem=4000, namespace="team")).node == "node-b"
    d = s.schedule(gpu_pod("x", mem=4001, namespace="team"))
    assert d.failed_nodes == {"node-b": "2/2 ResourceQuotaNotFit"}
    assert s.schedule(gpu_pod("x", mem=4001, namespace="other")).node == "node-b"
    s.remove_quota("team", "gpu")
    assert s.schedule(gpu_pod("x", mem=4001, namespace="team")).node == "node-b"


def test_core_quota_zero_blocks_everything_with_cores() -> None:
    s = state(NODE_B)
    s.upsert_quota(quota("team", gpucores="0"))
    assert s.schedule(gpu_pod("x", mem=10, cores=1, namespace="team")).node is None
    assert s.schedule(gpu_pod("x", mem=10, cores=0, namespace="team")).node == "node-b"


# --- kube-scheduler basics ------------------------------------------------------------------------
def test_cpu_memory_and_pod_capacity() -> None:
    small = with_allocatable(node("small", gpu("S0")), cpu="2", memory="4Gi", pods="110")
    big = with_allocatable(node("big", gpu("B0")), cpu="64", memory="256Gi", pods="110")
    p = pod("x", container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10}, requests={"cpu": "4"}))
    d = state(small, big).schedule(p)
    assert d.node == "big" and d.failed_nodes == {"small": "Insufficient cpu"}
    p = pod("x", container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10, "memory": "8Gi"}))
    assert state(small).schedule(p).failed_nodes == {"small": "Insufficient memory"}
    one = with_allocatable(node("one", gpu("O0")), pods="1")
    s = state(one)
    s.upsert_pod(pod("running", nodeName="one"))
    assert s.schedule(gpu_pod("x", mem=10)).failed_nodes == {"one": "Too many pods"}


def test_selector_taints_and_unschedulable() -> None:
    tainted = node("tainted", gpu("T0"), taints=[{"key": "gpu", "value": "a100", "effect": "NoSchedule"}])
    cordoned = node("cordoned", gpu("C0"), unschedulable=True)
    labelled = node("labelled", gpu("L0"), labels={"pool": "gpu"})
    s = state(tainted, cordoned, labelled)
    d = s.schedule(gpu_pod("x", mem=10, nodeSelector={"pool": "gpu"}))
    assert d.node == "labelled"
    assert d.failed_nodes == {
        "tainted": "node(s) had untolerated taint {gpu: a100}",
        "cordoned": "node(s) were unschedulable",
    }
    d = s.schedule(gpu_pod("x", mem=10, nodeSelector={"pool": "cpu"}))
    assert d.failed_nodes["labelled"] == "node(s) didn't match Pod's node affinity/selector"
    tol = gpu_pod(
        "x",
        mem=10,
        nodeSelector={"pool": "cpu"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    assert "tainted" not in s.schedule(tol).failed_nodes or s.schedule(tol).failed_nodes[
        "tainted"
    ].startswith("node(s) didn't")


def test_pod_without_gpu_goes_to_the_first_node_that_passes_the_basics() -> None:
    s = state(node("cordoned", unschedulable=True), node("free"))
    d = s.schedule(pod("web"))
    assert d.node == "free" and not d.requests_gpu and d.annotation is None


@pytest.mark.parametrize("policy", ["spread", "binpack", "mutex", "binpack,numa", "numa", "mutex,spread"])
def test_every_policy_places_on_an_empty_node(policy: str) -> None:
    d = state(NODE_B, cfg=dataclasses.replace(CFG, gpu_policy=policy)).schedule(
        gpu_pod("x", mem=10, cores=10)
    )  # type: ignore[arg-type]
    assert d.node == "node-b"


def test_device_usage_helper_is_a_copy() -> None:
    s = state(NODE_B)
    devs = s.node_devices("node-b")
    devs[0].used = 99
    assert isinstance(devs[0], DeviceUsage) and s.node_usage("node-b")[0].used == 0


def test_vgpu_mode_must_contain_the_device_mode() -> None:
    """device.go checkType: nvidia.com/vgpu-mode must contain the device Mode, else CardTypeMismatch."""
    s = state(node("n", gpu("G0"), gpu("M0", 1, mode="mig")))
    assert s.schedule(gpu_pod("x", mem=10, annotations={"nvidia.com/vgpu-mode": "hami-core"})).annotation == (
        "G0,NVIDIA,10,0:;"
    )
    d = s.schedule(gpu_pod("x", mem=10, annotations={"nvidia.com/vgpu-mode": "mps"}))
    assert d.failed_nodes == {"n": "2/2 CardTypeMismatch"}


def test_core_scaling_lifts_the_exclusive_rule() -> None:
    """Fit's exclusive check needs Totalcore == 100; with deviceCoreScaling 2 a card has 200 cores."""
    s = state(node("n", gpu("G0", core=200)), pods=(placed("a", "n", "G0,NVIDIA,10,100:;"),))
    assert s.schedule(gpu_pod("x", mem=10, cores=100)).annotation == "G0,NVIDIA,10,100:;"


def test_memory_factor_scales_requests_and_quota_limits() -> None:
    """memoryFactor: gpumem x factor in the request; quota.go FitQuota multiplies the limit by it too."""
    cfg = dataclasses.replace(CFG, memory_factor=1024)
    s = state(node("n", gpu("G0", mem=81920)), cfg=cfg)
    s.upsert_quota(quota("t", gpumem="40"))  # 40 x 1024 MiB
    assert s.schedule(gpu_pod("x", mem=40, namespace="t")).annotation == "G0,NVIDIA,40960,0:;"
    assert s.schedule(gpu_pod("x", mem=41, namespace="t")).node is None
