"""The paper's workload tuning: inflate or thin the pods to a multiple of GPU capacity, shuffle, by seed."""

from __future__ import annotations

import numpy as np

from tenantgpu.replay.trace import MILLI, PodList, TraceError


def tune_indices(pods: PodList, gpu_capacity: int, ratio: float, rng: np.random.Generator) -> np.ndarray:
    """Row indices of the tuned list: the trace's pods, then random draws (with replacement) appended
    until the next draw would push the GPU request past `ratio` × capacity; or, when the trace already
    asks for more, random pods removed until it no longer does. `ratio <= 0` keeps the list as is."""
    index = np.arange(len(pods), dtype=np.int64)
    if ratio <= 0:
        return index
    target = ratio * gpu_capacity * MILLI
    total_milli = pods.total_milli
    requested = int(total_milli.sum())
    if requested == 0:
        # the simulator refuses this too (TunePodsByNodeTotalResource panics on zero GPU requests)
        raise TraceError("the pod list asks for no GPU, so it cannot be tuned to a share of GPU capacity")
    if requested > target:
        keep = list(index)
        while requested > target and keep:
            victim = int(rng.integers(len(keep)))
            requested -= int(total_milli[keep[victim]])
            keep.pop(victim)
        return np.asarray(keep, dtype=np.int64)
    extra: list[int] = []
    while True:
        draw = int(rng.integers(len(pods)))
        # The simulator's stop test compares the per-GPU share (not num_gpu × share) with the headroom;
        # kept so the tuned lists have the same length rule as the paper's.
        if requested + int(pods.gpu_milli[draw]) > target:
            break
        requested += int(total_milli[draw])
        extra.append(draw)
    return np.concatenate([index, np.asarray(extra, dtype=np.int64)])


def tuned_workload(
    pods: PodList, gpu_capacity: int, ratio: float, seed: int
) -> tuple[PodList, np.random.Generator]:
    """The tuned and shuffled pod list for `seed`, and the generator, which policies keep drawing from."""
    rng = np.random.default_rng(seed)
    index = tune_indices(pods, gpu_capacity, ratio, rng)
    order = rng.permutation(len(index))
    return pods.take(index[order]), rng
