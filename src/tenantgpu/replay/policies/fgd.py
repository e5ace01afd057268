"""FGD (Weng et al., ATC '23): place the pod where the expected fragmentation grows least."""

from __future__ import annotations

import numpy as np

from tenantgpu.replay.cluster import ClusterState, Placement, PodRequest
from tenantgpu.replay.policies.base import MAX_NODE_SCORE, pick_highest
from tenantgpu.replay.trace import MILLI


def fragmentation_after_shared(
    state: ClusterState, pod: PodRequest, candidates: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Fragmentation of each candidate node if the shared pod went to each of its GPUs (nodes × GPU slots),
    and which slots can take it. Only that GPU's counts change, so they are updated, not recomputed."""
    model = state.frag_model
    share = pod.gpu_milli
    before = state.gpu_free[candidates][:, :, None]
    after = before - share
    need = model.t_milli[None, None, :]
    fit_before = before >= need
    fit_after = after >= need
    fit_count = state.fit_count[candidates][:, None, :] + fit_after.astype(np.int64) - fit_before
    small = (
        state.small[candidates][:, None, :]
        + np.where(fit_after, 0, np.maximum(after, 0))
        - np.where(fit_before, 0, np.maximum(before, 0))
    )
    total = np.repeat((state.gpu_left[candidates] - share)[:, None], before.shape[1], axis=1)
    cpu = np.repeat((state.cpu_free[candidates] - pod.cpu_milli)[:, None], before.shape[1], axis=1)
    frag = model.combine(candidates, total, cpu, fit_count, small)
    return frag, before[:, :, 0] >= share


def fragmentation_after_exclusive(state: ClusterState, pod: PodRequest, candidates: np.ndarray) -> np.ndarray:
    """Fragmentation of each candidate node after a CPU-only or whole-GPU pod (its first free GPUs taken)."""
    rows = state.gpu_free[candidates].copy()
    if pod.num_gpu:
        free = rows == MILLI
        taken = free & (np.cumsum(free, axis=1) <= pod.num_gpu)
        rows[taken] = 0
    cpu = state.cpu_free[candidates] - pod.cpu_milli
    return state.frag_model.node_fragmentation(candidates, rows, cpu)


def sigmoid_score(delta_milli: np.ndarray) -> np.ndarray:
    """The plugin's score: sigmoid of the fragmentation decrease in GPUs, scaled to 0..100, truncated."""
    return (MAX_NODE_SCORE / (1.0 + np.exp(-delta_milli / MILLI))).astype(np.int64)


class FgdPolicy:
    name = "fgd"

    def choose(self, state: ClusterState, pod: PodRequest, rng: np.random.Generator) -> Placement | None:
        candidates = np.flatnonzero(state.feasible(pod))
        if len(candidates) == 0:
            return None
        before = state.frag[candidates]
        if pod.is_shared:
            after, valid = fragmentation_after_shared(state, pod, candidates)
            gpu_scores = np.where(valid, sigmoid_score(before[:, None] - after), -1)
            best_gpu = np.argmax(gpu_scores, axis=1)  # first GPU among equals, as the plugin does
            scores = gpu_scores[np.arange(len(candidates)), best_gpu]
            node = pick_highest(candidates, scores, state.tie_rank)
            pick = int(np.searchsorted(candidates, node))
            return Placement(node, (int(best_gpu[pick]),))
        after = fragmentation_after_exclusive(state, pod, candidates)
        node = pick_highest(candidates, sigmoid_score(before - after), state.tie_rank)
        return Placement(node, state.exclusive_gpus(node, pod.num_gpu))
