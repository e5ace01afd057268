"""The FGD paper's fragmentation measure: the free GPU share that a typical pod, drawn from the trace's
request shapes by their frequency, could not use on a node."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from tenantgpu.replay.trace import ANY_MODEL, PodList

POPULARITY_THRESHOLD = 0.95  # the simulator's experiments keep the shapes that cover 95 % of the pods


@dataclass(frozen=True)
class TypicalPods:
    """Request shapes (cpu, per-GPU share, GPU count, model constraint) and their probability."""

    cpu_milli: np.ndarray
    gpu_milli: np.ndarray
    num_gpu: np.ndarray
    spec_mask: np.ndarray
    probability: np.ndarray

    def __len__(self) -> int:
        return len(self.probability)


def typical_pods(
    pods: PodList, models: tuple[str, ...], threshold: float = POPULARITY_THRESHOLD
) -> TypicalPods:
    """The most frequent shapes (CPU-only pods included) until they cover `threshold` of the pods,
    renormalised. Equal counts are ordered by (cpu, share, count, model) descending, as the simulator does."""
    masks = pods.spec_masks(models)
    counts = Counter(
        zip(
            pods.cpu_milli.tolist(),
            pods.gpu_milli.tolist(),
            pods.num_gpu.tolist(),
            pods.gpu_spec,
            masks.tolist(),
            strict=True,
        )
    )
    ranked = sorted(
        counts.items(), key=lambda kv: (kv[1], kv[0][0], kv[0][1], kv[0][2], kv[0][3]), reverse=True
    )
    total = len(pods)
    chosen: list[tuple[tuple[int, int, int, str, int], int]] = []
    covered = 0
    for shape, count in ranked:
        if covered >= threshold * total:
            break
        chosen.append((shape, count))
        covered += count
    weights = np.array([c for _, c in chosen], dtype=np.float64)
    return TypicalPods(
        cpu_milli=np.array([s[0] for s, _ in chosen], dtype=np.int64),
        gpu_milli=np.array([s[1] for s, _ in chosen], dtype=np.int64),
        num_gpu=np.array([s[2] for s, _ in chosen], dtype=np.int64),
        spec_mask=np.array([s[4] for s, _ in chosen], dtype=np.int64),
        probability=weights / weights.sum(),
    )


class FragmentationModel:
    """Evaluates node fragmentation for many nodes at once: arrays are nodes × GPUs (× typical pods)."""

    def __init__(self, typical: TypicalPods, node_bits: np.ndarray) -> None:
        self.typical = typical
        self.t_cpu = typical.cpu_milli
        self.t_milli = typical.gpu_milli
        self.t_num = typical.num_gpu
        self.p = typical.probability
        access = (typical.spec_mask[None, :] == ANY_MODEL) | (
            (typical.spec_mask[None, :] & node_bits[:, None]) != 0
        )
        # A CPU-only typical pod never "uses" GPUs, so all free GPU share counts as fragment for it.
        self.gpu_usable = access & (typical.gpu_milli[None, :] > 0)

    def counts(self, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per node and typical pod: GPUs with room for its share, and the free share on the GPUs without."""
        g = np.maximum(free, 0)[:, :, None]
        fits = g >= self.t_milli[None, None, :]
        return fits.sum(axis=1), np.where(fits, 0, g).sum(axis=1)

    def combine(
        self,
        rows: np.ndarray,
        total: np.ndarray,
        cpu_free: np.ndarray,
        fit_count: np.ndarray,
        small: np.ndarray,
    ) -> np.ndarray:
        """Fragment amount (milli-GPU) from the per-typical-pod counts; broadcasts over middle axes."""
        usable = self.gpu_usable[rows]
        extra = fit_count.ndim - 2
        shape = (len(rows),) + (1,) * extra + (len(self.p),)
        satisfied = usable.reshape(shape) & (fit_count >= self.t_num) & (cpu_free[..., None] >= self.t_cpu)
        return np.where(satisfied, small, total[..., None]) @ self.p

    def node_fragmentation(self, rows: np.ndarray, free: np.ndarray, cpu_free: np.ndarray) -> np.ndarray:
        """Fragment amount of nodes `rows` given their free GPU share rows and free cpu."""
        fit_count, small = self.counts(free)
        total = np.maximum(free, 0).sum(axis=1)
        return self.combine(rows, total, cpu_free, fit_count, small)
