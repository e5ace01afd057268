"""HAMi's event texts from scheduling decisions."""

from __future__ import annotations

from tenantgpu.gpushare import Decision
from tenantgpu.hami import events


def test_filtering_succeed_lists_fitting_nodes_with_scores() -> None:
    decision = Decision(
        "n2", node_scores={"n1": 0.5, "n2": 5.17}, failed_nodes={"n3": "1/1 CardInsufficientMemory"}
    )
    assert events.filtering_succeed_message(3, decision) == (
        "find fit node(n2), 1 nodes not fit, 2 nodes fit(n1:0.50,n2:5.17)"
    )


def test_filtering_failed_groups_nodes_per_reason() -> None:
    decision = Decision(
        None,
        failed_nodes={
            "a": "2/2 CardInsufficientMemory",
            "b": "1/2 CardInsufficientMemory, 1/2 CardTimeSlicingExhausted",
            "c": "node unregistered",
        },
    )
    assert events.filtering_failed_messages(decision) == [
        "2 nodes CardInsufficientMemory(a,b)",
        "1 nodes CardTimeSlicingExhausted(b)",
        "1 nodes node unregistered(c)",
        "no available node, 3 nodes do not meet",
    ]
    assert events.unschedulable_message(3, decision) == (
        "0/3 nodes are available: 1 CardTimeSlicingExhausted, 1 node unregistered, 2 CardInsufficientMemory."
    )


def test_binding_messages() -> None:
    assert events.binding_succeed_message("n1", "ns", "p") == "Successfully binding node [n1] to ns/p"
    assert events.scheduled_message("n1", "ns", "p") == "Successfully assigned ns/p to n1"


def test_no_nodes_at_all_reads_like_kube_scheduler() -> None:
    decision = Decision(None, reason="no nodes available to schedule pods")
    assert events.unschedulable_message(0, decision) == (
        "0/0 nodes are available: no nodes available to schedule pods."
    )
    assert events.filtering_failed_messages(decision) == ["no available node, 0 nodes do not meet"]
