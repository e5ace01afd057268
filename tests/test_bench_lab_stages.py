"""bench/lab's startup stages say where the slowest pods spent their time."""

from __future__ import annotations

import pytest
from bench.lab import PodTimes, _stages


def _pod(created: float, bound: float, allocated: float, running: float) -> PodTimes:
    # perf_counter readings: 0.0 means "not seen" in PodTimes, so these start at 10 s
    return PodTimes(
        sent=10 + created,
        created=10 + created,
        bound=10 + bound,
        allocated=10 + allocated,
        running=10 + running,
    )


def test_the_slowest_pods_show_which_stage_they_waited_in() -> None:
    # 99 pods that queue 0.1 s for their binding, and one that waits 2 s for it.
    pods = [_pod(0.0, 0.1, 0.12, 0.2) for _ in range(99)] + [_pod(0.0, 2.0, 2.02, 2.1)]
    stages = _stages(pods)
    assert list(stages) == ["created → bound", "bound → allocated", "allocated → Running"]
    assert stages["created → bound"]["p50_ms"] == pytest.approx(100.0)
    assert stages["created → bound"]["slowest_1pct_mean_ms"] == pytest.approx(2000.0)
    assert stages["bound → allocated"]["slowest_1pct_mean_ms"] == pytest.approx(20.0)
    assert stages["allocated → Running"]["p99_ms"] == pytest.approx(80.0)


def test_pods_never_seen_in_every_stage_are_left_out() -> None:
    assert _stages([PodTimes(sent=10.0, created=10.1, bound=None, allocated=None, running=None)]) == {}
