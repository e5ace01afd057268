"""What the eviction subresource asks of PodDisruptionBudgets before a pod goes (kube-apiserver's
eviction REST): which budgets cover a pod, whether one lets it go, and the budget's status after.

A pod that is already terminating, has ended or has not started is evicted whatever its budgets say.
Otherwise its one budget must allow a disruption: the eviction then takes one from
`status.disruptionsAllowed` and records the pod in `status.disruptedPods`, until the disruption
controller sees it gone. `kubectl drain` retries a 429 every 5 seconds.
"""

from __future__ import annotations

from typing import Any

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.selectors import match_selector_object

Obj = dict[str, Any]

# kube refuses more evictions once this many are unconfirmed by the disruption controller.
MAX_DISRUPTED_PODS = 2000


def ignores_budgets(pod: Obj) -> bool:
    """A pod budgets do not protect: being deleted already, ended, or not started."""
    phase = (pod.get("status") or {}).get("phase")
    return bool(pod["metadata"].get("deletionTimestamp")) or phase in ("Succeeded", "Failed", "Pending")


def covers(budget: Obj, pod: Obj) -> bool:
    """Whether the budget's selector picks the pod (policy/v1: a null selector picks nothing, `{}` all)."""
    selector = (budget.get("spec") or {}).get("selector")
    if selector is None:
        return False
    return match_selector_object(selector, pod["metadata"].get("labels") or {})


def _is_ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _budget_cause(message: str) -> dict[str, Any]:
    return {"causes": [{"reason": "DisruptionBudget", "message": message}]}


def spend(budget: Obj, pod: Obj, now: str) -> bool:
    """Check that `budget` lets `pod` go and, when the eviction must count, take one disruption from it
    (in place). Returns whether the budget changed. Raises the Status kube answers with when it refuses."""
    name = budget["metadata"]["name"]
    status = budget.get("status") or {}
    if int(status.get("observedGeneration") or 0) < int(budget["metadata"].get("generation") or 1):
        raise errors.APIError(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            _budget_cause(f"The disruption budget {name} is still being processed by the server."),
        )
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise errors.APIError(403, "Forbidden", "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        raise errors.APIError(
            403, "Forbidden", "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        )
    if not _is_ready(pod):
        policy = (budget.get("spec") or {}).get("unhealthyPodEvictionPolicy")
        healthy, desired = int(status.get("currentHealthy") or 0), int(status.get("desiredHealthy") or 0)
        # an unready pod does not count as healthy: letting it go costs the budget nothing
        if policy == "AlwaysAllow" or (healthy >= desired and desired > 0):
            return False
    if allowed == 0:
        raise errors.APIError(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            _budget_cause(
                f"The disruption budget {name} needs {int(status.get('desiredHealthy') or 0)} healthy pods "
                f"and has {int(status.get('currentHealthy') or 0)} currently"
            ),
        )
    status = budget.setdefault("status", {})
    status["disruptionsAllowed"] = allowed - 1
    status.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = now
    return True
