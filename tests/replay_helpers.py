"""Small hand-made clusters and workloads for the replay tests."""

from __future__ import annotations

import numpy as np

from tenantgpu.replay.cluster import ClusterState, PodRequest
from tenantgpu.replay.fragmentation import FragmentationModel, TypicalPods
from tenantgpu.replay.trace import ANY_MODEL, NodeList, PodList


def make_nodes(*shapes: tuple[int, int, int, str]) -> NodeList:
    """Nodes from (vCPU, GiB, GPUs, model) tuples."""
    models: list[str] = []
    index = []
    for _, _, gpus, model in shapes:
        if gpus and model not in models:
            models.append(model)
        index.append(models.index(model) if gpus else -1)
    return NodeList(
        names=tuple(f"node-{i}" for i in range(len(shapes))),
        cpu_milli=np.array([s[0] * 1000 for s in shapes], dtype=np.int64),
        memory_mib=np.array([s[1] * 1024 for s in shapes], dtype=np.int64),
        gpus=np.array([s[2] for s in shapes], dtype=np.int64),
        model_index=np.array(index, dtype=np.int64),
        models=tuple(models),
    )


def make_pods(*shapes: tuple[int, int, int, int] | tuple[int, int, int, int, str]) -> PodList:
    """Pods from (vCPU, GiB, num_gpu, gpu_milli[, gpu_spec]) tuples."""
    return PodList(
        names=tuple(f"pod-{i}" for i in range(len(shapes))),
        cpu_milli=np.array([s[0] * 1000 for s in shapes], dtype=np.int64),
        memory_mib=np.array([s[1] * 1024 for s in shapes], dtype=np.int64),
        num_gpu=np.array([s[2] for s in shapes], dtype=np.int64),
        gpu_milli=np.array([s[3] for s in shapes], dtype=np.int64),
        gpu_spec=tuple(s[4] if len(s) > 4 else "" for s in shapes),  # type: ignore[misc]
    )


def typical(*shapes: tuple[int, int, int, float]) -> TypicalPods:
    """Typical pods from (cpu milli, gpu milli, num_gpu, probability), any model."""
    return TypicalPods(
        cpu_milli=np.array([s[0] for s in shapes], dtype=np.int64),
        gpu_milli=np.array([s[1] for s in shapes], dtype=np.int64),
        num_gpu=np.array([s[2] for s in shapes], dtype=np.int64),
        spec_mask=np.full(len(shapes), ANY_MODEL, dtype=np.int64),
        probability=np.array([s[3] for s in shapes], dtype=np.float64),
    )


def state_for(nodes: NodeList, typical_pods: TypicalPods | None = None) -> ClusterState:
    t = typical_pods or typical((1000, 1000, 1, 1.0))
    return ClusterState(nodes, FragmentationModel(t, nodes.model_bit))


def request(cpu: int, gib: int, num: int, milli: int, mask: int = ANY_MODEL) -> PodRequest:
    return PodRequest(cpu * 1000, gib * 1024, num, milli, mask, num * milli)
