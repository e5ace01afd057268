"""`python -m bench`: help and a clear refusal of an unknown benchmark name, without running anything."""

from __future__ import annotations

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
