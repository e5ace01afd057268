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
    # HAMi groups only "<k>/<n> Reason" strings (ParseReason); "node unregistered" counts in N only
    assert events.filtering_failed_messages(decision) == [
        "2 nodes CardInsufficientMemory(a,b)",
        "1 nodes CardTimeSlicingExhausted(b)",
        "no available node, 3 nodes do not meet",
    ]
    # kube-scheduler counts each node's failure text whole, as the extender returned it (HAMi v2.10's
    # calcScore puts GenReason's string in failedNodes), so a node failing two ways is one entry
    assert events.unschedulable_message(3, decision) == (
        "0/3 nodes are available: 1 1/2 CardInsufficientMemory, 1/2 CardTimeSlicingExhausted, 1 2/2"
        " CardInsufficientMemory, 1 node unregistered. preemption: 0/3 nodes are available: 3 No preemption"
        " victims found for incoming pod.."
    )


def test_binding_messages() -> None:
    assert events.binding_succeed_message("n1", "ns", "p") == "Successfully binding node [n1] to ns/p"
    assert events.scheduled_message("n1", "ns", "p") == "Successfully assigned ns/p to n1"


def test_filtering_failed_skips_plain_reasons_and_kube_scheduler_nodes() -> None:
    """HAMi scheduler.go recordFilteringFailures + common.ParseReason: `NodeInsufficientDevice` has no
    count, so no per-reason event; a node kube-scheduler filtered out never reached the extender."""
    decision = Decision(None, failed_nodes={"a": "NodeInsufficientDevice", "b": "Insufficient cpu"})
    assert events.filtering_failed_messages(decision) == ["no available node, 1 nodes do not meet"]


def test_filtering_succeed_lists_nodes_in_hami_sort_order_under_spread() -> None:
    """HAMi scheduler.go genSuccessMsg walks the sorted NodeScoreList: spread sorts scores descending."""
    decision = Decision("n1", node_scores={"n1": 0.5, "n2": 5.17})
    assert events.filtering_succeed_message(2, decision, spread=True) == (
        "find fit node(n1), 0 nodes not fit, 2 nodes fit(n2:5.17,n1:0.50)"
    )


def test_filtering_failed_for_a_calc_score_error_is_that_error() -> None:
    """HAMi scheduler.go Filter: a calcScore error is recorded as one FilteringFailed event with its text."""
    text = 'calcScore failed invalid hami.io/device-scoring-weights annotation "x": expected slot, core, and memory weights for pod p'
    assert events.filtering_failed_messages(Decision(None, reason=text)) == [text]


def test_filtering_succeed_counts_only_nodes_the_extender_saw() -> None:
    """genSuccessMsg: `<k> nodes not fit` is len(args.NodeNames) minus the fitting nodes; nodes that
    kube-scheduler's own filters removed were never passed to HAMi."""
    decision = Decision(
        "n1",
        node_scores={"n1": 1.0},
        failed_nodes={"n2": "Insufficient cpu", "n3": "1/1 CardInsufficientMemory"},
    )
    assert (
        events.filtering_succeed_message(3, decision)
        == "find fit node(n1), 1 nodes not fit, 1 nodes fit(n1:1.00)"
    )


def test_no_nodes_at_all_reads_like_kube_scheduler() -> None:
    decision = Decision(None, reason="no nodes available to schedule pods")
    assert events.unschedulable_message(0, decision) == (
        "0/0 nodes are available: no nodes available to schedule pods."
    )
    assert events.filtering_failed_messages(decision) == ["no available node, 0 nodes do not meet"]


def test_a_tainted_node_is_kube_schedulers_and_beyond_preemptions_help() -> None:
    """A taint's text names the taint (`… {gpu: true}`): the node never reached HAMi (so it is not in
    `N nodes do not meet`), and its status is UnschedulableAndUnresolvable, which preemption cannot help."""
    decision = Decision(
        None,
        failed_nodes={"a": "node(s) had untolerated taint {gpu: true}", "b": "1/1 CardInsufficientMemory"},
    )
    assert events.filtering_failed_messages(decision)[-1] == "no available node, 1 nodes do not meet"
    assert events.unschedulable_message(2, decision, preemption_policy="PreemptLowerPriority") == (
        "0/2 nodes are available: 1 1/1 CardInsufficientMemory, 1 node(s) had untolerated taint {gpu: true}."
        " preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is"
        " not helpful for scheduling.."
    )
