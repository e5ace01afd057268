"""Best fit: the node left with the least weighted free cpu and GPU after the pod, min-max normalised."""

from __future__ import annotations

import numpy as np

from tenantgpu.replay.cluster import ClusterState, Placement, PodRequest
from tenantgpu.replay.policies.base import (
    MAX_NODE_SCORE,
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    normalize_scores,
    pick_highest,
)


def best_fit_scores(state: ClusterState, pod: PodRequest, candidates: np.ndarray) -> np.ndarray:
    leftover = (state.cpu_free[candidates] - pod.cpu_milli) / MAX_SPEC_CPU * 0.5 + (
        state.gpu_left[candidates] - pod.gpu_milli * pod.num_gpu
    ) / MAX_SPEC_GPU * 0.5
    return normalize_scores(((1.0 - leftover) * MAX_NODE_SCORE).astype(np.int64))


class BestFitPolicy:
    name = "bestfit"

    def choose(self, state: ClusterState, pod: PodRequest, rng: np.random.Generator) -> Placement | None:
        candidates = np.flatnonzero(state.feasible(pod))
        if len(candidates) == 0:
            return None
        node = pick_highest(candidates, best_fit_scores(state, pod, candidates), state.tie_rank)
        return Placement(node, state.gpus_for(node, pod))


class WholeGpuPolicy:
    """No sharing: every GPU share rounds up to a whole GPU, then best fit places it (today's baseline)."""

    name = "whole-gpu"
    rounds_up = True

    def choose(self, state: ClusterState, pod: PodRequest, rng: np.random.Generator) -> Placement | None:
        return BestFitPolicy().choose(state, pod.rounded_up(), rng)
