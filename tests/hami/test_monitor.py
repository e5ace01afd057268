"""HAMi v2.10's vGPU monitor metrics (`cmd/vGPUmonitor/metrics.go`): names, label sets, the `zone="vGPU"`
constant label, and what the simulation reports for a node's GPUs and its containers' shared regions."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tenantgpu.hami.monitor import ContainerDevice, HostGPU, monitor_registry

MIB = 1024 * 1024
L4 = "GPU-66cd71c5-880f-53d9-b016-b8bdf67f030e"


def _scrape(
    gpus: list[HostGPU], containers: list[ContainerDevice]
) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = generate_latest(monitor_registry("worker-b1", lambda: gpus, lambda: containers)).decode()
    return {
        family.name: [(sample.labels, sample.value) for sample in family.samples]
        for family in text_string_to_metric_families(text)
    }


def test_host_gpus_carry_nvmls_name_behind_nvidia_and_the_memory_controller_metric_has_no_node() -> None:
    # the memory in use on the card is what its containers hold
    held = [
        ContainerDevice("default", "a", "c", 0, L4, 4000 * MIB, used_bytes=412 * MIB),
        ContainerDevice("default", "b", "c", 0, L4, 4000 * MIB, used_bytes=100 * MIB),
    ]
    metrics = _scrape([HostGPU(0, L4, "NVIDIA L4")], held)
    host = {"node": "worker-b1", "device_index": "0", "device_uuid": L4, "device_type": "NVIDIA-NVIDIA L4"}
    assert metrics["hami_host_gpu_memory_used_bytes"] == [({**host, "zone": "vGPU"}, 512 * MIB)]
    assert metrics["hami_host_gpu_utilization_ratio"] == [({**host, "zone": "vGPU"}, 0.0)]
    without_node = {k: v for k, v in host.items() if k != "node"}
    assert metrics["hami_host_gpu_memory_controller_utilization_ratio"] == [
        ({**without_node, "zone": "vGPU"}, 0.0)
    ]


def test_each_device_of_a_container_reports_its_limit_and_what_it_holds() -> None:
    held = ContainerDevice("default", "infer-0", "c", 0, L4, 4000 * MIB, used_bytes=1000 * MIB)
    metrics = _scrape([], [held])
    labels = {
        "namespace": "default",
        "pod": "infer-0",
        "container": "c",
        "vdevice_index": "0",
        "device_uuid": L4,
        "zone": "vGPU",
    }
    assert metrics["hami_vgpu_memory_limit_bytes"] == [(labels, 4000 * MIB)]
    assert metrics["hami_vgpu_memory_used_bytes"] == [(labels, 1000 * MIB)]
    assert metrics["hami_container_device_memory_bytes"] == [(labels, 1000 * MIB)]
    assert metrics["hami_container_device_utilization_ratio"] == [(labels, 0.0)]
    # context + module + buffer make the total, as HAMi-core's region counts them
    parts = [metrics[f"hami_vgpu_memory_{p}_bytes"][0][1] for p in ("context", "module", "buffer")]
    assert sum(parts) == 1000 * MIB
    # no kernel ran: upstream writes no elapsed time, and the legacy names are off as in the chart
    assert "hami_container_last_kernel_elapsed_seconds" not in metrics
    assert not {"vGPU_device_memory_limit_in_bytes", "HostGPUMemoryUsage"} & set(metrics)
