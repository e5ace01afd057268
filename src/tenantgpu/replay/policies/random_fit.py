"""Random: any node that fits, and for a shared pod any GPU that fits (the paper's weakest baseline)."""

from __future__ import annotations

import numpy as np

from tenantgpu.replay.cluster import ClusterState, Placement, PodRequest
from tenantgpu.replay.trace import MILLI


class RandomPolicy:
    name = "random"

    def choose(self, state: ClusterState, pod: PodRequest, rng: np.random.Generator) -> Placement | None:
        candidates = np.flatnonzero(state.feasible(pod))
        if len(candidates) == 0:
            return None
        node = int(candidates[int(rng.integers(len(candidates)))])
        if pod.num_gpu == 0:
            return Placement(node)
        if pod.gpu_milli < MILLI:
            fitting = np.flatnonzero(state.gpu_free[node] >= pod.gpu_milli)
            return Placement(node, (int(fitting[int(rng.integers(len(fitting)))]),))
        return Placement(node, state.exclusive_gpus(node, pod.num_gpu))
