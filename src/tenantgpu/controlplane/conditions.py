"""Status conditions and timestamps as the kube controllers write them."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp, or None."""
    if not isinstance(text, str) or not text:
        return None
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    return None


def get_condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return None


def set_condition(
    status: dict[str, Any],
    kind: str,
    value: str,
    reason: str,
    message: str,
    *,
    stamp: str = "lastProbeTime",
) -> None:
    """Set one condition; its lastTransitionTime moves only when its status changes. `stamp` is the
    time field refreshed on every write: Jobs keep `lastProbeTime`, Deployments `lastUpdateTime`."""
    now = now_text()
    cond = get_condition(status, kind)
    if cond is None:
        status.setdefault("conditions", []).append(
            {
                "type": kind,
                "status": value,
                stamp: now,
                "lastTransitionTime": now,
                "reason": reason,
                "message": message,
            }
        )
        return
    if cond.get("status") != value:
        cond.update(status=value, lastTransitionTime=now)
    if (cond.get("reason"), cond.get("message")) != (reason, message) or stamp == "lastProbeTime":
        cond[stamp] = now
    cond.update(reason=reason, message=message)
