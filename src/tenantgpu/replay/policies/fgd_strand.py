"""fgd-strand (ours): FGD's fragmentation score plus the GPU capacity a placement strands for good.

Profiling FGD on the default trace (seed 42, 100 % arrived, 288 GPUs unallocated) shows where its
idle GPU share sits: 0.19 left next to 902 pods of 0.81 (171 GPUs: only the rare ≤ 0.16 requests fit
there, so no online policy avoids most of it), whole GPUs and mid-sized holes on nodes whose cpu is
used up (FGD's pods fail on cpu from 95 % arrived; without cpu limits FGD leaves 3.9 %, not 4.6 %),
and holes of 0.1–0.35 (0.47 + 0.32 leaves 0.21, which only those rare requests can fill). FGD's
typical-pod measure sees none of these as lasting: a node with 8 free GPUs and cpu for one typical
pod counts as unfragmented, a GPU model that pods with a `gpu_spec` need looks like any other, and a
0.21 hole weighs about as much as a 0.36 one that the next 0.32 pod closes.

fgd-strand scores each candidate (node, GPU) with FGD's fragmentation decrease plus three terms,
all in milli-GPU, all computed from the cluster and the typical pods only (no future pod is known):

1. **cpu stranding** (λ = 0.5): GPU share a node cannot sell because its free cpu, at the workload's
   average cpu per GPU share (ρ, from the typical pods), covers less than its free GPU share:
   max(0, free GPU − free cpu / ρ). Placing a pod where that grows is penalised, so cpu-heavy and
   cpu-only pods go to cpu-rich nodes (T4: 50 vCPU per GPU) and GPU-dense nodes (G2: 12) keep cpu for
   their GPUs.
2. **model reservation** (κ = 1): the share of each GPU model's capacity that pods restricted by
   `gpu_spec` claim (restricted demand spread over the models each accepts, by capacity; capped at
   1.5), times the pod's GPU request. A pod that may run elsewhere avoids a model others can only
   run on (gpuspec33: T4-only pods ask for 1.2 × the T4 capacity).
3. **dead holes** (μ = 3): a GPU's free share below the smallest request that at least 3 % of the
   shared typical pods fit (0.22 on the default trace) is unlikely ever to be sold; creating such a
   hole costs its size, closing one (a 0.16 pod next to a 0.81) earns it.

The sum goes through FGD's sigmoid with a twice steeper slope and is truncated to an integer, so,
as in FGD, nodes whose placements differ by little tie and go to the node first in the run's random
order. That first-fit effect is FGD's strength (exact scores leave 8–9 % unallocated) and is kept.
"""

from __future__ import annotations

import numpy as np

from tenantgpu.replay.cluster import ClusterState, Placement, PodRequest
from tenantgpu.replay.fragmentation import TypicalPods
from tenantgpu.replay.policies.base import MAX_NODE_SCORE, pick_highest
from tenantgpu.replay.policies.fgd import fragmentation_after_exclusive, fragmentation_after_shared
from tenantgpu.replay.trace import ANY_MODEL, MILLI

CPU_WEIGHT = 0.5  # λ: milli-GPU of score per milli-GPU of cpu-stranded share
RESERVE_WEIGHT = 1.0  # κ: score per milli-GPU requested × claimed fraction of the model
MAX_CLAIM = 1.5  # an over-claimed model is avoided; beyond this, more claim changes nothing
DEAD_WEIGHT = 3.0  # μ: score per milli-GPU of dead hole created
DEAD_HOLE_FIT = 0.03  # a hole is dead when fewer than this share of the shared typical pods fit in it
SLOPE = 2.0  # the sigmoid's steepness relative to FGD's (one GPU of change = 1/SLOPE e-fold)


def cpu_per_gpu_milli(typical: TypicalPods) -> float:
    """The workload's cpu (milli) per milli-GPU requested, over the GPU typical pods (1.0 if none)."""
    gpu = typical.num_gpu > 0
    demand = float((typical.probability * typical.num_gpu * typical.gpu_milli)[gpu].sum())
    cpu = float((typical.probability * typical.cpu_milli)[gpu].sum())
    return cpu / demand if demand > 0 and cpu > 0 else 1.0


def dead_hole_limit(typical: TypicalPods, fit_share: float = DEAD_HOLE_FIT) -> int:
    """Holes below this many milli-GPU fit fewer than `fit_share` of the shared typical pods."""
    shared = (typical.num_gpu == 1) & (typical.gpu_milli > 0) & (typical.gpu_milli < MILLI)
    total = float(typical.probability[shared].sum())
    if total == 0:
        return 0
    for size in sorted(set(typical.gpu_milli[shared].tolist())):
        if typical.probability[shared & (typical.gpu_milli <= size)].sum() >= fit_share * total:
            return int(size)
    return 0


def model_claims(typical: TypicalPods, node_bit: np.ndarray, gpu_count: np.ndarray) -> np.ndarray:
    """Per node: the fraction of its GPU model's capacity that `gpu_spec`-restricted pods claim.

    Each restricted typical pod's expected GPU demand is spread over the models it accepts in
    proportion to their capacity; the cluster-wide demand is scaled to the cluster's capacity (the
    replay's 100 % arrived). Models nobody restricts to claim 0."""
    models = sorted({int(b) for b in node_bit.tolist() if b})
    capacity = {b: float(gpu_count[node_bit == b].sum()) for b in models}
    demand = typical.probability * typical.num_gpu * typical.gpu_milli
    total = float(demand.sum())
    claimed = dict.fromkeys(models, 0.0)
    for mask, amount in zip(typical.spec_mask.tolist(), demand.tolist(), strict=True):
        accepted = [b for b in models if mask != ANY_MODEL and mask & b]
        room = sum(capacity[b] for b in accepted)
        for b in accepted:
            claimed[b] += amount * capacity[b] / room
    cluster = sum(capacity.values())
    fraction = {
        b: min(claimed[b] / total * cluster / capacity[b], MAX_CLAIM) if total and capacity[b] else 0.0
        for b in models
    }
    return np.array([fraction.get(int(b), 0.0) for b in node_bit.tolist()])


class _Stranding:
    """Per-run constants derived once from the cluster and the typical pods."""

    def __init__(self, state: ClusterState) -> None:
        typical = state.frag_model.typical
        self.rho = cpu_per_gpu_milli(typical)
        self.dead_below = dead_hole_limit(typical)
        self.claim = model_claims(typical, state.node_bit, state.gpu_count)

    def cpu_stranded(self, gpu_left: np.ndarray, cpu_free: np.ndarray) -> np.ndarray:
        return np.maximum(gpu_left - cpu_free / self.rho, 0.0)

    def dead(self, free: np.ndarray) -> np.ndarray:
        return np.where((free > 0) & (free < self.dead_below), free, 0)


def strand_score(delta_milli: np.ndarray) -> np.ndarray:
    """FGD's integer sigmoid score of a decrease in (fragmented + stranded) share, twice as steep."""
    return (MAX_NODE_SCORE / (1.0 + np.exp(-SLOPE * delta_milli / MILLI))).astype(np.int64)


class FgdStrandPolicy:
    name = "fgd-strand"

    def __init__(self) -> None:
        self._state: ClusterState | None = None
        self._model: _Stranding | None = None

    def _stranding(self, state: ClusterState) -> _Stranding:
        if self._model is None or self._state is not state:
            self._state, self._model = state, _Stranding(state)
        return self._model

    def node_terms(self, state: ClusterState, pod: PodRequest, candidates: np.ndarray) -> np.ndarray:
        """Per candidate node: the cpu-stranding decrease minus the model-reservation cost (milli-GPU)."""
        model = self._stranding(state)
        gpu_left = state.gpu_left[candidates]
        cpu_free = state.cpu_free[candidates]
        request = pod.gpu_milli * pod.num_gpu
        stranded_before = model.cpu_stranded(gpu_left, cpu_free)
        stranded_after = model.cpu_stranded(gpu_left - request, cpu_free - pod.cpu_milli)
        reserve = model.claim[candidates] * request
        return CPU_WEIGHT * (stranded_before - stranded_after) - RESERVE_WEIGHT * reserve

    def choose(self, state: ClusterState, pod: PodRequest, rng: np.random.Generator) -> Placement | None:
        candidates = np.flatnonzero(state.feasible(pod))
        if len(candidates) == 0:
            return None
        model = self._stranding(state)
        before = state.frag[candidates]
        node_delta = self.node_terms(state, pod, candidates)
        if pod.is_shared:
            after, valid = fragmentation_after_shared(state, pod, candidates)
            free = state.gpu_free[candidates]
            dead_change = model.dead(free - pod.gpu_milli) - model.dead(free)
            delta = before[:, None] - after + node_delta[:, None] - DEAD_WEIGHT * dead_change
            gpu_scores = np.where(valid, strand_score(delta), -1)
            best_gpu = np.argmax(gpu_scores, axis=1)  # first GPU among equals, as FGD
            scores = gpu_scores[np.arange(len(candidates)), best_gpu]
            node = pick_highest(candidates, scores, state.tie_rank)
            return Placement(node, (int(best_gpu[int(np.searchsorted(candidates, node))]),))
        after = fragmentation_after_exclusive(state, pod, candidates)
        node = pick_highest(candidates, strand_score(before - after + node_delta), state.tie_rank)
        return Placement(node, state.exclusive_gpus(node, pod.num_gpu))
