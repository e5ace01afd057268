"""The 1.33 kubelet's decisions on an in-place resize (kube's canResizePod and the status manager's
resize conditions): Infeasible beyond the node's allocatable, memory looked at first; Deferred with the
admission text while other pods hold the room; a condition's transition time kept while its reason
stays; a restart only for a changed resource whose resizePolicy says RestartContainer."""

from __future__ import annotations

from typing import Any

from tenantgpu.node import resize

NODE: dict[str, Any] = {
    "metadata": {"name": "w1"},
    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
}


def _pod(cpu: str, memory: str = "1Gi") -> dict[str, Any]:
    container = {"name": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    return {"metadata": {"name": "p"}, "spec": {"containers": [container]}}


def test_more_than_the_node_has_is_infeasible_memory_first() -> None:
    assert resize.verdict(_pod("8", "16Gi"), NODE, []) == resize.Verdict(
        "Infeasible", "Node didn't have enough capacity: memory, requested: 17179869184, capacity: 8589934592"
    )
    assert resize.verdict(_pod("8"), NODE, []) == resize.Verdict(
        "Infeasible", "Node didn't have enough capacity: cpu, requested: 8000, capacity: 4000"
    )


def test_room_held_by_other_pods_defers_the_resize() -> None:
    assert resize.verdict(_pod("3"), NODE, [{"cpu": 2000}]) == resize.Verdict(
        "Deferred", "Node didn't have enough resource: cpu, requested: 3000, used: 2000, capacity: 4000"
    )
    assert resize.verdict(_pod("2"), NODE, [{"cpu": 2000}]) is None


def test_a_condition_keeps_its_transition_time_while_the_reason_stays() -> None:
    first = resize.condition(resize.PENDING, "T1", resize.Verdict("Deferred", "m"))
    again = resize.condition(resize.PENDING, "T2", resize.Verdict("Deferred", "m2"), first)
    assert (again["lastProbeTime"], again["lastTransitionTime"], again["message"]) == ("T2", "T1", "m2")
    changed = resize.condition(resize.PENDING, "T3", resize.Verdict("Infeasible", "m3"), again)
    assert changed["lastTransitionTime"] == "T3"
    assert resize.condition(resize.IN_PROGRESS, "T4") == {
        "type": "PodResizeInProgress",
        "status": "True",
        "lastProbeTime": "T4",
        "lastTransitionTime": "T4",
    }


def test_a_container_restarts_only_for_a_changed_resource_its_policy_restarts_for() -> None:
    container = {
        "name": "app",
        "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}],
    }
    old = {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert not resize.restarts_for(container, old, {"requests": {"cpu": "2", "memory": "1Gi"}})
    assert resize.restarts_for(container, old, {"requests": {"cpu": "1", "memory": "2Gi"}})
    assert not resize.restarts_for(container, old, {"requests": {"cpu": "1", "memory": "1024Mi"}})


def test_resources_compare_by_value_as_the_runtime_reports_them() -> None:
    assert resize.same({"app": {"limits": {"memory": "1G"}}}, {"app": {"limits": {"memory": "1000000000"}}})
    assert not resize.same({"app": {"limits": {"memory": "1G"}}}, {"app": {"limits": {"memory": "1Gi"}}})
