"""The seeds × policies matrix of replay runs, in parallel processes, summarised per policy."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from concurrent.futures import as_completed
from dataclasses import dataclass, field

from tenantgpu.replay.bound import OfflineBound, arrived_prefix, offline_bound
from tenantgpu.replay.fragmentation import TypicalPods, typical_pods
from tenantgpu.replay.policies import make_policy
from tenantgpu.replay.pool import process_pool
from tenantgpu.replay.simulate import MAX_ARRIVED_PCT, RunResult, replay
from tenantgpu.replay.trace import NodeList, PodList
from tenantgpu.replay.tuning import tuned_workload


@dataclass(frozen=True)
class ReplayPlan:
    """What to run: a cluster, a workload, the tuning ratio, seeds and policy names."""

    nodes: NodeList
    pods: PodList
    tune: float
    seeds: tuple[int, ...]
    policies: tuple[str, ...]
    trace: str = ""
    seeds_for: dict[str, tuple[int, ...]] = field(default_factory=dict)  # per-policy override (slow ones)
    device_split_count: int = 10  # HAMi's slots per GPU, for the hami-* policies

    def runs(self) -> list[tuple[str, int]]:
        return [(p, s) for p in self.policies for s in self.seeds_for.get(p, self.seeds)]


def run_one(
    nodes: NodeList, pods: PodList, typical: TypicalPods, tune: float, policy: str, seed: int, split: int = 10
) -> RunResult:
    """One replay: tune and shuffle the trace with `seed`, then place every pod with `policy`."""
    tuned, rng = tuned_workload(pods, nodes.gpu_capacity, tune, seed)
    return replay(nodes, tuned, typical, make_policy(policy, split), rng, seed)


def bound_one(nodes: NodeList, pods: PodList, tune: float, seed: int) -> OfflineBound:
    """The offline bound at 100 % arrived for the tuned list of `seed`."""
    tuned, _ = tuned_workload(pods, nodes.gpu_capacity, tune, seed)
    return offline_bound(nodes, arrived_prefix(tuned, nodes.gpu_capacity))


def run_matrix(
    plan: ReplayPlan,
    jobs: int = 1,
    on_done: Callable[[str], None] | None = None,
    with_bound: bool = True,
) -> tuple[dict[str, list[RunResult]], dict[int, OfflineBound]]:
    """Every (policy, seed) run, and the bound per seed; `on_done` is called once per finished task."""
    typical = typical_pods(plan.pods, plan.nodes.models)
    results: dict[str, list[RunResult]] = {p: [] for p in plan.policies}
    bounds: dict[int, OfflineBound] = {}
    tasks = plan.runs()
    if jobs <= 1:
        for policy, seed in tasks:
            results[policy].append(
                run_one(plan.nodes, plan.pods, typical, plan.tune, policy, seed, plan.device_split_count)
            )
            if on_done:
                on_done(f"{policy}/{seed}")
        if with_bound:
            for seed in plan.seeds:
                bounds[seed] = bound_one(plan.nodes, plan.pods, plan.tune, seed)
                if on_done:
                    on_done(f"bound/{seed}")
    else:
        with process_pool(jobs) as pool:
            futures = {
                pool.submit(
                    run_one, plan.nodes, plan.pods, typical, plan.tune, policy, seed, plan.device_split_count
                ): (policy, seed)
                for policy, seed in tasks
            }
            if with_bound:
                for seed in plan.seeds:
                    futures[pool.submit(bound_one, plan.nodes, plan.pods, plan.tune, seed)] = ("bound", seed)
            for future in as_completed(futures):
                policy, seed = futures[future]
                if policy == "bound":
                    bounds[seed] = future.result()
                else:
                    results[policy].append(future.result())
                if on_done:
                    on_done(f"{policy}/{seed}")
    for runs in results.values():
        runs.sort(key=lambda r: r.seed)
    return results, bounds


def _median_curve(curves: Iterable[list[float]]) -> dict[str, float]:
    columns = list(zip(*curves, strict=True))
    return {str(k): round(statistics.median(col), 3) for k, col in enumerate(columns)}


def summarize(
    plan: ReplayPlan, results: dict[str, list[RunResult]], bounds: dict[int, OfflineBound]
) -> dict[str, object]:
    """The summary.json document: per policy the median curves over seeds, and every seed's curves."""
    policies: dict[str, object] = {}
    for name, runs in results.items():
        if not runs:
            continue
        policies[name] = {
            "median_unallocated_pct": _median_curve(r.unallocated_pct for r in runs),
            "median_fragmentation_pct": _median_curve(r.fragmentation_pct for r in runs),
            "failed_pods": _median_curve([float(x) for x in r.failed_pods] for r in runs),
            "seconds_per_run": round(statistics.median(r.seconds for r in runs), 2),
            "per_seed": {
                str(r.seed): {
                    "unallocated_pct": {str(k): round(v, 3) for k, v in enumerate(r.unallocated_pct)},
                    "fragmentation_pct": {str(k): round(v, 3) for k, v in enumerate(r.fragmentation_pct)},
                    "failed_pods": {str(k): v for k, v in enumerate(r.failed_pods)},
                    "pods": r.pods,
                    "seconds": round(r.seconds, 2),
                }
                for r in runs
            },
        }
    doc: dict[str, object] = {
        "trace": plan.trace,
        "tune": plan.tune,
        "seeds": list(plan.seeds),
        "gpus": plan.nodes.gpu_capacity,
        "nodes": len(plan.nodes),
        "arrived_pct_max": MAX_ARRIVED_PCT,
        "device_split_count": plan.device_split_count,
        "policies": policies,
    }
    if bounds:
        doc["offline_bound"] = {
            "arrived_pct": 100,
            "median_min_unallocated_pct": round(
                statistics.median(b.min_unallocated_pct for b in bounds.values()), 3
            ),
            "per_seed": {str(s): round(b.min_unallocated_pct, 3) for s, b in sorted(bounds.items())},
            "proven_optimal": all(b.proven_optimal for b in bounds.values()),
        }
    return doc


@dataclass(frozen=True)
class TableRow:
    policy: str
    unallocated_pct: float
    unallocated_gpus: float
    saved_gpus: float | None
    failed_pods: float
    above_bound_pct: float | None


def table_rows(summary: dict[str, object], at: int = 100) -> list[TableRow]:
    """Per policy at `at` % arrived: unallocated % and GPUs, GPUs saved vs whole-gpu, gap to the bound."""
    policies = summary["policies"]
    assert isinstance(policies, dict)
    gpus = float(summary["gpus"])  # type: ignore[arg-type]
    bound = summary.get("offline_bound")
    floor = bound["median_min_unallocated_pct"] if isinstance(bound, dict) else None
    whole = policies.get("whole-gpu")
    whole_pct = whole["median_unallocated_pct"][str(at)] if whole else None
    rows = []
    for name, data in policies.items():
        pct = data["median_unallocated_pct"][str(at)]
        rows.append(
            TableRow(
                policy=name,
                unallocated_pct=pct,
                unallocated_gpus=pct * gpus / 100,
                saved_gpus=None if whole_pct is None else (whole_pct - pct) * gpus / 100,
                failed_pods=data["failed_pods"][str(at)],
                above_bound_pct=None if floor is None else pct - floor,
            )
        )
    return sorted(rows, key=lambda r: r.unallocated_pct)
