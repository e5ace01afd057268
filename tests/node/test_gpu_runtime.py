"""The GPU runtime model: HAMi-core's memory cap seen from inside, CUDA OOM above it, compute shares."""

from __future__ import annotations

import pytest

from tenantgpu.node.gpu_runtime import (
    GpuView,
    compute_shares,
    nvidia_smi,
    parse_duration,
    parse_memory_limit,
    plan_workload,
    sm_limit,
    visible_gpus,
)

DEVICES = {"GPU-a": ("NVIDIA A100-SXM4-80GB", 81920), "GPU-b": ("NVIDIA A100-SXM4-80GB", 81920)}
ENV = {"NVIDIA_VISIBLE_DEVICES": "GPU-a", "CUDA_DEVICE_MEMORY_LIMIT_0": "8192m", "CUDA_DEVICE_SM_LIMIT": "10"}


def test_durations() -> None:
    assert parse_duration("30s") == 30
    assert parse_duration("1h30m") == 5400
    assert parse_duration("500ms") == 0.5
    assert parse_duration("12") == 12
    with pytest.raises(ValueError):
        parse_duration("soon")


def test_memory_limit_units_follow_hami_core() -> None:
    assert parse_memory_limit("8192m") == 8192
    assert parse_memory_limit("2g") == 2048
    assert parse_memory_limit("0") is None
    assert parse_memory_limit(str(3 * 1024 * 1024)) == 3


def test_nvidia_smi_reports_the_limit_as_total() -> None:
    gpus = visible_gpus(ENV, DEVICES)
    assert gpus[0].total_mib == 8192
    table = nvidia_smi(gpus)
    assert "0MiB / 8192MiB" in table and "81920MiB" not in table


def test_nvidia_smi_shows_whole_uuids_in_an_aligned_table() -> None:
    gpus = [
        GpuView(0, "GPU-7d0b2d14-f139-57bd-85ef-05aab570c76e", "NVIDIA A100-SXM4-80GB", 81920, 8000),
        GpuView(1, "GPU-46986f38-acdc-55e3-9c8a-df32848cf05d", "NVIDIA L4", 23034, None),
    ]
    lines = nvidia_smi(gpus, used_mib=3000).splitlines()
    assert len({len(line) for line in lines}) == 1  # every border and row ends in the same column
    assert any(
        "GPU-7d0b2d14-f139-57bd-85ef-05aab570c76e" in line and "3000MiB / 8000MiB" in line for line in lines
    )
    assert any(
        "GPU-46986f38-acdc-55e3-9c8a-df32848cf05d" in line and "3000MiB / 23034MiB" in line for line in lines
    )


def test_multi_gpu_container_sees_each_limit() -> None:
    env = {
        "NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b",
        "CUDA_DEVICE_MEMORY_LIMIT_0": "1000m",
        "CUDA_DEVICE_MEMORY_LIMIT_1": "2000m",
    }
    assert [g.total_mib for g in visible_gpus(env, DEVICES)] == [1000, 2000]


def test_allocation_above_the_limit_is_a_cuda_oom() -> None:
    gpus = visible_gpus(ENV, DEVICES)
    plan = plan_workload({"tenantgpu.io/gpu-memory-used": "9000"}, ENV, gpus, 0.1)
    assert plan.fails and plan.exit_code == 1
    assert "CUDA_ERROR_OUT_OF_MEMORY" in plan.log_lines[-1]
    ok = plan_workload(
        {"tenantgpu.io/gpu-memory-used": "8000", "tenantgpu.io/run-for": "30s"}, ENV, gpus, 0.1
    )
    assert not ok.fails and ok.runs_for == 30


def test_gpu_work_is_stretched_by_the_compute_share() -> None:
    gpus = visible_gpus(ENV, DEVICES)
    plan = plan_workload({"tenantgpu.io/gpu-work": "3s"}, ENV, gpus, 0.25)
    assert plan.runs_for == pytest.approx(12.0)
    assert plan_workload({}, ENV, gpus, 1.0).runs_for is None


def test_the_annotations_that_set_a_run_time_are_the_ones_a_container_command_gives_way_to() -> None:
    gpus = visible_gpus(ENV, DEVICES)
    assert plan_workload({"tenantgpu.io/gpu-work": "3s"}, ENV, gpus, 0.0).timed  # even with no share
    assert plan_workload({"tenantgpu.io/run-for": "1s"}, ENV, gpus, 1.0).timed
    assert not plan_workload({"tenantgpu.io/gpu-memory-used": "10"}, ENV, gpus, 1.0).timed
    assert not plan_workload({}, ENV, gpus, 1.0).timed


def test_sm_limit_zero_or_full_is_unthrottled() -> None:
    assert sm_limit({"CUDA_DEVICE_SM_LIMIT": "30"}) == 30
    assert sm_limit({"CUDA_DEVICE_SM_LIMIT": "0"}) is None
    assert sm_limit({"CUDA_DEVICE_SM_LIMIT": "100"}) is None
    assert sm_limit({"CUDA_DEVICE_SM_LIMIT": "30", "GPU_CORE_UTILIZATION_POLICY": "disable"}) is None


def test_compute_shares_on_one_card() -> None:
    assert compute_shares({"a": 30, "b": 20}) == {"a": 0.3, "b": 0.2}
    shares = compute_shares({"a": 30, "b": None, "c": None})
    assert shares["b"] == pytest.approx(0.35) and shares["c"] == pytest.approx(0.35)
    over = compute_shares({"a": 80, "b": 80})
    assert over["a"] == pytest.approx(0.5)
    assert compute_shares({"a": None}) == {"a": 1.0}
