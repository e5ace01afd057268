"""The scheduler orchestration knows no vendor: a second device vendor plugs in beside NVIDIA (HAMi's
`Devices` interface, pkg/device/devices.go)."""

from collections.abc import Sequence
from typing import Any

from gpushare_objects import gpu, node

from tenantgpu.gpushare import ClusterState, ContainerDevice, DeviceInfo, SharingConfig, encode_node_register
from tenantgpu.gpushare.codec import decode_node_register
from tenantgpu.gpushare.device import DeviceUsage
from tenantgpu.gpushare.nvidia import NvidiaGPUs
from tenantgpu.gpushare.request import ContainerDeviceRequest, resource_int
from tenantgpu.gpushare.vendor import FitContext, FitResult


class FakeAccelerators:
    """A toy vendor: `fake.com/vaccel` cards with `fake.com/vmem` MiB each, first fit from the tail."""

    name = "FAKE"
    memory_resource = "fake.com/vmem"
    core_resource = "fake.com/vcores"
    allocated_annotation = "hami.io/fake-devices-allocated"
    to_allocate_annotation = "hami.io/fake-devices-to-allocate"

    def container_request(self, container: dict[str, Any]) -> ContainerDeviceRequest | None:
        nums = resource_int(container, "fake.com/vaccel")
        if not nums:
            return None
        return ContainerDeviceRequest(nums, "FAKE", resource_int(container, "fake.com/vmem") or 0, 101, 0)

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        return self.container_request(container) is not None

    def node_devices(self, node: dict[str, Any]) -> list[DeviceInfo] | None:
        raw = (node["metadata"].get("annotations") or {}).get("hami.io/node-fake-register")
        return None if raw is None else decode_node_register(raw)

    def owns(self, device: DeviceUsage) -> bool:
        return "FAKE" in device.type

    def fit(
        self, devices: Sequence[DeviceUsage], request: ContainerDeviceRequest, ctx: FitContext
    ) -> FitResult:
        chosen = [
            ContainerDevice(d.id, "FAKE", request.memreq, 0)
            for d in reversed(devices)
            if d.totalmem - d.usedmem >= request.memreq and d.used < d.count
        ][: request.nums]
        if len(chosen) == request.nums:
            return FitResult(True, chosen)
        return FitResult(False, [], f"{len(devices)}/{len(devices)} FakeInsufficientMemory")


def test_a_second_vendor_is_scheduled_and_accounted_beside_nvidia() -> None:
    cfg = SharingConfig()
    state = ClusterState(cfg, vendors=[NvidiaGPUs(cfg), FakeAccelerators()])
    both = node("mixed", gpu("G0"))
    both["metadata"]["annotations"]["hami.io/node-fake-register"] = encode_node_register(
        [DeviceInfo("F0", 0, 4, 1000, 100, "FAKE-X1", 0, "hami-core", True)]
    )
    state.upsert_node(both)
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100, "fake.com/vaccel": 1, "fake.com/vmem": 600}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "annotations": {}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]},
    }
    decision = state.schedule(pod)
    notes = decision.scheduled_annotations(1)
    assert notes["hami.io/vgpu-devices-allocated"] == "G0,NVIDIA,100,0:;"
    assert notes["hami.io/fake-devices-allocated"] == "F0,FAKE,600,0:;"
    pod["metadata"]["annotations"].update(notes)
    state.upsert_pod(pod)
    assert {(v.uuid, v.usedmem) for v in state.node_usage("mixed")} == {("G0", 100), ("F0", 600)}
    # the fake card has 400 MiB left: the vendor's own reason comes back through the orchestration
    again = {**pod, "metadata": {"name": "q", "namespace": "default", "annotations": {}}}
    assert state.schedule(again).failed_nodes == {"mixed": "1/1 FakeInsufficientMemory"}
