"""The indexed fast path of ClusterState.schedule (placeholder until the index lands)."""

from __future__ import annotations

from typing import Any


def schedule_fast(state: Any, pod: Any, requests: Any, demand: Any, ctx: Any) -> None:
    return None
