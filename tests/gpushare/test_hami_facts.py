"""Facts read in HAMi v2.10.0's source, pinned one per test (each docstring names the upstream file)."""

from gpushare_objects import gpu, gpu_pod, node, placed

from tenantgpu.gpushare import ClusterState, SharingConfig
from tenantgpu.gpushare.device import DeviceUsage
from tenantgpu.gpushare.nvidia import type_allowed, uuid_allowed
from tenantgpu.gpushare.policy import sort_devices
from tenantgpu.gpushare.reasons import gen_reason, parse_reason


def dev(index: int, numa: int = 0, used: int = 0) -> DeviceUsage:
    return DeviceUsage(f"G{index}", index, 10, 1000, 100, "NVIDIA L4", numa, "hami-core", True, used=used)


def tried_first(order: list[int]) -> int:
    return order[-1]  # Fit scans the sorted list from its end


def test_gen_reason_sorts_entries_as_strings() -> None:
    """pkg/device/common/common.go GenReason: fmt "%d/%d %s", sort.Strings, joined by ", "."""
    text = gen_reason({"CardInsufficientMemory": 2, "CardCordoned": 10, "CardNotHealth": 1}, 13)
    assert text == "1/13 CardNotHealth, 10/13 CardCordoned, 2/13 CardInsufficientMemory"
    assert parse_reason(text) == {"CardNotHealth": 1, "CardCordoned": 10, "CardInsufficientMemory": 2}
    assert parse_reason("NodeInsufficientDevice") == {}


def test_spread_equal_scores_try_the_higher_numa_first() -> None:
    """pkg/scheduler/policy/gpu_policy.go Less: score primary, NUMA ascending as tie-break (#1806)."""
    devices = [dev(0, numa=1), dev(1, numa=0)]
    assert tried_first(sort_devices(devices, [0.0, 0.0], "spread", False)) == 0
    assert tried_first(sort_devices(devices, [0.0, 0.0], "binpack", False)) == 0


def test_numa_bind_group_order_differs_by_policy() -> None:
    """gpu_policy.go Less with NumaBind: spread keeps lower NUMA first (tail tries the highest NUMA group),
    binpack puts higher NUMA first (tail tries the lowest NUMA group)."""
    devices = [dev(0, numa=0), dev(1, numa=1)]
    assert devices[tried_first(sort_devices(devices, [1.0, 1.0], "spread", True))].numa == 1
    assert devices[tried_first(sort_devices(devices, [1.0, 1.0], "binpack", True))].numa == 0


def test_chained_policy_ends_in_the_index_tie_break() -> None:
    """gpu_policy.go lessByChain: keys in written order, then Index ascending (so the tail is the highest)."""
    devices = [dev(0), dev(1), dev(2)]
    assert tried_first(sort_devices(devices, [0.0, 0.0, 0.0], "binpack,numa", False)) == 2
    assert tried_first(sort_devices(devices, [3.0, 1.0, 2.0], "binpack,numa", False)) == 0
    # "mutex,spread": mutex is only a filter; spread orders
    assert tried_first(sort_devices(devices, [3.0, 1.0, 2.0], "mutex,spread", False)) == 1


def test_plain_mutex_sorts_busy_cards_first() -> None:
    """gpu_policy.go Less, policy mutex: Used descending so idle cards sit at the tail."""
    devices = [dev(0, used=0), dev(1, used=2), dev(2, used=1)]
    assert sort_devices(devices, [0.0] * 3, "mutex", False) == [1, 2, 0]


def test_type_and_uuid_matching() -> None:
    """pkg/device/devices.go CheckType (upper-cased substring) and CheckUUID (trimmed exact match)."""
    assert type_allowed({"nvidia.com/use-gputype": "a100, h100"}, "NVIDIA A100-SXM4-80GB")
    assert not type_allowed({"nvidia.com/nouse-gputype": "SXM4"}, "NVIDIA A100-SXM4-80GB")
    assert type_allowed({"nvidia.com/use-gputype": "  "}, "NVIDIA L4")  # blank value = no constraint
    assert not type_allowed(
        {"nvidia.com/use-gputype": " , "}, "NVIDIA L4"
    )  # only empty entries match nothing
    assert uuid_allowed({"nvidia.com/use-gpuuuid": " GPU-1 ,GPU-2"}, "GPU-1")
    assert not uuid_allowed({"nvidia.com/use-gpuuuid": "GPU-12"}, "GPU-1")


def test_node_policy_annotation_only_spread_spreads() -> None:
    """v2.10 score.go resolveNodeSchedulerPolicy takes the value verbatim; NodeScoreList.Less compares it to
    "spread", so any other value behaves as binpack."""
    busy = placed("old", "b", "B0,NVIDIA,100,10:;")
    for policy, expected in (("spread", "a"), ("binpack", "b"), ("Spread", "b")):
        s = ClusterState(SharingConfig())
        s.upsert_node(node("a", gpu("A0")))
        s.upsert_node(node("b", gpu("B0")))
        s.upsert_pod(busy)
        p = gpu_pod("x", mem=10, annotations={"hami.io/node-scheduler-policy": policy})
        assert s.schedule(p).node == expected, policy


def test_terminating_pods_keep_their_usage() -> None:
    """pkg/scheduler/scheduler.go onUpdatePod: a pod with deletionTimestamp stays in the cache until it is
    Succeeded/Failed or deleted."""
    s = ClusterState(SharingConfig())
    s.upsert_node(node("n", gpu("G0")))
    p = placed("old", "n", "G0,NVIDIA,100,10:;")
    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    s.upsert_pod(p)
    assert s.node_usage("n")[0].usedmem == 100


def test_init_segments_are_classified_by_position() -> None:
    """pkg/device/initContainer.go CollapseInitContainerUsage: segments before len(initContainers) count as
    init (peak, one slot); later ones as app (summed, a slot each)."""
    s = ClusterState(SharingConfig())
    s.upsert_node(node("n", gpu("G0")))
    p = placed("old", "n", "G0,NVIDIA,100,10:;G0,NVIDIA,300,5:;G0,NVIDIA,50,50:;")
    p["spec"]["initContainers"] = [{"name": "i1"}, {"name": "i2"}]
    s.upsert_pod(p)
    v = s.node_usage("n")[0]
    assert (v.used, v.usedmem, v.usedcores) == (1, 300, 50)


def test_init_alignment_shifts_when_gpu_less_containers_leave_no_segment() -> None:
    """score.go files GPU-less containers' placeholders under the model type, so with model names the
    NVIDIA annotation has no segment for a GPU-less init container, and initContainer.go then counts the
    first app segment as init: two app containers on one card hold max, not sum (HAMi's quirk, kept)."""
    s = ClusterState(SharingConfig())
    s.upsert_node(node("n", gpu("G0")))
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 10}
    p = pod_with(init=[{"name": "setup"}], containers=[("a", limits), ("b", limits)])
    d = s.schedule(p)
    assert d.annotation == "G0,NVIDIA,1000,10:;G0,NVIDIA,1000,10:;"
    p["metadata"]["annotations"].update(d.scheduled_annotations(0))
    s.upsert_pod(p)
    v = s.node_usage("n")[0]
    assert (v.used, v.usedmem, v.usedcores) == (1, 1000, 10)


def pod_with(init: list[dict], containers: list[tuple[str, dict]]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "x", "namespace": "default", "annotations": {}},
        "spec": {
            "initContainers": init,
            "containers": [{"name": n, "resources": {"limits": dict(lim)}} for n, lim in containers],
        },
    }
