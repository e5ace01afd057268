"""The eviction subresource's budget rules (kube-apiserver's eviction REST), on PodDisruptionBudget objects."""

from __future__ import annotations

from typing import Any

import pytest

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.eviction import covers, ignores_budgets, spend
from tenantgpu.controlplane.disruption import scaled


def _pod(phase: str = "Running", ready: bool = True, **meta: Any) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "metadata": {"name": "web-1", "labels": {"app": "web"}, **meta},
        "status": {"phase": phase, "conditions": conditions},
    }


def _budget(allowed: int, healthy: int = 3, desired: int = 2, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
        "status": {
            "observedGeneration": 1,
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
        },
    }


def test_an_allowed_eviction_takes_one_disruption_and_records_the_pod() -> None:
    budget = _budget(1)
    assert spend(budget, _pod(), "2026-11-30T20:00:00Z")
    assert budget["status"]["disruptionsAllowed"] == 0
    assert budget["status"]["disruptedPods"] == {"web-1": "2026-11-30T20:00:00Z"}


def test_a_spent_budget_refuses_with_kube_s_429_and_its_cause() -> None:
    with pytest.raises(errors.APIError) as refused:
        spend(_budget(0, healthy=2), _pod(), "now")
    assert (refused.value.code, refused.value.reason) == (429, "TooManyRequests")
    assert refused.value.details == {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget web needs 2 healthy pods and has 2 currently",
            }
        ]
    }


def test_a_budget_the_controller_has_not_seen_yet_refuses() -> None:
    budget = _budget(1)
    budget["metadata"]["generation"] = 2
    with pytest.raises(errors.APIError) as refused:
        spend(budget, _pod(), "now")
    assert refused.value.code == 429
    assert refused.value.details["causes"][0]["message"] == (  # type: ignore[index]
        "The disruption budget web is still being processed by the server."
    )


def test_an_unready_pod_goes_without_spending_while_the_budget_is_met_or_always_allowed() -> None:
    met = _budget(0, healthy=2, desired=2)
    assert not spend(met, _pod(ready=False), "now")
    assert met["status"]["disruptionsAllowed"] == 0
    short = _budget(0, healthy=1, desired=2)
    with pytest.raises(errors.APIError):
        spend(short, _pod(ready=False), "now")
    assert not spend(
        _budget(0, healthy=1, desired=2, unhealthyPodEvictionPolicy="AlwaysAllow"), _pod(ready=False), "now"
    )


def test_which_pods_and_budgets_the_rules_apply_to() -> None:
    assert ignores_budgets(_pod("Pending")) and ignores_budgets(_pod("Succeeded"))
    assert ignores_budgets(_pod(deletionTimestamp="2026-11-30T20:00:00Z"))
    assert not ignores_budgets(_pod())
    # policy/v1: a null selector picks no pod, an empty one every pod
    assert not covers({"spec": {}}, _pod()) and covers({"spec": {"selector": {}}}, _pod())
    assert not covers({"spec": {"selector": {"matchLabels": {"app": "db"}}}}, _pod())


@pytest.mark.parametrize(
    ("value", "total", "expected"), [(2, 10, 2), ("50%", 3, 2), ("10%", 3, 1), ("0%", 5, 0)]
)
def test_percentages_of_the_expected_pods_round_up(value: int | str, total: int, expected: int) -> None:
    assert scaled(value, total) == expected
