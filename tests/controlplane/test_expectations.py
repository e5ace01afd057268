"""Creation expectations: a controller does not create twice what its watch has not shown yet, and does
not wait for what the watch already showed come and go."""

from __future__ import annotations

from tenantgpu.controlplane.workqueue import EXPECTATION_SECONDS, Expectations


def test_a_created_pod_is_awaited_until_the_watch_or_a_sync_sees_it() -> None:
    expected = Expectations()
    expected.expect("rs-a", 0.0)
    expected.expect("rs-b", 0.0)
    assert expected.count(set(), 1.0) == 2
    assert expected.count({"rs-a"}, 1.0) == 1
    expected.observe("rs-b", 1.0)
    assert expected.count(set(), 1.0) == 0


def test_a_pod_added_and_deleted_between_two_syncs_is_not_awaited() -> None:
    # The sync after the delete sees neither pod name: only the handler saw rs-a come and go.
    expected = Expectations()
    expected.expect("rs-a", 0.0)
    expected.observe("rs-a", 0.1)  # ADDED
    expected.observe("rs-a", 0.2)  # DELETED
    assert expected.count(set(), 0.3) == 0


def test_a_watch_event_that_beats_the_create_response_counts() -> None:
    expected = Expectations()
    expected.observe("rs-a", 0.0)
    expected.expect("rs-a", 0.1)
    assert expected.count(set(), 0.2) == 0


def test_unanswered_expectations_expire() -> None:
    expected = Expectations()
    expected.expect("rs-a", 0.0)
    assert expected.count(set(), EXPECTATION_SECONDS + 1) == 0


def test_names_seen_without_a_create_are_forgotten() -> None:
    expected = Expectations()
    for i in range(200):
        expected.observe(f"other-{i}", float(i))
    assert len(expected.early) < 100
