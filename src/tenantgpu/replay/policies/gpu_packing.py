"""GPU packing: shared GPUs first, then free GPUs on used nodes, then idle nodes (fewest free GPUs first)."""

from __future__ import annotations

import numpy as np

from tenantgpu.replay.cluster import ClusterState, Placement, PodRequest
from tenantgpu.replay.policies.base import MAX_NODE_SCORE, pick_highest
from tenantgpu.replay.trace import MILLI


class GpuPackingPolicy:
    name = "packing"

    def choose(self, state: ClusterState, pod: PodRequest, rng: np.random.Generator) -> Placement | None:
        candidates = np.flatnonzero(state.feasible(pod))
        if len(candidates) == 0:
            return None
        if pod.num_gpu == 0:
            scores = np.zeros(len(candidates), dtype=np.int64)
        else:
            full_free = state.full_free[candidates]
            idle_node = full_free == state.gpu_count[candidates]
            idle_score = np.maximum(MAX_NODE_SCORE // 3 - full_free, full_free)
            if pod.gpu_milli < MILLI:
                rows = state.gpu_free[candidates]
                tightest = np.where(rows >= pod.gpu_milli, rows, MILLI + 1).min(axis=1)
                shared_score = np.maximum(
                    MAX_NODE_SCORE - (tightest * 100 // MILLI) // 10, MAX_NODE_SCORE // 2
                )
                fresh_score = max(MAX_NODE_SCORE // 2 - 1, MAX_NODE_SCORE // 3)
                used_score = np.where(tightest == MILLI, fresh_score, shared_score)
            else:
                used_score = np.full(
                    len(candidates), max(MAX_NODE_SCORE // 2 - pod.num_gpu, MAX_NODE_SCORE // 3)
                )
            scores = np.where(idle_node, idle_score, used_score)
        node = pick_highest(candidates, scores, state.tie_rank)
        return Placement(node, state.gpus_for(node, pod))
