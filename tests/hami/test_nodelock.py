"""HAMi's node-lock rules: value format, expiry, takeover from a vanished holder, owner-only release."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tenantgpu.hami.nodelock import (
    LockVerdict,
    contention_message,
    format_lock,
    judge_lock,
    owned_by,
    parse_lock,
)

NOW = datetime(2026, 11, 29, 20, 0, 0, tzinfo=UTC)
FIVE_MIN = timedelta(minutes=5)


def test_value_is_rfc3339_namespace_pod() -> None:
    value = format_lock(NOW, "team-a", "train-1")
    assert value == "2026-11-29T20:00:00Z,team-a,train-1"
    holder = parse_lock(value)
    assert (holder.locked_at, holder.namespace, holder.pod) == (NOW, "team-a", "train-1")


def test_legacy_bare_timestamp_and_foreign_offsets_parse() -> None:
    assert parse_lock("2026-11-29T21:00:00+01:00").locked_at == NOW
    assert parse_lock("2026-11-29T20:00:00Z").pod == ""


def test_malformed_value_is_rejected() -> None:
    with pytest.raises(ValueError, match="expected 3 parts"):
        parse_lock("2026-11-29T20:00:00Z,a")


def test_free_node_is_taken() -> None:
    assert judge_lock(None, "ns", "p", NOW, FIVE_MIN)[0] is LockVerdict.FREE


def test_live_lock_of_another_pod_needs_a_holder_check() -> None:
    value = format_lock(NOW - timedelta(seconds=10), "ns", "other")
    verdict, holder = judge_lock(value, "ns", "p", NOW, FIVE_MIN)
    assert verdict is LockVerdict.HOLDER_CHECK and holder is not None and holder.pod == "other"


def test_lock_older_than_timeout_expires() -> None:
    value = format_lock(NOW - timedelta(minutes=5, seconds=1), "ns", "other")
    assert judge_lock(value, "ns", "p", NOW, FIVE_MIN)[0] is LockVerdict.EXPIRED
    # exactly at the timeout it still holds (HAMi compares with ">")
    value = format_lock(NOW - FIVE_MIN, "ns", "other")
    assert judge_lock(value, "ns", "p", NOW, FIVE_MIN)[0] is LockVerdict.HOLDER_CHECK


def test_live_lock_held_by_the_same_pod_counts_as_acquired() -> None:
    # HAMi v2.10.0 LockNode: "Node lock already held by this pod, treating as acquired".
    value = format_lock(NOW, "ns", "p")
    assert judge_lock(value, "ns", "p", NOW, FIVE_MIN)[0] is LockVerdict.HELD


def test_legacy_lock_without_owner_can_only_be_waited_out() -> None:
    assert judge_lock("2026-11-29T20:00:00Z", "ns", "p", NOW, FIVE_MIN)[0] is LockVerdict.CONTENDED
    assert judge_lock("2026-11-29T19:50:00Z", "ns", "p", NOW, FIVE_MIN)[0] is LockVerdict.EXPIRED


def test_release_only_by_owner() -> None:
    value = format_lock(NOW, "ns", "p")
    assert owned_by(value, "ns", "p")
    assert not owned_by(value, "ns", "q")
    assert not owned_by(value, "other-ns", "p")
    assert not owned_by(None, "ns", "p")


def test_contention_message_uses_go_duration() -> None:
    assert (
        contention_message("gpu-1", FIVE_MIN)
        == "node gpu-1 has been locked within 5m0s: node lock contention"
    )
    assert contention_message("gpu-1", timedelta(seconds=30)).startswith(
        "node gpu-1 has been locked within 30s:"
    )
