"""A pod's `activeDeadlineSeconds`, as the kubelet enforces it (kube's activeDeadlineHandler): once the
pod has been active on the node that long, counted from its status' startTime, the kubelet records a
Normal event `DeadlineExceeded`, stops its containers and fails it with that reason and kube's message.
The kubelet looks every second, in its sync loop, so a deadline lowered on a running pod counts at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

REASON = "DeadlineExceeded"
MESSAGE = "Pod was active on the node longer than the specified deadline"
SYNC_SECONDS = 1.0  # the kubelet's sync loop period


def deadline_seconds(pod: Mapping[str, Any]) -> int | None:
    value = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def past_deadline(pod: Mapping[str, Any], start_time: str | None, now: datetime) -> bool:
    """pastActiveDeadline: a deadline is set, the pod has a start time, and that much time has passed."""
    seconds = deadline_seconds(pod)
    if seconds is None or not start_time:
        return False
    started = datetime.fromisoformat(start_time.replace("Z", "+00:00"))
    return (now - started).total_seconds() >= seconds
