"""fgd-pack (ours): FGD's fragmentation score, with ties settled toward consolidation.

FGD's score is an integer (sigmoid of the fragmentation change, 0..100), so many nodes tie and the
simulated scheduler settles ties by a random node order fixed for the run. That order already acts as
first fit; the runs show the order matters a lot (8-GPU nodes first: 12 % unallocated instead of 4.6 %).
fgd-pack keeps FGD's score and the random order, and inserts two tie-breakers before the order:
  1. among GPUs of a node with the best score, the one with the least free share (best fit), so a
     shared GPU is filled before another is opened;
  2. among the best-scoring nodes, those already in use (some GPU share or cpu allocated) before idle
     ones, so idle nodes stay whole for the multi-GPU and whole-GPU pods still to come.
"""

from __future__ import annotations

import numpy as np

from tenantgpu.replay.cluster import ClusterState, Placement, PodRequest
from tenantgpu.replay.policies.fgd import (
    fragmentation_after_exclusive,
    fragmentation_after_shared,
    sigmoid_score,
)
from tenantgpu.replay.trace import MILLI


def _first_in_order(candidates: np.ndarray, score: np.ndarray, in_use: np.ndarray, rank: np.ndarray) -> int:
    best = score == score.max()
    preferred = best & in_use if (best & in_use).any() else best
    tied = candidates[preferred]
    return int(tied[np.argmin(rank[tied])])


class FgdPackPolicy:
    name = "fgd-pack"

    def choose(self, state: ClusterState, pod: PodRequest, rng: np.random.Generator) -> Placement | None:
        candidates = np.flatnonzero(state.feasible(pod))
        if len(candidates) == 0:
            return None
        before = state.frag[candidates]
        in_use = (state.gpu_left[candidates] < state.gpu_count[candidates] * MILLI) | (
            state.cpu_free[candidates] < state.cpu_capacity[candidates]
        )
        if pod.is_shared:
            after, valid = fragmentation_after_shared(state, pod, candidates)
            gpu_scores = np.where(valid, sigmoid_score(before[:, None] - after), -1)
            free = state.gpu_free[candidates]
            # score first, then the tightest GPU: free share is below 2·MILLI, so it never outweighs a point
            best_gpu = np.argmax(gpu_scores * (2 * MILLI) - np.where(valid, free, 0), axis=1)
            scores = gpu_scores[np.arange(len(candidates)), best_gpu]
            node = _first_in_order(candidates, scores, in_use, state.tie_rank)
            return Placement(node, (int(best_gpu[int(np.searchsorted(candidates, node))]),))
        after = fragmentation_after_exclusive(state, pod, candidates)
        node = _first_in_order(candidates, sigmoid_score(before - after), in_use, state.tie_rank)
        return Placement(node, state.exclusive_gpus(node, pod.num_gpu))
