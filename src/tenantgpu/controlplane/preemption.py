"""kube-scheduler's DefaultPreemption, for the default scheduler: which lower-priority pods to evict, and
on which node, so that a pod no node fits can run (default_preemption.go SelectVictimsOnNode and
preemption.go pickOneNodeForPreemption).

This module decides; `scheduler.py` asks whether a pod fits a node with some pods removed, and carries
the decision out (the victims' `DisruptionTarget` condition, their deletion, the `Preempted` events and
the preemptor's `nominatedNodeName`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tenantgpu.apiserver.eviction import covers
from tenantgpu.gpushare.reasons import NO_VICTIMS

Obj = dict[str, Any]
# (the pods left on the node) → why the preemptor does not fit there, or None when it fits
FitCheck = Callable[[Sequence[Obj]], str | None]

NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
PREEMPTED_REASON = "PreemptionByScheduler"
_INT32_OFFSET = 2**31  # kube adds MaxInt32+1 to each priority before summing them


def priority(pod: Mapping[str, Any]) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def _start_time(pod: Mapping[str, Any]) -> str:
    # GetPodStartTime: status.startTime, and a pod not started yet counts as starting now (the latest).
    return str((pod.get("status") or {}).get("startTime") or "9999")


def _more_important_first(pods: Sequence[Obj]) -> list[Obj]:
    """MoreImportantPod: higher priority first, then the pod that started earlier."""
    return sorted(pods, key=lambda p: (-priority(p), _start_time(p)))


def terminating_by_preemption(pod: Mapping[str, Any]) -> bool:
    if not (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(
        c.get("type") == "DisruptionTarget" and c.get("reason") == PREEMPTED_REASON
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _split_by_budgets(pods: Sequence[Obj], budgets: Sequence[Obj]) -> tuple[list[Obj], list[Obj]]:
    """filterPodsWithPDBViolation: the pods whose eviction would break a budget, and the others."""
    allowed = [int((b.get("status") or {}).get("disruptionsAllowed") or 0) for b in budgets]
    violating: list[Obj] = []
    other: list[Obj] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        broken = False
        if meta.get("labels"):
            for i, budget in enumerate(budgets):
                if (budget.get("metadata") or {}).get("namespace") != meta.get("namespace"):
                    continue
                if not covers(budget, pod):
                    continue
                if meta.get("name") in ((budget.get("status") or {}).get("disruptedPods") or {}):
                    continue  # its eviction is counted already
                allowed[i] -= 1
                broken = broken or allowed[i] < 0
        (violating if broken else other).append(pod)
    return violating, other


@dataclass(frozen=True)
class Candidate:
    node: str
    victims: tuple[Obj, ...]  # the most important first
    budget_violations: int


def select_victims(
    preemptor: Mapping[str, Any], node: str, pods: Sequence[Obj], fits: FitCheck, budgets: Sequence[Obj]
) -> Candidate | str:
    """SelectVictimsOnNode: the fewest lower-priority pods whose removal lets the preemptor fit, or why
    there are none (kube's status message for the node)."""
    own = priority(preemptor)
    lower = [p for p in pods if priority(p) < own]
    if not lower:
        return NO_VICTIMS
    staying = [p for p in pods if priority(p) >= own]
    why = fits(staying)
    if why is not None:
        return why
    violating, other = _split_by_budgets(_more_important_first(lower), budgets)
    victims: list[Obj] = []
    violations = 0
    # Reprieve as many as can stay, the budget-breaking ones first, each group the most important first.
    for group, counts in ((violating, True), (other, False)):
        for pod in group:
            if fits([*staying, pod]) is None:
                staying.append(pod)
            else:
                victims.append(pod)
                violations += counts
    if not victims:  # kube's error for a node the pod fits as it is
        return f'expected at least one victim pod on node "{node}"'
    return Candidate(node, tuple(_more_important_first(victims)), violations)


def pick_node(candidates: Sequence[Candidate]) -> Candidate:
    """pickOneNodeForPreemption: fewest budget violations, then the lowest highest victim priority, the
    lowest sum of priorities, the fewest victims, then the latest start among the most important victims;
    the first candidate on a tie."""

    def rank(c: Candidate) -> tuple[int, int, int, int]:
        top = priority(c.victims[0])
        return (c.budget_violations, top, sum(priority(v) + _INT32_OFFSET for v in c.victims), len(c.victims))

    def earliest_start(c: Candidate) -> str:
        top = priority(c.victims[0])
        return min(_start_time(v) for v in c.victims if priority(v) == top)

    best = min(rank(c) for c in candidates)
    tied = [c for c in candidates if rank(c) == best]
    return max(tied, key=earliest_start)  # max keeps the first of equals, as kube does
