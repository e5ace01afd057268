"""GPU clustering: keep pods of one kind (shared, 1-, 2-, 4-, 8-GPU) together, fuller nodes first."""

from __future__ import annotations

import numpy as np

from tenantgpu.replay.cluster import ClusterState, Placement, PodRequest
from tenantgpu.replay.policies.base import MAX_NODE_SCORE, MAX_SPEC_GPU, pick_highest


class GpuClusteringPolicy:
    name = "clustering"

    def choose(self, state: ClusterState, pod: PodRequest, rng: np.random.Generator) -> Placement | None:
        candidates = np.flatnonzero(state.feasible(pod))
        if len(candidates) == 0:
            return None
        tag = pod.affinity_tag
        if tag == 0:
            scores = np.zeros(len(candidates), dtype=np.int64)
        else:
            kinds = state.affinity[candidates, 1:]
            kinds_present = (kinds > 0).sum(axis=1)
            same = state.affinity[candidates, tag] > 0
            # Four tiers: only my kind > my kind among others > empty of GPU pods > other kinds only.
            tier = np.where(same, np.where(kinds_present == 1, 3, 2), np.where(kinds_present == 0, 1, 0))
            quarter = MAX_NODE_SCORE // 4
            scores = quarter * (MAX_SPEC_GPU - state.gpu_left[candidates]) // MAX_SPEC_GPU + quarter * tier
        node = pick_highest(candidates, scores, state.tie_rank)
        return Placement(node, state.gpus_for(node, pod))
