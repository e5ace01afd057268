"""The replayed cluster's state as arrays: free cpu, memory and GPU share per node, plus fragmentation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tenantgpu.replay.fragmentation import FragmentationModel
from tenantgpu.replay.trace import ANY_MODEL, MILLI, NodeList

NO_GPU = -1  # padding for GPU slots a node does not have: never fits, counts as zero free share
AFFINITY_TAGS = 7  # none, shared, 1-, 2-, 4-, 8-GPU, other (the GPU-clustering policy's pod classes)


@dataclass(frozen=True, slots=True)
class PodRequest:
    """One pod as the scheduler sees it; `request_milli` is what the trace asked (used for accounting)."""

    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    spec_mask: int
    request_milli: int

    @property
    def is_shared(self) -> bool:
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def affinity_tag(self) -> int:
        if self.num_gpu == 0:
            return 0
        if self.is_shared:
            return 1
        return {1: 2, 2: 3, 4: 4, 8: 5}.get(self.num_gpu, 6)

    def rounded_up(self) -> PodRequest:
        """The same pod with every GPU share rounded up to a whole GPU (no sharing)."""
        if self.num_gpu == 0 or self.gpu_milli == MILLI:
            return self
        return PodRequest(
            self.cpu_milli, self.memory_mib, self.num_gpu, MILLI, self.spec_mask, self.request_milli
        )


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a pod goes: a node row and the GPU slots it takes (each charged the pod's share)."""

    node: int
    gpus: tuple[int, ...] = ()


class ClusterState:
    """Mutable free-resource arrays for one replay run; `place` is the only way to change them."""

    def __init__(self, nodes: NodeList, frag: FragmentationModel, tie_rank: np.ndarray | None = None) -> None:
        self.nodes = nodes
        # Rank of each node when scores tie (lower wins); the replay draws it once per run from the seed.
        self.tie_rank = np.arange(len(nodes)) if tie_rank is None else np.asarray(tie_rank)
        self.frag_model = frag
        n = len(nodes)
        width = max(int(nodes.gpus.max()), 1)
        self.gpu_count = nodes.gpus.astype(np.int64)
        self.cpu_capacity = nodes.cpu_milli.astype(np.int64)
        self.cpu_free = nodes.cpu_milli.astype(np.int64).copy()
        self.mem_free = nodes.memory_mib.astype(np.int64).copy()
        slots = np.arange(width)[None, :] < self.gpu_count[:, None]
        self.gpu_free = np.where(slots, MILLI, NO_GPU).astype(np.int64)
        self.node_bit = nodes.model_bit
        self.full_free = self.gpu_count.copy()
        self.max_free = np.where(self.gpu_count > 0, MILLI, NO_GPU).astype(np.int64)
        self.gpu_left = self.gpu_count * MILLI
        self.affinity = np.zeros((n, AFFINITY_TAGS), dtype=np.int64)
        self.capacity_milli = int(self.gpu_count.sum()) * MILLI
        self.allocated_milli = 0
        rows = np.arange(n)
        self.fit_count, self.small = frag.counts(self.gpu_free)
        self.frag = frag.combine(rows, self.gpu_left, self.cpu_free, self.fit_count, self.small)

    def feasible(self, pod: PodRequest) -> np.ndarray:
        """Nodes with room for the pod: cpu, memory, an accepted GPU model and enough free GPU share."""
        ok = (self.cpu_free >= pod.cpu_milli) & (self.mem_free >= pod.memory_mib)
        if pod.num_gpu == 0:
            return ok
        ok &= self.node_bit != 0
        if pod.spec_mask != ANY_MODEL:
            ok &= (self.node_bit & pod.spec_mask) != 0
        if pod.gpu_milli < MILLI:
            return ok & (self.max_free >= pod.gpu_milli)
        return ok & (self.full_free >= pod.num_gpu)

    def exclusive_gpus(self, node: int, count: int) -> tuple[int, ...]:
        """The first `count` fully free GPUs of a node, by index (the simulator's exclusive allocation)."""
        return tuple(int(i) for i in np.flatnonzero(self.gpu_free[node] == MILLI)[:count])

    def best_fit_gpu(self, node: int, share: int) -> int:
        """The GPU with the least free share that still holds `share` (lowest index on ties)."""
        row = self.gpu_free[node]
        return int(np.argmin(np.where(row >= share, row, np.iinfo(np.int64).max)))

    def gpus_for(self, node: int, pod: PodRequest) -> tuple[int, ...]:
        """Best-fit GPU for a shared pod, the first free whole GPUs otherwise (the simulator's default)."""
        if pod.num_gpu == 0:
            return ()
        if pod.gpu_milli < MILLI:
            return (self.best_fit_gpu(node, pod.gpu_milli),)
        return self.exclusive_gpus(node, pod.num_gpu)

    def place(self, placement: Placement, pod: PodRequest) -> None:
        """Charge the pod to the node and its GPUs; raises if that would over-commit anything."""
        node = placement.node
        if self.cpu_free[node] < pod.cpu_milli or self.mem_free[node] < pod.memory_mib:
            raise ValueError(f"node {node} lacks cpu or memory for the pod")
        if len(placement.gpus) != pod.num_gpu or len(set(placement.gpus)) != pod.num_gpu:
            raise ValueError(f"pod needs {pod.num_gpu} distinct GPUs, got {placement.gpus}")
        row = self.gpu_free[node]
        for gpu in placement.gpus:
            if row[gpu] < pod.gpu_milli:
                raise ValueError(f"GPU {gpu} of node {node} has {row[gpu]} free, pod needs {pod.gpu_milli}")
        self.cpu_free[node] -= pod.cpu_milli
        self.mem_free[node] -= pod.memory_mib
        for gpu in placement.gpus:
            row[gpu] -= pod.gpu_milli
        self.full_free[node] = int((row == MILLI).sum())
        self.max_free[node] = int(row.max()) if self.gpu_count[node] > 0 else NO_GPU
        self.gpu_left[node] -= pod.gpu_milli * pod.num_gpu
        tag = pod.affinity_tag
        if tag:
            self.affinity[node, tag] += 1
        self.allocated_milli += pod.request_milli
        rows = np.array([node])
        fit_count, small = self.frag_model.counts(self.gpu_free[rows])
        self.fit_count[node] = fit_count[0]
        self.small[node] = small[0]
        self.frag[node] = self.frag_model.combine(
            rows, self.gpu_left[rows], self.cpu_free[rows], fit_count, small
        )[0]

    @property
    def fragmentation_milli(self) -> float:
        return float(self.frag.sum())
