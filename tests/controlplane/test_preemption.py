"""kube-scheduler's DefaultPreemption decisions (default_preemption.go SelectVictimsOnNode,
filterPodsWithPDBViolation; preemption.go pickOneNodeForPreemption), on plain pod dicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tenantgpu.controlplane.preemption import Candidate, pick_node, select_victims, terminating_by_preemption
from tenantgpu.gpushare.reasons import NO_VICTIMS


def pod(name: str, priority: int, cpu: int, *, start: str | None = None, **labels: str) -> dict[str, Any]:
    status = {"startTime": start} if start else {}
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": {"priority": priority, "cpu": cpu},
        "status": status,
    }


def fits_in(capacity: int, preemptor: dict[str, Any]):
    def fits(staying: Sequence[dict[str, Any]]) -> str | None:
        used = sum(p["spec"]["cpu"] for p in staying) + preemptor["spec"]["cpu"]
        return None if used <= capacity else "Insufficient cpu"

    return fits


def budget(allowed: int, **selector: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns"},
        "spec": {"selector": {"matchLabels": selector}},
        "status": {"disruptionsAllowed": allowed},
    }


def test_only_lower_priority_pods_are_victims_and_as_few_as_needed() -> None:
    vip = pod("vip", 1000, 2)
    pods = [pod("a", 10, 2, start="2026-01-01T00:00:00Z"), pod("b", 10, 2, start="2026-01-02T00:00:00Z")]
    found = select_victims(vip, "n", pods, fits_in(4, vip), [])
    # the more important one (it started earlier) is reprieved first and stays
    assert isinstance(found, Candidate) and [v["metadata"]["name"] for v in found.victims] == ["b"]


def test_a_node_without_lower_priority_pods_or_too_small_anyway_is_no_candidate() -> None:
    vip = pod("vip", 10, 2)
    assert select_victims(vip, "n", [pod("peer", 10, 4)], fits_in(4, vip), []) == NO_VICTIMS
    big = pod("big", 1000, 8)
    assert select_victims(big, "n", [pod("a", 10, 2)], fits_in(4, big), []) == "Insufficient cpu"
    # equal or higher priority pods stay, and may leave too little room
    assert select_victims(vip, "n", [pod("boss", 50, 3), pod("low", 1, 1)], fits_in(4, vip), []) == (
        "Insufficient cpu"
    )


def test_a_pod_a_budget_protects_is_reprieved_before_the_others() -> None:
    vip = pod("vip", 1000, 2)
    guarded = pod("guarded", 10, 2, start="2026-01-02T00:00:00Z", app="db")
    plain = pod("plain", 10, 2, start="2026-01-01T00:00:00Z")
    found = select_victims(vip, "n", [plain, guarded], fits_in(4, vip), [budget(0, app="db")])
    assert isinstance(found, Candidate)
    assert [v["metadata"]["name"] for v in found.victims] == ["plain"] and found.budget_violations == 0
    # when both must go, the guarded one counts as a violation
    both = select_victims(vip, "n", [plain, guarded], fits_in(2, vip), [budget(0, app="db")])
    assert isinstance(both, Candidate) and both.budget_violations == 1 and len(both.victims) == 2


def test_the_node_is_chosen_by_kubes_criteria_in_order() -> None:
    def cand(node: str, violations: int, *victims: dict[str, Any]) -> Candidate:
        return Candidate(node, victims, violations)

    low, mid = pod("low", 1, 1), pod("mid", 5, 1)
    assert pick_node([cand("a", 1, low), cand("b", 0, mid)]).node == "b"  # fewer budget violations
    assert pick_node([cand("a", 0, mid), cand("b", 0, low, low)]).node == "b"  # lower highest priority
    assert pick_node([cand("a", 0, low, low), cand("b", 0, low)]).node == "b"  # smaller sum, fewer pods
    early = pod("early", 1, 1, start="2026-01-01T00:00:00Z")
    late = pod("late", 1, 1, start="2026-03-01T00:00:00Z")
    assert pick_node([cand("a", 0, early), cand("b", 0, late)]).node == "b"  # the latest start
    assert pick_node([cand("a", 0, low), cand("b", 0, low)]).node == "a"  # a tie keeps the first


def test_a_pod_is_terminating_by_preemption_once_deleted_with_the_schedulers_condition() -> None:
    victim = pod("v", 1, 1)
    assert not terminating_by_preemption(victim)
    victim["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    assert not terminating_by_preemption(victim)
    victim["status"]["conditions"] = [{"type": "DisruptionTarget", "reason": "PreemptionByScheduler"}]
    assert terminating_by_preemption(victim)
