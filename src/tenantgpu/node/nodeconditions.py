"""The conditions a kubelet posts on its Node, and the events it records when one of them changes.

As kube's node status setters (pkg/kubelet/nodestatus): a condition's lastTransitionTime moves only
when its status does, and each change of status, the first post included, is recorded as a Normal
event on the node, `Node <name> status is now: <event>` (NodeHasSufficientMemory, NodeReady, ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# The kubelet's own events about itself, on its node (kube's pkg/kubelet/events).
STARTING = "Starting"
STARTING_MESSAGE = "Starting kubelet."
ALLOCATABLE_ENFORCED = "NodeAllocatableEnforced"
ALLOCATABLE_ENFORCED_MESSAGE = "Updated Node Allocatable limit across pods"


@dataclass(frozen=True)
class KubeletCondition:
    """One condition the kubelet sets, with its texts and the events of each status."""

    type: str
    status: str
    reason: str
    message: str
    event_when_true: str
    event_when_false: str

    def event(self, status: str) -> str:
        return self.event_when_true if status == "True" else self.event_when_false


_PRESSURES = (
    KubeletCondition(
        "MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available",
        "NodeHasInsufficientMemory", "NodeHasSufficientMemory",
    ),
    KubeletCondition(
        "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure",
        "NodeHasDiskPressure", "NodeHasNoDiskPressure",
    ),
    KubeletCondition(
        "PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available",
        "NodeHasInsufficientPID", "NodeHasSufficientPID",
    ),
)  # fmt: skip
_READY = KubeletCondition(
    "Ready", "True", "KubeletReady", "kubelet is posting ready status", "NodeReady", "NodeNotReady"
)


def kubelet_conditions(previous: Iterable[Mapping[str, Any]] | None, *, now: str) -> list[dict[str, Any]]:
    """The conditions to post, given those the Node has now (None for a new node): each heartbeat is
    `now`; a condition whose status stays keeps its lastTransitionTime."""
    before = {str(c.get("type")): c for c in previous or ()}
    out = []
    for wanted in (*_PRESSURES, _READY):  # the simulated node never runs short of anything
        old = before.get(wanted.type) or {}
        kept = old.get("status") == wanted.status and old.get("lastTransitionTime")
        out.append(
            {
                "type": wanted.type,
                "status": wanted.status,
                "reason": wanted.reason,
                "message": wanted.message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": kept or now,
            }
        )
    return out


def transitions(
    previous: Iterable[Mapping[str, Any]] | None, posted: Iterable[Mapping[str, Any]]
) -> list[str]:
    """The events of the conditions whose status `posted` changes, in the order posted (a new node's
    first post changes every one: its conditions were Unknown)."""
    before = {str(c.get("type")): str(c.get("status")) for c in previous or ()}
    by_type = {c.type: c for c in (*_PRESSURES, _READY)}
    events = []
    for condition in posted:
        kind, status = str(condition.get("type")), str(condition.get("status"))
        if kind in by_type and before.get(kind) != status:
            events.append(by_type[kind].event(status))
    return events


def status_event_message(node: str, event: str) -> str:
    """The kubelet's recordNodeStatusEvent text (the node lifecycle controller's status changes read
    the same)."""
    return f"Node {node} status is now: {event}"


def node_reference(node: str) -> dict[str, str]:
    """The kubelet's reference to its own node in events: kind and name, with the name for the uid
    (kube's nodeRef; the kubelet does not look the Node up for it)."""
    return {"kind": "Node", "name": node, "uid": node}
