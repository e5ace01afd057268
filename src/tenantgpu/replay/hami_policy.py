"""HAMi's own placement (node policy × GPU policy) in replay, decided by `tenantgpu.gpushare` — the one
package that knows HAMi's fit and scores. Trace nodes become Node objects carrying the device plugin's
`hami.io/node-nvidia-register` annotation; trace pods become Pods asking `nvidia.com/gpu`, and, for a
share, `nvidia.com/gpucores` = `nvidia.com/gpumem-percentage` = share/10 (rounded up)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tenantgpu.gpushare import ClusterState as HamiState
from tenantgpu.gpushare import DeviceInfo, SharingConfig, encode_node_register
from tenantgpu.gpushare import annotations as ann
from tenantgpu.replay.cluster import ClusterState, Placement, PodRequest
from tenantgpu.replay.trace import ANY_MODEL, MILLI, NodeList

# Per-GPU memory in MiB by trace model: the FGD simulator's MapGpuTypeMemoryMiB
# (pkg/type/open-gpu-share/utils/const.go). G2 and G3 are its round placeholders, not real specs;
# with gpumem-percentage requests only the ratios matter.
GPU_MEMORY_MIB = {
    "T4": 15109,
    "V100M16": 16160,
    "P100": 16280,
    "A10": 22731,
    "V100M32": 32510,
    "A100": 81251,
    "G1": 10000,
    "G2": 20000,
    "G3": 30000,
}
DEFAULT_GPU_MEMORY_MIB = 16384
POD_SLOTS = 1000  # allocatable pods per node: high, so only GPU slots (deviceSplitCount) limit sharing


def gpu_type(model: str) -> str:
    """The device plugin's type string: NVML names start with "NVIDIA"."""
    return model if model.upper().startswith("NVIDIA") else f"NVIDIA {model}"


def node_object(nodes: NodeList, row: int, split: int) -> dict[str, Any]:
    """A Kubernetes Node for trace row `row`, registered the way HAMi's device plugin does it."""
    model = nodes.models[nodes.model_index[row]] if nodes.model_index[row] >= 0 else ""
    gpus = int(nodes.gpus[row])
    devices = [
        DeviceInfo(
            id=f"GPU-{row:05d}-{i}",
            index=i,
            count=split,
            devmem=GPU_MEMORY_MIB.get(model, DEFAULT_GPU_MEMORY_MIB),
            devcore=100,
            type=gpu_type(model),
            health=True,
        )
        for i in range(gpus)
    ]
    annotations = {ann.NODE_REGISTER: encode_node_register(devices)} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": nodes.names[row], "annotations": annotations},
        "status": {
            "allocatable": {
                "cpu": f"{int(nodes.cpu_milli[row])}m",
                "memory": f"{int(nodes.memory_mib[row])}Mi",
                "pods": str(POD_SLOTS),
                "nvidia.com/gpu": str(gpus * split),
            }
        },
    }


def pod_object(name: str, pod: PodRequest, models: tuple[str, ...]) -> dict[str, Any]:
    """A Kubernetes Pod asking HAMi for the trace pod's GPUs, with its cpu and memory requests."""
    resources: dict[str, Any] = {
        "requests": {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"},
    }
    annotations: dict[str, str] = {}
    if pod.num_gpu:
        percent = 100 if pod.gpu_milli >= MILLI else max(1, math.ceil(pod.gpu_milli / 10))
        resources["limits"] = {
            "nvidia.com/gpu": str(pod.num_gpu),
            "nvidia.com/gpucores": str(percent),
            "nvidia.com/gpumem-percentage": str(percent),
        }
        if pod.spec_mask != ANY_MODEL:
            allowed = [m for i, m in enumerate(models) if (pod.spec_mask >> i) & 1]
            annotations[ann.USE_GPU_TYPE] = ",".join(allowed) if allowed else "no-such-model"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "replay", "annotations": annotations},
        "spec": {"schedulerName": "hami-scheduler", "containers": [{"name": "main", "resources": resources}]},
    }


class HamiPolicy:
    """Asks gpushare's ClusterState for each pod, like HAMi's scheduler extender, and records the pod it
    placed (HAMi caches the allocation in Filter, before Bind). Ties go to the node registered first, so
    nodes are registered in the run's random tie order, as for the paper's policies."""

    def __init__(self, node_policy: str, gpu_policy: str, device_split_count: int = 10) -> None:
        self.name = f"hami-{node_policy}"
        self.cfg = SharingConfig(
            node_policy=node_policy,  # type: ignore[arg-type]
            gpu_policy=gpu_policy,  # type: ignore[arg-type]
            device_split_count=device_split_count,
        )
        self._hami: HamiState | None = None
        self._rows: dict[str, int] = {}
        self._placed = 0

    def _bind(self, state: ClusterState) -> HamiState:
        hami = HamiState(self.cfg)
        nodes = state.nodes
        for row in np.argsort(state.tie_rank, kind="stable"):
            hami.upsert_node(node_object(nodes, int(row), self.cfg.device_split_count))
            self._rows[nodes.names[row]] = int(row)
        return hami

    def choose(self, state: ClusterState, pod: PodRequest, rng: np.random.Generator) -> Placement | None:
        if self._hami is None:
            self._hami = self._bind(state)
        obj = pod_object(f"pod-{self._placed}", pod, state.nodes.models)
        decision = self._hami.schedule(obj)
        if decision.node is None:
            return None
        row = self._rows[decision.node]
        gpus = tuple(int(d.uuid.rsplit("-", 1)[1]) for d in (decision.devices or [[]])[0])
        obj["metadata"]["annotations"].update(decision.scheduled_annotations(0))
        obj["spec"]["nodeName"] = decision.node
        obj["status"] = {"phase": "Running"}
        self._hami.upsert_pod(obj)
        self._placed += 1
        return Placement(row, gpus)
