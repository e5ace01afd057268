"""bench/replay: seconds per run for each policy on the default trace at tune 1.3, and the whole
seeds × paper-policies matrix wall time on this machine (goal: < 5 min on 2 cores, FGD < 30 s/run),
and how much of the FGD-to-bound gap fgd-strand closes."""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from tenantgpu.replay.fragmentation import typical_pods
from tenantgpu.replay.policies import PAPER_POLICIES, policy_names
from tenantgpu.replay.run import ReplayPlan, run_matrix, summarize
from tenantgpu.replay.simulate import replay
from tenantgpu.replay.trace import default_trace_dir, load_nodes, load_pods
from tenantgpu.replay.tuning import tuned_workload

SEEDS = tuple(range(42, 52))
HAMI_SAMPLE_PODS = 300


def _hami_ms_per_pod(nodes, pods) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """gpushare's HAMi policies are per-node Python: time a prefix of one seed's pods."""
    from tenantgpu.replay.policies import HAMI_POLICIES, make_policy

    typical = typical_pods(pods, nodes.models)
    tuned, rng = tuned_workload(pods, nodes.gpu_capacity, 1.3, SEEDS[0])
    prefix = tuned.take(np.arange(HAMI_SAMPLE_PODS))
    out = {}
    for name in HAMI_POLICIES:
        run = replay(nodes, prefix, typical, make_policy(name), rng, SEEDS[0])
        out[name] = 1000 * run.seconds / HAMI_SAMPLE_PODS
    return out


def main() -> None:
    base = default_trace_dir()
    nodes = load_nodes(base / "openb_node_list_gpu_node.csv")
    pods = load_pods(base / "openb_pod_list_default.csv")
    jobs = os.cpu_count() or 1
    extra = tuple(p for p in policy_names() if p not in PAPER_POLICIES and not p.startswith("hami"))
    plan = ReplayPlan(nodes, pods, 1.3, SEEDS, PAPER_POLICIES, trace="openb_pod_list_default")
    started = time.perf_counter()
    results, _ = run_matrix(plan, jobs=jobs, with_bound=False)
    matrix_seconds = time.perf_counter() - started
    extra_plan = ReplayPlan(nodes, pods, 1.3, SEEDS, extra, trace="openb_pod_list_default")
    extra_results, bounds = run_matrix(extra_plan, jobs=jobs, with_bound=True)
    results.update(extra_results)
    summary = summarize(ReplayPlan(nodes, pods, 1.3, SEEDS, (*PAPER_POLICIES, *extra)), results, bounds)
    per_policy = {
        name: {
            "median_seconds_per_run": round(statistics.median(r.seconds for r in runs), 2),
            "max_seconds_per_run": round(max(r.seconds for r in runs), 2),
            "median_unallocated_pct_at_100": summary["policies"][name]["median_unallocated_pct"]["100"],
        }
        for name, runs in results.items()
    }
    hami = _hami_ms_per_pod(nodes, pods)
    doc = {
        "trace": "openb_pod_list_default",
        "tune": 1.3,
        "seeds": list(SEEDS),
        "jobs": jobs,
        "paper_matrix_wall_seconds": round(matrix_seconds, 1),
        "policies": per_policy,
        "offline_bound_median_min_unallocated_pct": summary.get("offline_bound", {}).get(
            "median_min_unallocated_pct"
        ),
        "hami_ms_per_pod": {k: round(v, 1) for k, v in hami.items()},
        "pods_per_run": results["fgd"][0].pods,
    }
    shape = f"{len(PAPER_POLICIES)} policies x {len(SEEDS)} seeds, {jobs} processes"
    print(f"paper matrix ({shape}): {matrix_seconds:.0f} s")
    for name, row in per_policy.items():
        print(
            f"  {name:12s} {row['median_seconds_per_run']:6.1f} s/run (max {row['max_seconds_per_run']:.1f})"
            f"  unallocated@100 {row['median_unallocated_pct_at_100']:.2f} %"
        )
    floor = doc["offline_bound_median_min_unallocated_pct"]
    print(f"  offline bound: {floor} % unallocated at best")
    if floor is not None and "fgd-strand" in per_policy:
        fgd = per_policy["fgd"]["median_unallocated_pct_at_100"]
        ours = per_policy["fgd-strand"]["median_unallocated_pct_at_100"]
        doc["fgd_strand_gap_closed_pct"] = (
            round(100 * (fgd - ours) / (fgd - floor), 1) if fgd > floor else None
        )
        print(
            f"  fgd-strand closes {doc['fgd_strand_gap_closed_pct']} % of the gap between FGD and the bound"
        )
    for name, ms in hami.items():
        print(f"  {name}: {ms:.0f} ms/pod through gpushare (~{ms * doc['pods_per_run'] / 1000:.0f} s/run)")
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "replay.json").write_text(json.dumps(doc, indent=1))
    # the full curves, plots and page, as `tenantgpu replay` writes them
    from tenantgpu.replay.report import write_report

    summary["trace"] = "openb_pod_list_default"
    write_report(summary, out / "replay-report")


if __name__ == "__main__":
    main()
