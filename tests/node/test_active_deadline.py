"""`activeDeadlineSeconds` as kube's activeDeadlineHandler (pkg/kubelet/active_deadline.go, v1.33) reads
it: no deadline or no start time is never past; otherwise the time since the status' startTime is
compared with the deadline, `>=`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tenantgpu.node.activedeadline import MESSAGE, REASON, deadline_seconds, past_deadline

START = "2026-12-06T20:00:00Z"
T0 = datetime(2026, 12, 6, 20, 0, 0, tzinfo=UTC)


def _pod(seconds: object) -> dict:
    return {"spec": {"activeDeadlineSeconds": seconds, "containers": []}}


def test_kubes_reason_and_message() -> None:
    assert (REASON, MESSAGE) == (
        "DeadlineExceeded",
        "Pod was active on the node longer than the specified deadline",
    )


def test_the_deadline_counts_from_the_start_time_and_is_reached_at_equality() -> None:
    assert not past_deadline(_pod(30), START, T0 + timedelta(seconds=29.9))
    assert past_deadline(_pod(30), START, T0 + timedelta(seconds=30))
    assert past_deadline(_pod(30), START, T0 + timedelta(hours=1))


def test_no_deadline_or_no_start_time_is_never_past() -> None:
    assert not past_deadline({"spec": {}}, START, T0 + timedelta(days=9))
    assert not past_deadline(_pod(1), None, T0 + timedelta(days=9))
    assert not past_deadline(_pod(1), "", T0 + timedelta(days=9))
    assert deadline_seconds(_pod(True)) is None and deadline_seconds(_pod(5)) == 5
