"""`python -m bench`: help and a clear refusal of an unknown benchmark name, without running anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_help_names_the_benchmarks() -> None:
    done = _bench("--help")
    assert done.returncode == 0
    assert "usage: python -m bench" in done.stdout and "lab" in done.stdout and "kamaji" in done.stdout


def test_an_unknown_name_is_one_line_and_a_non_zero_exit() -> None:
    done = _bench("lab", "nosuch")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "no benchmark named nosuch" in done.stderr
    assert "== bench/lab" not in done.stdout  # nothing ran


def test_the_hami_pipeline_benchmark_runs_at_a_small_scale() -> None:
    """`make bench` runs every module: one that no longer matches the code it drives must fail here, not
    only when someone runs the benchmarks (this one called `install_hami` with a stale signature)."""
    env = {**os.environ, "TENANTS": "1", "PODS_PER_TENANT": "4"}
    results = ROOT / "bench" / "results" / "hami_pipeline.json"
    kept = results.read_bytes() if results.exists() else None  # a developer's real figures stay
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bench", "hami_pipeline"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    finally:
        if kept is not None:
            results.write_bytes(kept)
        else:
            results.unlink(missing_ok=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "running: 4" in done.stdout and "leftover_node_locks: 0" in done.stdout
