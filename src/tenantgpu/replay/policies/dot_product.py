"""DotProd (Tetris): score 1 − <free, request> over (cpu, total GPU) normalised by the largest node."""

from __future__ import annotations

import numpy as np

from tenantgpu.replay.cluster import ClusterState, Placement, PodRequest
from tenantgpu.replay.policies.base import MAX_NODE_SCORE, MAX_SPEC_CPU, MAX_SPEC_GPU, pick_highest


class DotProductPolicy:
    name = "dotprod"

    def choose(self, state: ClusterState, pod: PodRequest, rng: np.random.Generator) -> Placement | None:
        candidates = np.flatnonzero(state.feasible(pod))
        if len(candidates) == 0:
            return None
        dot = (
            state.cpu_free[candidates] / MAX_SPEC_CPU * (pod.cpu_milli / MAX_SPEC_CPU)
            + state.gpu_left[candidates] / MAX_SPEC_GPU * (pod.gpu_milli * pod.num_gpu / MAX_SPEC_GPU)
        ) / 2
        scores = (MAX_NODE_SCORE * (1 - dot)).astype(np.int64)
        node = pick_highest(candidates, scores, state.tie_rank)
        return Placement(node, state.gpus_for(node, pod))
