"""An offline bound: the most GPU share any placement could allocate for a pod list known in advance.

Three relaxations, each solved as a small integer program (HiGHS via scipy's `milp`, whose dual bound is
used if a time limit stops it); every real placement satisfies all three, so the smallest optimum is
an upper bound on allocated share.

Shape bound: nodes are grouped into shapes and pods into request classes; an integer program
decides how many pods of each class go to each node shape, under per-shape totals that every
real placement also obeys: cpu, memory and GPU share, whole GPUs for exclusive pods and for shares
above 1/2 (at most q shares above 1/(q+1) per GPU for q = 1, 2, 3), and at most one whole-GPU pod per
node that needs more than half of its GPUs. Per-node and per-GPU packing are relaxed.

GPU-pattern bound (cluster-wide, cpu, memory, models and node boundaries relaxed): in any placement
each GPU holds either exclusive pods' whole GPUs, nothing, or a multiset of shares summing to at most
one GPU, a "pattern". Every pattern is enumerated (at most as many copies of a share as there are
such pods); with x_P = the GPUs holding pattern P and w = the GPUs held by exclusive pods, a
placement satisfies Σ_P x_P·(copies of share t in P) ≤ (pods asking t), Σ_P x_P + w ≤ GPUs and
w ≤ (whole GPUs asked), and allocates Σ_P x_P·|P| + w GPUs' worth. The integer program maximises that
over all such (x, w), so no placement allocates more. This is exact per-GPU packing, where sharing
loses its capacity (a 0.81 share leaves 0.19 that only the few tiny requests can fill, two 0.47s leave
0.06), and is skipped (the next bound still holds) if a trace has too many patterns.

GPU-packing bound (the pattern bound's coarser predecessor, kept as a fallback): each GPU holds either
whole-GPU pods, or one "anchor" share above 1/2 plus smaller shares in its remainder, or only shares of
at most 1/2 (at most two above 1/3 and three above 1/4), with remainders pooled across GPUs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import lil_matrix

from tenantgpu.replay.trace import ANY_MODEL, MILLI, NodeList, PodList

MAX_PATTERNS = 200_000  # beyond this many one-GPU share patterns the pattern bound is skipped


@dataclass(frozen=True)
class OfflineBound:
    """`max_allocated_pct`: no placement allocates more; `min_unallocated_pct` = 100 − that."""

    max_allocated_pct: float
    min_unallocated_pct: float
    proven_optimal: bool
    pod_classes: int
    node_shapes: int


def arrived_prefix(pods: PodList, gpu_capacity: int, arrived_pct: float = 100.0) -> PodList:
    """The pods submitted until GPU requests first reach `arrived_pct` % of capacity (that pod included)."""
    cumulative = np.cumsum(pods.total_milli)
    reached = np.flatnonzero(cumulative * 100 >= arrived_pct * gpu_capacity * MILLI)
    end = int(reached[0]) + 1 if len(reached) else len(pods)
    return pods.take(np.arange(end))


def offline_bound(nodes: NodeList, pods: PodList, time_limit: float = 60.0) -> OfflineBound:
    """The smallest of the shape, GPU-pattern and GPU-packing bounds for `pods` on `nodes`."""
    shape = _shape_bound(nodes, pods, time_limit)
    packing_milli, packing_optimal = _gpu_packing_bound(nodes, pods, time_limit)
    pattern = _gpu_pattern_bound(nodes, pods, time_limit)
    if pattern is not None:
        packing_milli = min(packing_milli, pattern[0])
        packing_optimal = packing_optimal and pattern[1]
    capacity = nodes.gpu_capacity * MILLI
    best = min(shape[0], packing_milli, float(pods.total_milli.sum()), float(capacity))
    pct = 100.0 * best / capacity
    return OfflineBound(
        max_allocated_pct=pct,
        min_unallocated_pct=100.0 - pct,
        proven_optimal=shape[1] and packing_optimal,
        pod_classes=shape[2],
        node_shapes=shape[3],
    )


def _solve_max(
    value: np.ndarray, rows: list[tuple[dict[int, float], float]], time_limit: float
) -> tuple[float, bool]:
    """Maximise value·x over non-negative integers with rows Σ coef·x ≤ limit; returns the dual bound."""
    matrix = lil_matrix((len(rows), len(value)))
    upper = np.empty(len(rows))
    for r, (coefs, limit) in enumerate(rows):
        for v, coef in coefs.items():
            matrix[r, v] = coef
        upper[r] = limit
    result = milp(
        c=-value,
        constraints=LinearConstraint(matrix.tocsr(), -np.inf, upper),
        integrality=np.ones(len(value)),
        bounds=Bounds(0, np.inf),
        options={"time_limit": time_limit, "disp": False},
    )
    dual = getattr(result, "mip_dual_bound", None)
    if dual is None or not np.isfinite(dual):
        if result.fun is None:
            raise RuntimeError(f"offline bound: solver failed ({result.message})")
        dual = result.fun
    return -float(dual), result.status == 0


def gpu_patterns(counts: dict[int, int], limit: int = MAX_PATTERNS) -> list[tuple[int, ...]] | None:
    """Every non-empty multiset of the shares in `counts` (at most `counts[s]` copies of s) that fits one
    GPU, as copies per share in descending share order; None when there are more than `limit`."""
    sizes = sorted(counts, reverse=True)
    found: list[tuple[int, ...]] = []
    copies: list[int] = []

    def extend(i: int, room: int) -> bool:
        if i == len(sizes):
            if any(copies):
                found.append(tuple(copies))
            return len(found) <= limit
        for m in range(min(counts[sizes[i]], room // sizes[i]) + 1):
            copies.append(m)
            ok = extend(i + 1, room - m * sizes[i])
            copies.pop()
            if not ok:
                return False
        return True

    return found if extend(0, MILLI) else None


def _gpu_pattern_bound(nodes: NodeList, pods: PodList, time_limit: float) -> tuple[float, bool] | None:
    shared = (pods.num_gpu == 1) & (pods.gpu_milli > 0) & (pods.gpu_milli < MILLI)
    counts = Counter(pods.gpu_milli[shared].tolist())
    whole_gpus = float(pods.num_gpu[(pods.num_gpu > 0) & (pods.gpu_milli == MILLI)].sum())
    patterns = gpu_patterns(dict(counts))
    if patterns is None:
        return None
    sizes = sorted(counts, reverse=True)
    value = [float(sum(m * s for m, s in zip(p, sizes, strict=True))) for p in patterns]
    whole = len(value)
    value.append(float(MILLI))
    rows: list[tuple[dict[int, float], float]] = [
        ({v: float(p[i]) for v, p in enumerate(patterns) if p[i]}, float(counts[size]))
        for i, size in enumerate(sizes)
    ]
    rows.append(({v: 1.0 for v in range(len(value))}, float(nodes.gpu_capacity)))
    rows.append(({whole: 1.0}, whole_gpus))
    return _solve_max(np.array(value), rows, time_limit)


def _gpu_packing_bound(nodes: NodeList, pods: PodList, time_limit: float) -> tuple[float, bool]:
    gpus = nodes.gpu_capacity
    shared = pods.gpu_milli[(pods.num_gpu == 1) & (pods.gpu_milli < MILLI)]
    sizes = Counter(shared.tolist())
    whole = Counter(pods.num_gpu[(pods.num_gpu > 0) & (pods.gpu_milli == MILLI)].tolist())
    value: list[float] = []
    rows: list[tuple[dict[int, float], float]] = []
    gpu_row: dict[int, float] = {}

    def new_var(worth: float) -> int:
        value.append(worth)
        return len(value) - 1

    for num, count in whole.items():
        v = new_var(num * MILLI)
        rows.append(({v: 1.0}, float(count)))
        gpu_row[v] = float(num)
    free_gpus = new_var(0.0)
    gpu_row[free_gpus] = 1.0
    anchors = {s: new_var(float(s)) for s in sizes if 2 * s > MILLI}
    for v in anchors.values():
        gpu_row[v] = 1.0
    free_share: dict[int, float] = {free_gpus: -float(MILLI)}
    free_two: dict[int, float] = {free_gpus: -2.0}
    free_three: dict[int, float] = {free_gpus: -3.0}
    residual: dict[int, dict[int, float]] = {s: {v: -float(MILLI - s)} for s, v in anchors.items()}
    residual_one: dict[int, dict[int, float]] = {s: {v: -1.0} for s, v in anchors.items()}
    for t, count in sizes.items():
        placed: dict[int, float] = {}
        if t in anchors:
            placed[anchors[t]] = 1.0
        else:
            v = new_var(float(t))
            placed[v] = 1.0
            free_share[v] = float(t)
            if 3 * t > MILLI:
                free_two[v] = 1.0
            if 4 * t > MILLI:
                free_three[v] = 1.0
        for s in anchors:
            if t <= MILLI - s:
                v = new_var(float(t))
                placed[v] = 1.0
                residual[s][v] = float(t)
                if 2 * t > MILLI - s:
                    residual_one[s][v] = 1.0
        rows.append((placed, float(count)))
    rows.append((gpu_row, float(gpus)))
    rows.extend([(free_share, 0.0), (free_two, 0.0), (free_three, 0.0)])
    rows.extend((coefs, 0.0) for coefs in residual.values())
    rows.extend((coefs, 0.0) for coefs in residual_one.values())
    return _solve_max(np.array(value), rows, time_limit)


def _shape_bound(nodes: NodeList, pods: PodList, time_limit: float) -> tuple[float, bool, int, int]:
    shape_key = list(
        zip(
            nodes.model_index.tolist(),
            nodes.gpus.tolist(),
            nodes.cpu_milli.tolist(),
            nodes.memory_mib.tolist(),
            strict=True,
        )
    )
    shapes = Counter(shape_key)
    shape_list = list(shapes)
    masks = pods.spec_masks(nodes.models)
    classes = Counter(
        zip(
            pods.cpu_milli.tolist(),
            pods.memory_mib.tolist(),
            pods.num_gpu.tolist(),
            pods.gpu_milli.tolist(),
            masks.tolist(),
            strict=True,
        )
    )
    class_list = list(classes)
    variables: list[tuple[int, int]] = []
    for j, (cpu, mem, num, _milli, mask) in enumerate(class_list):
        for k, (model, gpus, node_cpu, node_mem) in enumerate(shape_list):
            if cpu > node_cpu or mem > node_mem or num > gpus:
                continue
            if num > 0 and (model < 0 or (mask != ANY_MODEL and not (mask >> model) & 1)):
                continue
            variables.append((j, k))
    nvar = len(variables)
    if nvar == 0:
        return 0.0, True, len(class_list), len(shape_list)
    rows: list[tuple[dict[int, float], float]] = []
    by_class: dict[int, dict[int, float]] = {}
    per_shape: dict[tuple[int, str], dict[int, float]] = {}

    def add(key: tuple[int, str], var: int, coef: float) -> None:
        if coef:
            per_shape.setdefault(key, {})[var] = coef

    for v, (j, k) in enumerate(variables):
        cpu, mem, num, milli, _ = class_list[j]
        gpus = shape_list[k][1]
        by_class.setdefault(j, {})[v] = 1.0
        add((k, "cpu"), v, cpu)
        add((k, "mem"), v, mem)
        add((k, "share"), v, num * milli)
        exclusive = num if milli == MILLI else 0
        for q in (1, 2, 3):
            # a GPU holds at most q shares larger than 1/(q+1); whole GPUs hold nothing else
            weight = q * exclusive + (1 if 0 < milli < MILLI and milli * (q + 1) > MILLI else 0)
            add((k, f"q{q}"), v, weight)
        # Two pods can both take more than half of a node's GPUs only by sharing them, which whole-GPU
        # pods cannot; shares can (two 0.5 shares on a one-GPU node), so only whole-GPU pods are big.
        if exclusive and num * 2 > gpus:
            add((k, "big"), v, 1)
    for j, coefs in by_class.items():
        rows.append((coefs, float(classes[class_list[j]])))
    for (k, kind), coefs in per_shape.items():
        count = shapes[shape_list[k]]
        _, gpus, node_cpu, node_mem = shape_list[k]
        limit = {
            "cpu": node_cpu,
            "mem": node_mem,
            "share": gpus * MILLI,
            "q1": gpus,
            "q2": 2 * gpus,
            "q3": 3 * gpus,
            "big": 1,
        }[kind]
        rows.append((coefs, float(limit * count)))
    value = np.array([class_list[j][2] * class_list[j][3] for j, _ in variables], dtype=float)
    best, optimal = _solve_max(value, rows, time_limit)
    return best, optimal, len(class_list), len(shape_list)
