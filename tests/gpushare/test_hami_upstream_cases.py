"""HAMi v2.10.0's own unit-test tables, restated as our inputs and expected outputs.

Each test names the upstream file and case it restates (Project-HAMi/HAMi tag v2.10.0). The cases are
re-expressed with our data structures; no Go code is copied.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from gpushare_objects import container, gpu, gpu_pod, node, placed, pod

from tenantgpu.gpushare import ClusterState, SharingConfig, mutate_pod
from tenantgpu.gpushare import reasons as r
from tenantgpu.gpushare.codec import CodecError, decode_node_register, decode_pod_devices
from tenantgpu.gpushare.device import ContainerDevice, DeviceUsage
from tenantgpu.gpushare.nvidia import NvidiaGPUs
from tenantgpu.gpushare.policy import ScoringWeights, device_score, node_score, sort_devices
from tenantgpu.gpushare.quota import QuotaBook
from tenantgpu.gpushare.reasons import parse_reason
from tenantgpu.gpushare.request import ContainerDeviceRequest
from tenantgpu.gpushare.vendor import FitContext

NV = "NVIDIA"  # HAMi's unit tests register devices with type exactly "NVIDIA", so requests count in scores


def usage(
    uuid: str,
    *,
    numa: int = 0,
    used: int = 0,
    count: int = 4,
    totalmem: int = 8192,
    usedmem: int = 0,
    usedcores: int = 0,
    totalcore: int = 100,
    index: int = 0,
    mode: str = "hami-core",
    health: bool = True,
    typ: str = NV,
) -> DeviceUsage:
    return DeviceUsage(
        uuid, index, count, totalmem, totalcore, typ, numa, mode, health, used, usedmem, usedcores
    )


def fit(
    devices: list[DeviceUsage],
    request: ContainerDeviceRequest,
    annotations: dict[str, str] | None = None,
    *,
    policy: str = "spread",
    node_obj: dict | None = None,
):
    notes = dict(annotations or {})
    p = pod("p", annotations=notes)
    ctx = FitContext(pod=p, annotations=notes, node=node_obj, gpu_policy=policy, num_init=0)
    return NvidiaGPUs(SharingConfig()).fit(devices, request, ctx)


def req(nums: int = 1, memreq: int = 1024, pct: int = 100, cores: int = 1) -> ContainerDeviceRequest:
    return ContainerDeviceRequest(nums=nums, type=NV, memreq=memreq, mem_percentage=pct, coresreq=cores)


# --- pkg/scheduler/score_test.go Test_fitInCertainDevice ------------------------------------------


def test_fit_device_count_less_than_used() -> None:
    """score_test.go Test_fitInCertainDevice "device count less than device used"."""
    res = fit([usage("test-0", numa=1, used=5, usedmem=2048, usedcores=1, totalcore=4)], req())
    assert not res.ok and parse_reason(res.reason) == {r.CARD_TIME_SLICING_EXHAUSTED: 1}


def test_fit_core_limit_over_100_is_clamped_then_insufficient() -> None:
    """score_test.go Test_fitInCertainDevice "core limit exceed 100": 200 cores clamp to 100, card has 3 left."""
    res = fit([usage("test-0", numa=1, used=1, usedmem=2048, usedcores=1, totalcore=4)], req(cores=200))
    assert not res.ok and parse_reason(res.reason) == {r.CARD_INSUFFICIENT_CORE: 1}


def test_fit_percentage_of_a_full_card() -> None:
    """score_test.go Test_fitInCertainDevice "card insufficient remaining memory" (0 MiB, 100 %)."""
    dev = usage("test-0", numa=1, used=1, totalmem=8000, usedmem=8000, usedcores=1, totalcore=4)
    res = fit([dev], req(memreq=0, cores=100))
    assert not res.ok and parse_reason(res.reason) == {r.CARD_INSUFFICIENT_MEMORY: 1}


def test_fit_exclusive_request_on_used_card() -> None:
    """score_test.go Test_fitInCertainDevice "the container wants exclusive access to an entire card"."""
    res = fit([usage("test-0", numa=1, used=1, usedmem=2048)], req(memreq=100, cores=100))
    assert not res.ok and parse_reason(res.reason) == {r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT: 1}


def test_fit_zero_cores_on_a_card_with_all_cores_taken() -> None:
    """score_test.go Test_fitInCertainDevice "can't allocate core=0 job to an already full GPU"."""
    dev = usage("test-0", numa=1, used=1, usedmem=2048, usedcores=1, totalcore=1)
    res = fit([dev], req(cores=0))
    assert not res.ok and parse_reason(res.reason) == {r.CARD_COMPUTE_UNITS_EXHAUSTED: 1}


def test_fit_uuid_mismatch() -> None:
    """score_test.go Test_fitInCertainDevice "card uuid don't match" (use-gpuuuid: abc)."""
    dev = usage("test-0", numa=1, used=1, usedmem=2048, usedcores=1, totalcore=4)
    res = fit([dev], req(), {"nvidia.com/use-gpuuuid": "abc"})
    assert not res.ok and parse_reason(res.reason) == {r.CARD_UUID_MISMATCH: 1}


def test_fit_numa_not_fit() -> None:
    """score_test.go Test_fitInCertainDevice "numa not fit": 2 cards on NUMA 0 and 1, 2 wanted, numa-bind;
    the partial pick on NUMA 1 is dropped (NumaNotFit 1) and test-0 alone is left (1 allocated, short)."""
    devs = [
        usage("test-0", numa=0, used=1, usedmem=2048, usedcores=1, totalcore=4),
        usage("test-1", numa=1, used=1, usedmem=2048, usedcores=1, totalcore=4),
    ]
    res = fit(devs, req(nums=2), {"nvidia.com/numa-bind": "true"})
    assert not res.ok
    assert parse_reason(res.reason) == {r.NUMA_NOT_FIT: 1, r.ALLOCATED_CARDS_INSUFFICIENT_REQUEST: 1}
    assert res.devices == [ContainerDevice("test-0", NV, 1024, 1)]


def test_fit_mixed_reasons_over_nvidia_cards() -> None:
    """score_test.go Test_fitInCertainDevice "test device kind of not fit reason" (the NVIDIA cards of it):
    3 outside the UUID list, 4 slot-exhausted, 2 short of memory, 1 short of cores, out of 10."""

    def d(uuid: str, used: int = 1, usedmem: int = 2048, usedcores: int = 1) -> DeviceUsage:
        return usage(uuid, numa=1, used=used, usedmem=usedmem, usedcores=usedcores)

    devs = [d("b"), d("q"), d("i")]
    devs += [d(u, used=4) for u in "cjul"]
    devs += [d("d", usedmem=8048), d("m", usedmem=8048), d("e", usedcores=90)]
    res = fit(devs, req(nums=2, cores=20), {"nvidia.com/use-gpuuuid": "a,f,c,d,e,g,h,j,l,u,m"})
    assert not res.ok
    assert res.reason == (
        "1/10 CardInsufficientCore, 2/10 CardInsufficientMemory, 3/10 CardUuidMismatch, "
        "4/10 CardTimeSlicingExhausted"
    )


# --- pkg/scheduler/score_test.go Test_calcScore ------------------------------------------------


def _typed_node(name: str, *uuids: str, mem: int = 8000, distinct_index: bool = True) -> dict:
    return node(
        name,
        *(gpu(u, i if distinct_index else 0, mem=mem, model=NV) for i, u in enumerate(uuids)),
    )


def test_calc_score_spread_two_containers_not_on_same_device() -> None:
    """score_test.go Test_calcScore "one node two device one pod two containers use two device with
    spread,should not in same device": equal cards uuid1 (index 0), uuid2 (index 1); the first container
    (8000 MiB, 30 cores) gets uuid2 — Go's sort keeps equal cards in registration order and Fit scans
    from the end — and the second (1000 MiB, 30 cores) then gets the emptier uuid1."""
    s = ClusterState(SharingConfig())
    s.upsert_node(_typed_node("node1", "uuid1", "uuid2"))
    limits = [{"nvidia.com/gpu": 1, "nvidia.com/gpumem": m, "nvidia.com/gpucores": 30} for m in (8000, 1000)]
    p = pod("test1", container("a", limits=limits[0]), container("b", limits=limits[1]))
    d = s.schedule(p)
    assert d.node == "node1"
    assert d.annotation == "uuid2,NVIDIA,8000,30:;uuid1,NVIDIA,1000,30:;"


def test_calc_score_one_node_two_devices_equal_index() -> None:
    """score_test.go Test_calcScore "one node two device one pod one container use one device": two
    idle equal cards, both with index 0; the second listed (uuid2) is chosen."""
    s = ClusterState(SharingConfig())
    s.upsert_node(_typed_node("node1", "uuid1", "uuid2", distinct_index=False))
    d = s.schedule(gpu_pod("test1", mem=1000, cores=30))
    assert d.annotation == "uuid2,NVIDIA,1000,30:;"
    assert d.node_scores == {"node1": 0.0}


def test_calc_score_second_of_three_containers() -> None:
    """score_test.go Test_calcScore "one node one device one pod with three containers, middle container
    uses one device": with type-"NVIDIA" cards the GPU-less containers leave empty segments."""
    s = ClusterState(SharingConfig())
    s.upsert_node(_typed_node("node1", "uuid1"))
    gpu_limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 30}
    p = pod("test1", container("a"), container("b", limits=gpu_limits), container("c"))
    assert s.schedule(p).annotation == ";uuid1,NVIDIA,1000,30:;;"


def test_calc_score_not_enough_resource_fails_the_node() -> None:
    """score_test.go Test_calcScore "one node one device ... not enough resource,node should be failed"."""
    s = ClusterState(SharingConfig())
    s.upsert_node(_typed_node("node1", "uuid1"))
    d = s.schedule(gpu_pod("test1", mem=9000, cores=30))
    assert d.node is None
    assert d.failed_nodes == {"node1": "1/1 CardInsufficientMemory"}


def test_fit_in_devices_more_cards_than_the_node_has() -> None:
    """score_test.go Test_fitInDevices "request devices nums cannot exceed the total number of devices"."""
    s = ClusterState(SharingConfig())
    s.upsert_node(_typed_node("node1", "uuid1", "uuid2"))
    d = s.schedule(gpu_pod("test1", gpus=3, mem=1000, cores=30))
    assert d.failed_nodes == {"node1": r.NODE_INSUFFICIENT_DEVICE}


def test_init_container_bigger_than_any_card_fails_the_node() -> None:
    """score_test.go Test_calcScore "init container requests more memory than any single device has"."""
    s = ClusterState(SharingConfig())
    s.upsert_node(_typed_node("node1", "uuid1", "uuid2"))
    init = container(
        "init", limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 9000, "nvidia.com/gpucores": 10}
    )
    app = container("app", limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 10})
    d = s.schedule(pod("p", app, init=[init]))
    assert d.node is None
    assert d.failed_nodes == {"node1": "2/2 CardInsufficientMemory"}


def test_init_and_app_container_share_capacity() -> None:
    """score_test.go Test_calcScore "one node two devices, pod has one init container (uses 1 device) and
    one regular container (uses 1 device) - tests InitContainer capacity reset": two idle cards (both
    index 0); the init container's card is free again for the app container, both get uuid2."""
    s = ClusterState(SharingConfig())
    s.upsert_node(_typed_node("node1", "uuid1", "uuid2", distinct_index=False))
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 30}
    d = s.schedule(pod("p", container("app", limits=limits), init=[container("init", limits=limits)]))
    assert d.annotation == "uuid2,NVIDIA,1000,30:;uuid2,NVIDIA,1000,30:;"


# --- float32 scores (pkg/scheduler/policy/gpu_policy.go ComputeScore, node_policy.go) --------------


def test_device_scores_are_float32() -> None:
    """gpu_policy.go ComputeScore computes in float32: 1 slot + 200/1000 MiB and 3 slots + nothing are
    both exactly 3.0 there (in float64 the first is 3.0000000000000004), so they tie; the tie keeps
    registration order and Fit tries the later card first."""
    s = ClusterState(SharingConfig())
    s.upsert_node(node("n", gpu("B", 0, mem=1000), gpu("A", 1, mem=1000)))
    s.upsert_pod(placed("a1", "n", "A,NVIDIA,200,0:;"))
    for i in range(3):
        s.upsert_pod(placed(f"b{i}", "n", "B,NVIDIA,0,0:;"))
    scores = [device_score(d, None, ScoringWeights()) for d in s.node_devices("n")]
    assert scores == [3.0, 3.0]
    assert s.schedule(gpu_pod("x", mem=10, cores=0)).annotation == "A,NVIDIA,10,0:;"


def test_node_scores_are_float32() -> None:
    """node_policy.go ComputeDefaultScore is float32 too: equal there, so our tie rule (first node) wins
    under binpack although float64 would put the second node ahead."""
    s = ClusterState(SharingConfig())
    s.upsert_node(node("n2", gpu("B", 0, mem=1000)))
    s.upsert_node(node("n1", gpu("A", 0, mem=1000)))
    s.upsert_pod(placed("a1", "n1", "A,NVIDIA,200,0:;"))
    for i in range(3):
        s.upsert_pod(placed(f"b{i}", "n2", "B,NVIDIA,0,0:;"))
    assert node_score(s.node_devices("n1")) == node_score(s.node_devices("n2")) == 3.0
    for fast in (True, False):
        assert s.schedule(gpu_pod("x", mem=10, cores=0), fast=fast).node == "n2"


def test_percentage_beats_gpumem_in_the_device_score_only() -> None:
    """gpu_policy.go ComputeScore takes a set percentage before Memreq; Fit takes Memreq first."""
    dev = usage("d", count=10, totalmem=1000)
    both = ContainerDeviceRequest(nums=1, type=NV, memreq=100, mem_percentage=50, coresreq=0)
    assert device_score(dev, both, ScoringWeights()) == 10 * (0.1 + 0.5)
    assert fit([dev], both).devices == [ContainerDevice("d", NV, 100, 0)]


@pytest.mark.parametrize("policy", ["spread", "binpack"])
def test_mutex_and_policy_ties_keep_registration_order(policy: str) -> None:
    """gpu_policy.go Less via sort.Sort (insertion sort for <= 12 cards, hence stable): three idle
    equal cards, the last registered is tried first under both single policies."""
    cfg = dataclasses.replace(SharingConfig(), gpu_policy=policy)
    s = ClusterState(cfg)
    s.upsert_node(node("n", gpu("G0", 0), gpu("G1", 1), gpu("G2", 2)))
    assert s.schedule(gpu_pod("x", mem=10, cores=10)).annotation == "G2,NVIDIA,10,10:;"


# --- pkg/device/quota_test.go and pkg/scheduler/webhook_test.go TestFitResourceQuota --------------

MEM, CORES = "nvidia.com/gpumem", "nvidia.com/gpucores"


def book() -> QuotaBook:
    return QuotaBook([MEM, CORES], memory_resource=MEM)


def test_quota_fit_limits_and_memory_factor() -> None:
    """quota_test.go TestFitQuota: used 1000/2000 MiB and 200/400 cores; the memory limit scales with
    memoryFactor; a namespace without quota is unlimited."""
    rq = {
        "metadata": {"name": "q", "namespace": "testns"},
        "spec": {"hard": {f"limits.{MEM}": 2000, f"limits.{CORES}": 400}},
    }
    for factor, mem, cores, fits in (
        (1, 500, 100, True),
        (1, 1500, 100, False),
        (1, 500, 300, False),
        (2, 1000, 100, True),
        (2, 5000, 100, False),
    ):
        b = QuotaBook([MEM, CORES], memory_factor=factor, memory_resource=MEM)
        b.upsert_quota(rq)
        b.add_usage("testns", {MEM: 1000, CORES: 200})
        assert b.fits("testns", {MEM: mem, CORES: cores}) is fits, (factor, mem, cores)
        assert b.fits("otherns", {MEM: 1500, CORES: 100})


def test_quota_explicit_zero_blocks() -> None:
    """quota_test.go TestFitQuotaExplicitZeroBlocks: `limits.nvidia.com/gpumem: 0` blocks any request."""
    b = book()
    b.upsert_quota(
        {"metadata": {"name": "q", "namespace": "team-zero"}, "spec": {"hard": {f"limits.{MEM}": "0"}}}
    )
    assert not b.fits("team-zero", {MEM: 500, CORES: 0})


def test_quota_usage_never_negative() -> None:
    """quota_test.go TestAddUsageAndRmUsage: removing more than recorded stops at 0."""
    b = book()
    b.add_usage("testns", {MEM: 1000, CORES: 100})
    b.remove_usage("testns", {MEM: 1000, CORES: 100})
    b.remove_usage("testns", {MEM: 1000, CORES: 100})
    assert b.used("testns", MEM) == 0 and b.used("testns", CORES) == 0


def test_quota_delete_and_non_limits_keys() -> None:
    """quota_test.go TestAddQuotaAndDelQuota and TestDelQuotaNonLimitsKey: deleting clears the limits;
    `requests.*` and other keys are not tracked, so a quota with only those changes nothing."""
    b = book()
    b.upsert_quota(
        {
            "metadata": {"name": "q", "namespace": "testns"},
            "spec": {"hard": {f"limits.{MEM}": 100, f"limits.{CORES}": 10}},
        }
    )
    other = {
        "metadata": {"name": "other", "namespace": "testns"},
        "spec": {"hard": {f"requests.{MEM}": 50, f"0123456{MEM}": 50}},
    }
    b.upsert_quota(other)
    b.remove_quota("testns", "other")
    assert b.limit("testns", MEM) == 100 and b.limit("testns", CORES) == 10
    b.remove_quota("testns", "q")
    assert b.limit("testns", MEM) is None and b.limit("testns", CORES) is None


def test_quota_update_drops_keys_the_new_object_lacks() -> None:
    """quota_test.go TestUpdateQuota: 1000/100 -> 2000 with no core key: memory 2000, core limit released,
    recorded usage kept."""
    b = book()
    b.upsert_quota(
        {
            "metadata": {"name": "q", "namespace": "ns"},
            "spec": {"hard": {f"limits.{MEM}": 1000, f"limits.{CORES}": 100}},
        }
    )
    b.upsert_quota({"metadata": {"name": "q", "namespace": "ns"}, "spec": {"hard": {f"limits.{MEM}": 2000}}})
    assert b.limit("ns", MEM) == 2000 and b.limit("ns", CORES) is None
    b.add_usage("ns", {MEM: 500})
    b.upsert_quota({"metadata": {"name": "q", "namespace": "ns"}, "spec": {"hard": {f"limits.{MEM}": 3000}}})
    assert b.used("ns", MEM) == 500 and b.limit("ns", MEM) == 3000


def test_quota_deleting_one_of_two_quotas_clears_the_shared_limit() -> None:
    """quota.go delQuotaLocked: one limit per namespace and resource; deleting any quota naming it
    clears it (LimitSet false), even if another ResourceQuota still names it."""
    b = book()
    b.upsert_quota({"metadata": {"name": "a", "namespace": "ns"}, "spec": {"hard": {f"limits.{MEM}": 1000}}})
    b.upsert_quota({"metadata": {"name": "b", "namespace": "ns"}, "spec": {"hard": {f"limits.{MEM}": 3000}}})
    assert b.limit("ns", MEM) == 3000  # the last written wins
    b.remove_quota("ns", "b")
    assert b.limit("ns", MEM) is None


@pytest.mark.parametrize(
    ("name", "app", "init", "allowed"),
    [
        ("quota passed", [(1, 100)], [], True),
        ("quota exceeded", [(1, 1024)], [], False),
        ("request multiple gpus", [(2, 1024)], [], False),
        ("request multiple gpus within quota", [(2, 400)], [], True),
        (
            "InitContainers run sequentially: max init fits quota, but simple sum would exceed",
            [(1, 500)],
            [(1, 800), (1, 800)],
            True,
        ),
        ("InitContainer request exceeds quota directly", [(1, 100)], [(1, 1500)], False),
    ],
)
def test_webhook_fit_resource_quota(name: str, app: list, init: list, allowed: bool) -> None:
    """webhook_test.go TestFitResourceQuota (NVIDIA cases): used 1000/2000 MiB, 200/400 cores in
    `default`; the pod's request is max(sum of app containers, largest init container), gpumem x gpus."""
    b = book()
    b.upsert_quota(
        {
            "metadata": {"name": "q", "namespace": "default"},
            "spec": {"hard": {f"limits.{MEM}": 2000, f"limits.{CORES}": 400}},
        }
    )
    b.add_usage("default", {MEM: 1000, CORES: 200})

    def ctr(i: int, n: int, mem: int) -> dict:
        return container(f"c{i}", limits={"nvidia.com/gpu": n, MEM: mem})

    p = pod(
        "p",
        *(ctr(i, n, m) for i, (n, m) in enumerate(app)),
        init=[ctr(9 + i, n, m) for i, (n, m) in enumerate(init)] or None,
    )
    adm = mutate_pod(p, SharingConfig(), b)
    assert adm.allowed is allowed, name
    if not allowed:
        assert adm.message == "exceeding resource quota"


# --- pkg/scheduler/webhook_test.go ----------------------------------------------------------------


def test_webhook_pod_with_node_name_is_denied() -> None:
    """webhook_test.go TestPodHasNodeName: a GPU pod with spec.nodeName set is denied."""
    adm = mutate_pod(gpu_pod("p", mem=1000, nodeName="node1"), SharingConfig())
    assert not adm.allowed and adm.message == "pod has node assigned"


def test_webhook_other_scheduler_is_left_alone() -> None:
    """webhook_test.go TestPodHasDifferentScheduler: allowed, not mutated."""
    adm = mutate_pod(gpu_pod("p", mem=1000, schedulerName="some-scheduler"), SharingConfig())
    assert adm.allowed and not adm.mutated and adm.patch == []


def test_webhook_empty_containers_denied() -> None:
    """webhook_test.go TestEmptyContainersDenied."""
    p = pod("p")
    p["spec"]["containers"] = []
    adm = mutate_pod(p, SharingConfig())
    assert not adm.allowed and adm.message == "pod has no containers"


def test_webhook_sets_scheduler_name_when_none_given() -> None:
    """webhook_test.go TestSchedulerNameEmptyNoOverwrite: a GPU pod without schedulerName gets a patch
    setting it to hami-scheduler."""
    adm = mutate_pod(gpu_pod("p", mem=1000), SharingConfig())
    assert adm.allowed
    assert {"op": "add", "path": "/spec/schedulerName", "value": "hami-scheduler"} in adm.patch


def test_webhook_non_gpu_pod_allowed_unchanged() -> None:
    """webhook_test.go TestNonGPUPodAllowedAdmission: allowed, schedulerName untouched."""
    adm = mutate_pod(pod("p", container(limits={"cpu": "1"})), SharingConfig())
    assert adm.allowed and "schedulerName" not in adm.pod["spec"]


def test_webhook_runtime_class_for_gpu_pods_only() -> None:
    """nvidia/device.go MutateAdmission: with runtimeClassName configured, a GPU pod that names none gets
    it; a pod naming one keeps its own; a pod without GPUs is left alone."""
    cfg = dataclasses.replace(SharingConfig(), runtime_class_name="nvidia")
    assert mutate_pod(gpu_pod("p", mem=10), cfg).pod["spec"]["runtimeClassName"] == "nvidia"
    own = mutate_pod(gpu_pod("p", mem=10, runtimeClassName="kata"), cfg)
    assert own.pod["spec"]["runtimeClassName"] == "kata"
    assert "runtimeClassName" not in mutate_pod(pod("p"), cfg).pod["spec"]
    assert "runtimeClassName" not in mutate_pod(gpu_pod("p", mem=10), SharingConfig()).pod["spec"]


# --- pkg/device/devices.go codecs, pkg/device/nvidia/device.go GetNodeDevices ----------------------


def test_v210_scheduler_reads_only_json_registrations() -> None:
    """nvidia/device.go GetNodeDevices calls only UnMarshalNodeDevices (JSON): a <=v2.7 colon/comma
    annotation fails to decode, so the node is not registered."""
    s = ClusterState(SharingConfig())
    legacy = node("old")
    legacy["metadata"]["annotations"]["hami.io/node-nvidia-register"] = (
        "GPU-1,10,16384,100,NVIDIA-Tesla T4,0,true,0,hami-core:"
    )
    s.upsert_node(legacy)
    assert s.registration_error("old") is not None
    assert s.schedule(gpu_pod("x", mem=10)).failed_nodes == {"old": "node unregistered"}


def test_register_json_as_go_unmarshals_it() -> None:
    """devices.go UnMarshalNodeDevices is encoding/json: keys match case-insensitively, null leaves the
    zero value, int32 fields may be negative, a fraction is refused."""
    raw = '[{"ID":"GPU-1","Count":10,"devmem":1000,"devcore":100,"type":null,"numa":-1,"health":true}]'
    (dev,) = decode_node_register(raw, decode_legacy=False)
    assert (dev.id, dev.count, dev.type, dev.numa, dev.health) == ("GPU-1", 10, "", -1, True)
    with pytest.raises(CodecError):
        decode_node_register('[{"id":"GPU-1","devmem":1000.5}]', decode_legacy=False)


@pytest.mark.parametrize(
    "bad", ["G,NVIDIA,1_000,0:;", "G,NVIDIA, 10,0:;", "G,NVIDIA,10,9999999999:;", "G,NVIDIA,1:;"]
)
def test_pod_devices_numbers_as_go_parses_them(bad: str) -> None:
    """devices.go DecodeContainerDevices: strconv.ParseInt(base 10, 32 bit) per field; fewer than 4
    fields is a format error; a piece without a comma is skipped."""
    with pytest.raises(CodecError):
        decode_pod_devices(bad)
    assert decode_pod_devices("junk:G,NVIDIA,+10,-1:;") == [[ContainerDevice("G", NV, 10, -1)]]


# --- pkg/scheduler/policy/gpu_policy_test.go TestDeviceUsageList_Less -----------------------------

# (case name, policy, numa-bind, [(numa, used, index, score) of device 0 and 1], Less(0, 1))
_LESS_CASES = [
    ("Binpack policy with same Numa", "binpack", False, [(0, 10, 0, 10), (0, 20, 0, 20)], True),
    (
        "Binpack: score primary, lower score sorts first across NUMA",
        "binpack",
        False,
        [(1, 10, 0, 10), (0, 20, 0, 20)],
        True,
    ),
    (
        "Binpack: score primary, higher score sorts last even on lower NUMA",
        "binpack",
        False,
        [(0, 10, 0, 10), (1, 20, 0, 20)],
        True,
    ),
    ("Binpack: NUMA tiebreaker when scores equal", "binpack", False, [(0, 0, 0, 15), (1, 0, 0, 15)], True),
    (
        "Binpack: score primary over NUMA, high-NUMA high-score sorts last",
        "binpack",
        False,
        [(1, 0, 0, 20), (0, 0, 0, 10)],
        False,
    ),
    (
        "Spread: score primary, higher score sorts first",
        "spread",
        False,
        [(0, 10, 0, 10), (0, 20, 0, 20)],
        False,
    ),
    (
        "Spread: score primary, lower score sorts last across NUMA",
        "spread",
        False,
        [(1, 10, 0, 10), (0, 20, 0, 20)],
        False,
    ),
    (
        "Spread: score primary over NUMA, high-NUMA high-score sorts first",
        "spread",
        False,
        [(1, 0, 0, 20), (0, 0, 0, 10)],
        True,
    ),
    ("Spread: NUMA tiebreaker when scores equal", "spread", False, [(0, 0, 0, 15), (1, 0, 0, 15)], True),
    (
        "Binpack+NumaBind: NUMA primary, higher NUMA sorts first regardless of Score",
        "binpack",
        True,
        [(1, 0, 0, 5), (0, 0, 0, 99)],
        True,
    ),
    (
        "Binpack+NumaBind: same NUMA falls back to lower Score first",
        "binpack",
        True,
        [(0, 0, 0, 10), (0, 0, 0, 20)],
        True,
    ),
    (
        "Spread+NumaBind: NUMA primary, lower NUMA sorts first regardless of Score",
        "spread",
        True,
        [(0, 0, 0, 5), (1, 0, 0, 99)],
        True,
    ),
    (
        "Spread+NumaBind: same NUMA falls back to higher Score first",
        "spread",
        True,
        [(0, 0, 0, 20), (0, 0, 0, 10)],
        True,
    ),
    ("Mutex: busy GPU sorts before idle GPU", "mutex", False, [(0, 2, 0, 0), (0, 0, 0, 0)], True),
    ("Mutex: idle GPU sorts after busy GPU", "mutex", False, [(0, 0, 0, 0), (0, 1, 0, 0)], False),
    ("Mutex: NUMA tiebreaker when both idle", "mutex", False, [(0, 0, 0, 0), (1, 0, 0, 0)], True),
    (
        "Bare numa: NUMA is the sort key regardless of score",
        "numa",
        False,
        [(0, 0, 0, 99), (1, 0, 0, 5)],
        True,
    ),
    (
        "Bare numa: same NUMA falls to deterministic Index tiebreak",
        "numa",
        False,
        [(0, 0, 3, 10), (0, 0, 1, 20)],
        False,
    ),
    (
        "Chain binpack,numa: score primary, numa tiebreak when scores equal",
        "binpack,numa",
        False,
        [(0, 0, 0, 15), (1, 0, 0, 15)],
        True,
    ),
    (
        "Chain spread,numa: score primary, numa tiebreak when scores equal",
        "spread,numa",
        False,
        [(0, 0, 0, 15), (1, 0, 0, 15)],
        True,
    ),
    (
        "Chain numa,spread: numa primary regardless of score",
        "numa,spread",
        False,
        [(1, 0, 0, 5), (0, 0, 0, 99)],
        False,
    ),
    (
        "Chain numa,spread: same NUMA falls back to spread (higher score first)",
        "numa,spread",
        False,
        [(0, 0, 0, 20), (0, 0, 0, 10)],
        True,
    ),
    (
        "Chain mutex,spread: mutex is a Fit() filter, not a sort key; spread decides order",
        "mutex,spread",
        False,
        [(0, 5, 0, 10), (0, 0, 0, 20)],
        False,
    ),
    (
        "Chain with only filter tokens (mutex,topology-aware) falls back to spread",
        "mutex,topology-aware",
        False,
        [(0, 0, 0, 10), (0, 0, 0, 20)],
        False,
    ),
    (
        "Chain binpack,numa: deterministic Index tiebreak when score and numa both tie",
        "binpack,numa",
        False,
        [(0, 0, 5, 10), (0, 0, 2, 10)],
        False,
    ),
    (
        "Chain binpack,spread + NumaBind: numa forced primary to keep groups contiguous",
        "binpack,spread",
        True,
        [(0, 0, 0, 99), (1, 0, 0, 5)],
        True,
    ),
    (
        "Chain spread,numa + NumaBind: numa moved to front, spread breaks same-NUMA ties",
        "spread,numa",
        True,
        [(0, 0, 0, 20), (0, 0, 0, 10)],
        True,
    ),
]


@pytest.mark.parametrize(
    ("name", "policy", "numa_bind", "devs", "less"), _LESS_CASES, ids=[c[0] for c in _LESS_CASES]
)
def test_device_order_less(name: str, policy: str, numa_bind: bool, devs: list, less: bool) -> None:
    """gpu_policy_test.go TestDeviceUsageList_Less: Less(0, 1) is true exactly when device 0 sorts strictly
    before device 1 (in either input order)."""
    d = [usage(f"d{i}", numa=numa, used=used, index=index) for i, (numa, used, index, _) in enumerate(devs)]
    scores = [float(s) for *_, s in devs]
    forward = sort_devices(d, scores, policy, numa_bind)
    backward = sort_devices(d[::-1], scores[::-1], policy, numa_bind)
    strictly_first = forward[0] == 0 and backward[0] == 1  # position 1 of the reversed list is device 0
    assert strictly_first is less, name


# --- gpu_policy_test.go TestComputeScore, TestComputeScoreWithResourceWeights (exact float32) -------


def _typed(typ: str, **kw: int) -> DeviceUsage:
    return usage("d", typ=typ, **kw)


@pytest.mark.parametrize(
    ("name", "dev", "req", "score"),
    [
        (
            "Zero capacity device returns score 0 without panic",
            dict(count=0, totalcore=0, totalmem=0),
            None,
            0.0,
        ),
        ("Partial zero capacity (Count=0)", dict(count=0, totalcore=8, totalmem=4096), None, 0.0),
        (
            "ContainerDeviceRequests has no data",
            dict(totalcore=4, totalmem=8192, count=10, used=2, usedcores=1, usedmem=2048),
            None,
            7.0,
        ),
        (
            "Filter other device types and ignore Nums for slots",
            dict(totalcore=4, totalmem=8192, count=10, used=2, usedcores=1, usedmem=2048),
            ContainerDeviceRequest(nums=4, type="type1", memreq=1024, mem_percentage=0, coresreq=1),
            11.75,
        ),
        (
            "MemPercentagereq calculation evaluates correctly",
            dict(totalcore=10, totalmem=10000, count=10),
            ContainerDeviceRequest(nums=1, type="type1", memreq=0, mem_percentage=50, coresreq=2),
            8.0,
        ),
    ],
)
def test_compute_score(name: str, dev: dict, req: ContainerDeviceRequest | None, score: float) -> None:
    """gpu_policy_test.go TestComputeScore (single-request cases), compared exactly as Go's float32."""
    assert device_score(_typed("type1", **dev), req, ScoringWeights()) == score, name


@pytest.mark.parametrize(
    ("weights", "score_a", "score_b", "binpack_first", "spread_first"),
    [
        ((1, 1, 1), 16.0, 15.0, "gpu-a", "gpu-b"),
        ((1, 1, 3), 26.0, 27.0, "gpu-b", "gpu-a"),
        ((1, 3, 1), 34.0, 17.0, "gpu-a", "gpu-b"),
    ],
)
def test_compute_score_with_resource_weights(
    weights: tuple[int, int, int], score_a: float, score_b: float, binpack_first: str, spread_first: str
) -> None:
    """gpu_policy_test.go TestComputeScoreWithResourceWeights: a 40 % request on gpu-a (1 slot, 90 cores,
    10 MiB of 100) and gpu-b (7 slots, 10 cores, 20 MiB); exact float32 scores and the card Fit tries
    first (the tail of the sorted list) under binpack and spread."""
    req = ContainerDeviceRequest(nums=1, type="type1", mem_percentage=40, coresreq=0)
    devs = [
        usage("gpu-a", typ="type1", count=10, totalcore=100, totalmem=100, used=1, usedcores=90, usedmem=10),
        usage("gpu-b", typ="type1", count=10, totalcore=100, totalmem=100, used=7, usedcores=10, usedmem=20),
    ]
    w = ScoringWeights(*weights)
    scores = [device_score(d, req, w) for d in devs]
    assert scores == [score_a, score_b]
    assert devs[sort_devices(devs, scores, "binpack", False)[-1]].id == binpack_first
    assert devs[sort_devices(devs, scores, "spread", False)[-1]].id == spread_first
    numa = [dataclasses.replace(devs[0], numa=0), dataclasses.replace(devs[1], numa=1)]
    assert numa[sort_devices(numa, scores, "binpack", True)[-1]].id == "gpu-a"


# --- pkg/device/nvidia/device_test.go TestGenerateResourceRequests -------------------------------

_G, _M, _P, _C = "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"


@pytest.mark.parametrize(
    ("name", "limits", "requests", "want"),
    [
        ("gpu count only — defaults to 100% memory", {_G: 1}, None, (1, 0, 100, 0)),
        ("gpu count + explicit memory", {_G: 2, _M: 4096}, None, (2, 4096, 101, 0)),
        ("gpu count + memory percentage", {_G: 1, _P: 50}, None, (1, 0, 50, 0)),
        ("memory percentage above 100 — clamped to 100", {_G: 1, _P: 150}, None, (1, 0, 100, 0)),
        ("memory percentage beyond int32 range — clamped", {_G: 1, _P: 2**32 + 50}, None, (1, 0, 100, 0)),
        ("memory percentage equal to sentinel 101 — clamped to 100", {_G: 1, _P: 101}, None, (1, 0, 100, 0)),
        ("gpu count + explicit cores", {_G: 1, _C: 50}, None, (1, 0, 100, 50)),
        ("no gpu resource — returns empty request", {}, None, None),
        ("gpu in Requests (not Limits) — falls back to Requests", None, {_G: 1}, (1, 0, 100, 0)),
        ("memory percentage of 0 — treated as unset", {_G: 1, _P: 0}, None, (1, 0, 100, 0)),
        ("memory percentage of 0 in Requests — treated as unset", None, {_G: 1, _P: 0}, (1, 0, 100, 0)),
        ("negative memory percentage — treated as unset", {_G: 1, _P: -1}, None, (1, 0, 100, 0)),
        (
            "memory percentage of 0 + explicit memory — explicit memory wins",
            {_G: 1, _M: 2000, _P: 0},
            None,
            (1, 2000, 101, 0),
        ),
        ("byte-scale memory quantity that overflows int32 is rejected", {_G: 1, _M: "16Gi"}, None, None),
        ("decimal-form memory request is rejected, not treated as zero", {_G: 1, _M: "16.0Gi"}, None, None),
    ],
)
def test_generate_resource_requests(
    name: str, limits: dict | None, requests: dict | None, want: tuple | None
) -> None:
    """device_test.go TestGenerateResourceRequests: (Nums, Memreq, MemPercentagereq, Coresreq)."""
    got = NvidiaGPUs(SharingConfig()).container_request(container(limits=limits, requests=requests))
    if want is None:
        assert got is None, name
    else:
        assert got is not None and (got.nums, got.memreq, got.mem_percentage, got.coresreq) == want, name


def test_generate_resource_requests_memory_factor_and_default_memory() -> None:
    """device_test.go TestGenerateResourceRequests_MemoryFactor / _DefaultMemory: gpumem x memoryFactor
    (1Gi x 2 overflows int32 and is refused); defaultMemory applies when gpumem is absent, 0, or the
    percentage is 0."""
    doubled = NvidiaGPUs(dataclasses.replace(SharingConfig(), memory_factor=2))
    got = doubled.container_request(container(limits={_G: 1, _M: 1024}))
    assert got is not None and got.memreq == 2048
    assert doubled.container_request(container(limits={_G: 1, _M: "1Gi"})) is None
    nv = NvidiaGPUs(dataclasses.replace(SharingConfig(), default_memory=512))
    for limits in ({_G: 1}, {_G: 1, _P: 0}, {_G: 1, _M: 0}):
        got = nv.container_request(container(limits=limits))
        assert got is not None and (got.memreq, got.mem_percentage) == (512, 101), limits


@pytest.mark.parametrize(
    ("name", "limits", "requests", "core_limit"),
    [
        ("exclusive via percentage", {_G: "1", _P: "100"}, None, "100"),
        ("exclusive via percentage in requests only", None, {_G: "1", _P: "100"}, "100"),
        ("non-exclusive percentage", {_G: "1", _P: "50"}, None, None),
        ("no memory fields defaults to exclusive", {_G: "1"}, None, "100"),
        ("explicit cores remains unchanged", {_G: "1", _C: "70"}, None, "70"),
        ("explicit cores in requests remains unchanged", None, {_G: "1", _C: "55"}, None),
        ("memory size present treated as shareable", {_G: "1", _M: "8192"}, None, None),
    ],
)
def test_mutate_admission_defaults_exclusive_core(
    name: str, limits: dict | None, requests: dict | None, core_limit: str | None
) -> None:
    """device_test.go TestMutateAdmissionDefaultsExclusiveCore: whole-card memory without gpucores gets
    `limits[nvidia.com/gpucores] = 100`; explicit cores (limits or requests) are left alone."""
    adm = mutate_pod(pod("p", container(limits=limits, requests=requests)), SharingConfig())
    resources = adm.pod["spec"]["containers"][0]["resources"]
    assert (resources.get("limits") or {}).get(_C) == core_limit, name
    if requests and _C in requests:
        assert resources["requests"][_C] == requests[_C]


# --- pkg/device/initContainer.go, pkg/scheduler/scheduler.go onUpdatePod ---------------------------


def test_init_peak_released_once_init_containers_succeeded() -> None:
    """initContainer.go CollapseInitContainerUsage counts max(init peak, app sum) per card; once every
    init container terminated with exit code 0 (util.AllInitContainersSucceeded), onUpdatePod shrinks
    the pod to AppContainersOnlyDeviceUsage: a card only the init container used is free again."""
    s = ClusterState(SharingConfig())
    s.upsert_node(node("n", gpu("G0", 0, mem=1000), gpu("G1", 1, mem=1000)))
    p = placed("p", "n", "G0,NVIDIA,900,50:;G1,NVIDIA,100,10:;", init=[container("warm")])
    s.upsert_pod(p)
    assert [(u.uuid, u.used, u.usedmem) for u in s.node_usage("n")] == [("G0", 1, 900), ("G1", 1, 100)]
    p["status"] = {
        "phase": "Running",
        "initContainerStatuses": [{"name": "warm", "state": {"terminated": {"exitCode": 0}}}],
    }
    s.upsert_pod(p)
    assert [(u.uuid, u.used, u.usedmem) for u in s.node_usage("n")] == [("G0", 0, 0), ("G1", 1, 100)]
    p["status"]["initContainerStatuses"][0]["state"] = {"terminated": {"exitCode": 1}}
    s.upsert_pod(p)
    assert s.node_usage("n")[0].usedmem == 900


def test_gpu_less_init_container_lets_the_app_card_be_shared_once_init_succeeded() -> None:
    """A fault of v2.10.0 the lab keeps. score.go allocateInitContainers files a GPU-less init
    container's empty segment under the node's device *type strings* (the model, e.g. "NVIDIA L4"), the
    app container's devices under "NVIDIA"; so the NVIDIA annotation holds one segment, the app's, at
    index 0. CollapseInitContainerUsage and AppContainersOnlyDeviceUsage classify by index
    (`cidx < numInit`): the app's card counts as the init peak while the pod starts (right), and is
    dropped when the init container succeeds, so an exclusive card takes another pod."""
    s = ClusterState(SharingConfig())
    s.upsert_node(node("n", gpu("G0", 0)))
    p = pod("a", container("app", limits={_G: 1, _P: 100, _C: 100}), init=[container("warm")])
    first = s.schedule(p)
    assert (first.node, first.annotation) == ("n", "G0,NVIDIA,23034,100:;")
    p["metadata"]["annotations"] = {
        "hami.io/vgpu-node": "n",
        "hami.io/vgpu-devices-allocated": first.annotation,
    }
    p["spec"]["nodeName"] = "n"
    s.upsert_pod(p)
    assert [(u.used, u.usedmem, u.usedcores) for u in s.node_usage("n")] == [(1, 23034, 100)]
    assert s.schedule(gpu_pod("b", mem=1000)).failed_nodes == {"n": "1/1 CardInsufficientMemory"}
    p["status"] = {
        "phase": "Running",
        "initContainerStatuses": [{"name": "warm", "state": {"terminated": {"exitCode": 0}}}],
    }
    s.upsert_pod(p)
    assert [(u.used, u.usedmem, u.usedcores) for u in s.node_usage("n")] == [(0, 0, 0)]
    assert s.schedule(gpu_pod("b", mem=1000)).node == "n"


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("slot=1,core=1", "expected slot, core, and memory weights"),
        ("slot=1,core,memory=1", "expected key=value entries"),
        ("slot=1,slot=2,memory=1", 'duplicate "slot" weight'),
        ("slot=1_0,core=1,memory=1", '"slot" weight must be an integer'),
        ("slot=-1,core=1,memory=1", '"slot" weight must not be negative'),
        ("slot=1,cpu=1,memory=1", 'unknown weight "cpu"'),
        ("slot=0,core=0,memory=0", "at least one weight must be positive"),
    ],
)
def test_device_scoring_weights_errors(value: str, error: str) -> None:
    """pkg/util/device_scoring_weights.go ParseDeviceScoringWeights (strconv.ParseInt, %q quoting); the
    filter fails with `calcScore failed <error> for pod <name>`."""
    s = ClusterState(SharingConfig())
    s.upsert_node(node("n", gpu("G0")))
    d = s.schedule(gpu_pod("x", mem=10, annotations={"hami.io/device-scoring-weights": value}))
    assert d.node is None
    assert d.reason == (
        f'calcScore failed invalid hami.io/device-scoring-weights annotation "{value}": {error} for pod x'
    )
    assert (
        s.schedule(
            gpu_pod("y", mem=10, annotations={"hami.io/device-scoring-weights": "slot=+1,core=0,memory=0"})
        ).node
        == "n"
    )


# --- pkg/device/nvidia/device_test.go TestDevices_Fit, TestFit_DeviceCordon ------------------------


def test_fit_one_card_for_two_requested() -> None:
    """device_test.go TestDevices_Fit "fit fail: AllocatedCardsInsufficientRequest": one card fits but
    two are wanted; the reason counts the partial pick only."""
    dev = usage("dev-0", used=20, count=100, totalmem=1280, usedcores=10)
    res = fit([dev], ContainerDeviceRequest(nums=2, type=NV, memreq=512, mem_percentage=0, coresreq=20))
    assert not res.ok and res.reason == "1/1 AllocatedCardsInsufficientRequest"


def test_fit_partial_allocation_for_three_of_two() -> None:
    """device_test.go TestDevices_Fit "fit fail: partial allocation AllocatedCardsInsufficientRequest for
    multiple cards": 3 wanted, 2 fit -> "2/2 AllocatedCardsInsufficientRequest"."""
    devs = [usage(f"dev-{i}", index=i, count=100, totalmem=1280) for i in range(2)]
    res = fit(devs, ContainerDeviceRequest(nums=3, type=NV, memreq=512, mem_percentage=0, coresreq=20))
    assert not res.ok and res.reason == "2/2 AllocatedCardsInsufficientRequest"


def test_fit_cordoned_card_via_node_annotation() -> None:
    """device_test.go TestFit_DeviceCordon: a UUID in the node's hami.io/device-cordon (whitespace and
    empty entries tolerated) is refused with CardCordoned; the others still fit."""
    s = ClusterState(SharingConfig())
    s.upsert_node(node("n", gpu("G0", 0), gpu("G1", 1), annotations={"hami.io/device-cordon": " G1 ,, "}))
    assert s.schedule(gpu_pod("x", mem=10)).annotation == "G0,NVIDIA,10,0:;"
    s.upsert_node(node("n", gpu("G0", 0), gpu("G1", 1), annotations={"hami.io/device-cordon": "G0,G1"}))
    assert s.schedule(gpu_pod("x", mem=10)).failed_nodes == {"n": "2/2 CardCordoned"}


def _three(**kw: int) -> list[DeviceUsage]:
    return [usage(f"dev-{i}", index=i, count=10, totalmem=8192, **kw) for i in range(3)]


def _scored_node(scores: dict[str, dict[str, int]]) -> dict:
    value = json.dumps([{"uuid": u, "score": s} for u, s in scores.items()])
    return node("n", annotations={"hami.io/node-nvidia-score": value})


_REQ1 = ContainerDeviceRequest(nums=1, type=NV, memreq=100, coresreq=10)
_REQ2 = ContainerDeviceRequest(nums=2, type=NV, memreq=100, coresreq=10)


def test_fit_numa_switching() -> None:
    """device_test.go TestFit_NumaSwitching: scanning dev-2 (NUMA 0), dev-1, dev-0 (NUMA 1) for 2 cards
    with numa-bind: the switch at dev-1 drops dev-2, and dev-1, dev-0 are taken in scan order."""
    devs = _three()
    devs[0].numa = devs[1].numa = 1
    res = fit(devs, _REQ2, {"nvidia.com/numa-bind": "true"})
    assert res.ok and [d.uuid for d in res.devices] == ["dev-1", "dev-0"]


def test_fit_mutex_policy() -> None:
    """device_test.go TestFit_MutexPolicy: mutex skips a used card; two cards cannot be had when one is idle."""
    devs = [usage("used", index=0, used=1, count=10), usage("idle", index=1, count=10)]
    res = fit(devs, _REQ1, policy="mutex")
    assert res.ok and [d.uuid for d in res.devices] == ["idle"]
    assert not fit(devs, _REQ2, policy="mutex").ok


@pytest.mark.parametrize(
    ("scores", "single", "pair"),
    [
        (
            {
                "dev-0": {"dev-1": 100, "dev-2": 200},
                "dev-1": {"dev-0": 100, "dev-2": 150},
                "dev-2": {"dev-0": 200, "dev-1": 150},
            },
            "dev-1",
            {"dev-0", "dev-2"},
        ),
        (
            {
                "dev-0": {"dev-1": -5, "dev-2": -3},
                "dev-1": {"dev-0": -5, "dev-2": -1},
                "dev-2": {"dev-0": -3, "dev-1": -1},
            },
            "dev-0",
            {"dev-1", "dev-2"},
        ),
    ],
)
def test_fit_topology_aware(scores: dict, single: str, pair: set[str]) -> None:
    """device_test.go TestFit_TopologyWorstSingleCard / _TopologyBestCombination / _TopologyNegativeScores:
    one card = the least connected to the other candidates; two = the best-connected pair."""
    node_obj = _scored_node(scores)
    one = fit(_three(), _REQ1, policy="topology-aware", node_obj=node_obj)
    assert one.ok and [d.uuid for d in one.devices] == [single]
    two = fit(_three(), _REQ2, policy="topology-aware", node_obj=node_obj)
    assert two.ok and {d.uuid for d in two.devices} == pair


def test_fit_topology_zero_scores() -> None:
    """device_test.go TestFit_TopologyBestCombinationZeroScores: all-zero pair scores still give 2 cards."""
    zero = {f"dev-{i}": {f"dev-{j}": 0 for j in range(3) if j != i} for i in range(3)}
    res = fit(_three(), _REQ2, policy="topology-aware", node_obj=_scored_node(zero))
    assert res.ok and len(res.devices) == 2


def test_sidecar_counts_as_an_init_container() -> None:
    """v2.10.0 has no notion of a sidecar (HAMi's sidecar design, PR #2723, came after): an init
    container with `restartPolicy: Always` is classified by index as init, so a 4000 MiB sidecar and a
    4000 MiB app container on one card are charged max(4000, 4000), not the 8000 they use. The running
    sidecar's status never shows `terminated`, so the init peak is never released either."""
    s = ClusterState(SharingConfig())
    s.upsert_node(node("n", gpu("G0", 0)))
    sidecar = container("proxy", limits={_G: 1, _M: 4000})
    sidecar["restartPolicy"] = "Always"
    p = pod("a", container("app", limits={_G: 1, _M: 4000}), init=[sidecar])
    decision = s.schedule(p)
    assert decision.annotation == "G0,NVIDIA,4000,0:;G0,NVIDIA,4000,0:;"
    p["metadata"]["annotations"] = {
        "hami.io/vgpu-node": "n",
        "hami.io/vgpu-devices-allocated": decision.annotation,
    }
    p["spec"]["nodeName"] = "n"
    p["status"] = {
        "phase": "Running",
        "initContainerStatuses": [{"name": "proxy", "state": {"running": {}}}],
    }
    s.upsert_pod(p)
    assert [(u.used, u.usedmem) for u in s.node_usage("n")] == [(1, 4000)]
