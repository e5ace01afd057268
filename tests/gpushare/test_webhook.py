"""mutate_pod does what HAMi v2.10's webhook does (pkg/scheduler/webhook.go, nvidia MutateAdmission)."""

import dataclasses

from gpushare_objects import container, gpu_pod, pod

from tenantgpu.gpushare import QuotaBook, SharingConfig, mutate_pod, pod_requests_gpu
from tenantgpu.gpushare.jsonpatch import apply

CFG = SharingConfig()


def limits(admission, index: int = 0) -> dict:  # type: ignore[no-untyped-def]
    return admission.pod["spec"]["containers"][index]["resources"]["limits"]


def test_bare_gpu_becomes_an_exclusive_card() -> None:
    """PR #1354 defaultExclusiveCoreIfNeeded: nvidia.com/gpu alone => gpucores 100."""
    out = mutate_pod(gpu_pod("p"), CFG)
    assert out.allowed and out.mutated
    assert limits(out)["nvidia.com/gpucores"] == "100"
    assert out.pod["spec"]["schedulerName"] == "hami-scheduler"
    assert apply(gpu_pod("p"), out.patch) == out.pod


def test_full_percentage_is_also_exclusive_but_partial_is_not() -> None:
    assert limits(mutate_pod(gpu_pod("p", pct=100), CFG))["nvidia.com/gpucores"] == "100"
    assert "nvidia.com/gpucores" not in limits(mutate_pod(gpu_pod("p", pct=50), CFG))
    assert "nvidia.com/gpucores" not in limits(mutate_pod(gpu_pod("p", mem=1000), CFG))


def test_explicit_cores_are_left_alone() -> None:
    assert limits(mutate_pod(gpu_pod("p", cores=0), CFG))["nvidia.com/gpucores"] == 0


def test_default_gpu_num_is_added_for_memory_or_cores_alone() -> None:
    out = mutate_pod(pod("p", container(limits={"nvidia.com/gpumem": 1000})), CFG)
    assert limits(out)["nvidia.com/gpu"] == "1"
    assert pod_requests_gpu(out.pod, CFG)
    off = mutate_pod(
        pod("p", container(limits={"nvidia.com/gpumem": 1000})), dataclasses.replace(CFG, default_gpu_num=0)
    )
    assert "nvidia.com/gpu" not in limits(off) and "schedulerName" not in off.pod["spec"]


def test_privileged_gpu_container_is_denied() -> None:
    p = pod("p", container(limits={"nvidia.com/gpu": 1}, securityContext={"privileged": True}))
    out = mutate_pod(p, CFG)
    assert not out.allowed and out.message == "container main is privileged"


def test_privileged_without_gpu_is_fine() -> None:
    out = mutate_pod(pod("p", container(securityContext={"privileged": True})), CFG)
    assert out.allowed and out.patch == []


def test_node_name_is_denied() -> None:
    out = mutate_pod(gpu_pod("p", nodeName="n1"), CFG)
    assert not out.allowed and out.message == "pod has node assigned"


def test_percentage_out_of_range_is_an_error() -> None:
    out = mutate_pod(gpu_pod("p", pct=101), CFG)
    assert not out.allowed and out.code == 500
    assert out.message == (
        "invalid nvidia.com/gpumem-percentage value 101 in container main: "
        "must be an integer between 0 and 100"
    )


def test_other_schedulers_are_skipped_default_scheduler_is_taken_over() -> None:
    skipped = mutate_pod(gpu_pod("p", schedulerName="volcano"), CFG)
    assert skipped.allowed and not skipped.mutated and skipped.patch == []
    taken = mutate_pod(gpu_pod("p", schedulerName="default-scheduler"), CFG)
    assert taken.pod["spec"]["schedulerName"] == "hami-scheduler"
    kept = mutate_pod(
        gpu_pod("p", schedulerName="default-scheduler"),
        dataclasses.replace(CFG, force_overwrite_default_scheduler=False),
    )
    assert not kept.mutated


def test_no_containers_is_denied() -> None:
    p = pod("p")
    p["spec"]["containers"] = []
    assert mutate_pod(p, CFG).message == "pod has no containers"


def test_priority_and_core_policy_env() -> None:
    p = pod("p", container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10, "nvidia.com/priority": 0}))
    env = mutate_pod(p, dataclasses.replace(CFG, gpu_core_policy="force")).pod["spec"]["containers"][0]["env"]
    assert {"name": "CUDA_TASK_PRIORITY", "value": "0"} in env
    assert {"name": "GPU_CORE_UTILIZATION_POLICY", "value": "force"} in env


def test_quota_denial_counts_memory_times_gpus() -> None:
    """fitResourceQuota: sum over app containers of Memreq x Nums against limits.nvidia.com/gpumem."""
    book = QuotaBook(["nvidia.com/gpumem", "nvidia.com/gpucores"], memory_resource="nvidia.com/gpumem")
    book.upsert_quota(
        {
            "kind": "ResourceQuota",
            "metadata": {"name": "q", "namespace": "team"},
            "spec": {"hard": {"limits.nvidia.com/gpumem": "20000", "requests.nvidia.com/gpumem": "1"}},
        }
    )
    ok = mutate_pod(gpu_pod("p", gpus=2, mem=10000, namespace="team"), CFG, book)
    assert ok.allowed
    denied = mutate_pod(gpu_pod("p", gpus=3, mem=10000, namespace="team"), CFG, book)
    assert not denied.allowed and denied.message == "exceeding resource quota"
    other = mutate_pod(gpu_pod("p", gpus=3, mem=10000, namespace="elsewhere"), CFG, book)
    assert other.allowed


def test_overwrite_env_hides_gpus_from_containers_without_them() -> None:
    """MutateAdmission: no HAMi resource and overwriteEnv -> NVIDIA_VISIBLE_DEVICES=none."""
    cfg = dataclasses.replace(CFG, overwrite_env=True)
    out = mutate_pod(pod("p", container("cpu-only"), container("gpu", limits={"nvidia.com/gpu": 1})), cfg)
    cpu_only, with_gpu = out.pod["spec"]["containers"]
    assert cpu_only["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]
    assert "env" not in with_gpu


def test_gpu_count_only_in_requests_still_gets_exclusive_cores() -> None:
    """defaultExclusiveCoreIfNeeded looks at limits and requests (resourcePresent)."""
    out = mutate_pod(pod("p", container(requests={"nvidia.com/gpu": 1})), CFG)
    assert limits(out) == {"nvidia.com/gpucores": "100"}
    assert out.pod["spec"]["schedulerName"] == "hami-scheduler"
