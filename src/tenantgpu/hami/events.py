"""HAMi scheduler events (FilteringSucceed/Failed, BindingSucceed/Failed) and the kube-scheduler's words."""

from __future__ import annotations

import logging
from typing import Any

from tenantgpu.gpushare import Decision
from tenantgpu.gpushare import reasons as r
from tenantgpu.kubeclient.eventsink import EventBroadcaster

log = logging.getLogger(__name__)

COMPONENT = "hami-scheduler"  # HAMi's event source: config.SchedulerName
FILTERING_SUCCEED = "FilteringSucceed"
FILTERING_FAILED = "FilteringFailed"
BINDING_SUCCEED = "BindingSucceed"
BINDING_FAILED = "BindingFailed"
SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"

# kube-scheduler's own filters' texts (a taint's names the taint after it: `… taint {gpu: true}`).
_KUBE_SCHEDULER_REASONS = (
    r.INSUFFICIENT_CPU,
    r.INSUFFICIENT_MEMORY,
    r.TOO_MANY_PODS,
    r.NODE_UNSCHEDULABLE,
    r.NODE_SELECTOR_MISMATCH,
    r.UNTOLERATED_TAINT,
)


def _kube_scheduler_failure(text: str) -> bool:
    return text.startswith(_KUBE_SCHEDULER_REASONS)


def filtering_succeed_message(total_nodes: int, decision: Decision, *, spread: bool = False) -> str:
    """`find fit node(<node>), <k> nodes not fit, <m> nodes fit(<node>:<score>,...)`.

    HAMi lists the nodes in its sorted order, the chosen one last: scores ascending under binpack,
    descending under spread (NodeScoreList.Less).
    """
    fitting = decision.node_scores
    scores = sorted(fitting.items(), key=lambda kv: (-kv[1] if spread else kv[1], kv[0]))
    # HAMi counts the nodes kube-scheduler passed to the extender (len(args.NodeNames)); when every
    # node fits, none failed, and the failures need not be worked out at all
    if len(fitting) < total_nodes:
        total_nodes -= sum(1 for text in decision.failed_nodes.values() if _kube_scheduler_failure(text))
    listed = ",".join(f"{name}:{score:.2f}" for name, score in scores)
    return (
        f"find fit node({decision.node}), {total_nodes - len(scores)} nodes not fit, "
        f"{len(scores)} nodes fit({listed})"
    )


def filtering_failed_messages(decision: Decision) -> list[str]:
    """One `<n> nodes <Reason>(<nodes>)` per reason, then `no available node, <N> nodes do not meet`.

    As HAMi's recordFilteringFailures: only GenReason strings are grouped (ParseReason skips plain
    texts such as `NodeInsufficientDevice` or `node unregistered`), and N counts the nodes the
    extender was asked about, i.e. not those kube-scheduler's own filters already removed.
    """
    if not decision.failed_nodes and (decision.reason or "").startswith("calcScore failed"):
        return [decision.reason or ""]  # Filter's own error (e.g. a bad device-scoring-weights annotation)
    grouped: dict[str, list[str]] = {}
    for node, text in sorted(decision.failed_nodes.items()):
        for reason in r.parse_reason(text):
            grouped.setdefault(reason, []).append(node)
    out = [f"{len(nodes)} nodes {reason}({','.join(nodes)})" for reason, nodes in grouped.items()]
    asked = [n for n, text in decision.failed_nodes.items() if not _kube_scheduler_failure(text)]
    out.append(f"no available node, {len(asked)} nodes do not meet")
    return out


def unschedulable_message(total_nodes: int, decision: Decision, *, preemption_policy: str = "") -> str:
    """kube-scheduler's summary for PodScheduled=False and FailedScheduling: its FitError over the
    nodes' failure texts, HAMi's GenReason strings among them (`1 1/2 CardInsufficientMemory`)."""
    if not decision.failed_nodes:
        detail = decision.reason or "no nodes available to schedule pods"
        return f"0/{total_nodes} nodes are available: {detail}."
    return r.fit_error(total_nodes, decision.failed_nodes, preemption_policy=preemption_policy)


def binding_succeed_message(node: str, namespace: str, pod: str) -> str:
    return f"Successfully binding node [{node}] to {namespace}/{pod}"


def scheduled_message(node: str, namespace: str, pod: str) -> str:
    return f"Successfully assigned {namespace}/{pod} to {node}"


def emit(
    recorder: EventBroadcaster, pod: dict[str, Any], reason: str, message: str, *, warning: bool = False
) -> None:
    """Record an event on the pod through `recorder`: it is queued and written after, in order, by the
    recorder's one sender (client-go's broadcaster); events are best effort and never hold the caller."""
    recorder.record(pod, reason, message, warning=warning)
