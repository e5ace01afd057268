"""The one interface every replay policy implements, and the tie-breaking kube-scheduler applies."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from tenantgpu.replay.cluster import ClusterState, Placement, PodRequest

MAX_NODE_SCORE = 100  # kube-scheduler's framework.MaxNodeScore
MAX_SPEC_CPU = 128_000  # the simulator's normalisers: the largest node's vCPU (milli) and GPUs (milli)
MAX_SPEC_GPU = 8_000


class Policy(Protocol):
    """Chooses a node (and GPUs) for one pod, or None when it fits nowhere. Must not mutate `state`."""

    name: str

    def choose(self, state: ClusterState, pod: PodRequest, rng: np.random.Generator) -> Placement | None: ...


def pick_highest(candidates: np.ndarray, scores: np.ndarray, tie_rank: np.ndarray) -> int:
    """The candidate with the highest score. The simulator's scheduler breaks ties by node name, and names
    carry a random prefix drawn once per run, so equal scores go to the node ranked first in `tie_rank`."""
    best = np.flatnonzero(scores == scores.max())
    if len(best) == 1:
        return int(candidates[best[0]])
    tied = candidates[best]
    return int(tied[np.argmin(tie_rank[tied])])


def normalize_scores(scores: np.ndarray) -> np.ndarray:
    """The simulator's min-max normalisation to 0..100 in integer arithmetic (all zero when equal)."""
    low, high = int(scores.min()), int(scores.max())
    if high == low:
        return np.zeros_like(scores)
    return (scores - low) * MAX_NODE_SCORE // (high - low)
