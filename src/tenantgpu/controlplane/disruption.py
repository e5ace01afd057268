"""The disruption controller of kube-controller-manager: keeps each PodDisruptionBudget's status, which
the eviction subresource (`kubectl drain`) reads before it lets a pod go.

For a budget it counts the pods its selector picks: those Ready and not being deleted are healthy
(pods an eviction has just taken, listed in `disruptedPods`, are not). How many must stay healthy:
- `minAvailable: N`: N, out of the pods there are;
- `minAvailable: P%` or `maxUnavailable`: taken from the scale of the pods' controllers (a Deployment's,
  a ReplicaSet's or a StatefulSet's replicas), rounding up as kube does. Pods without such a
  controller make the budget fail safe: no disruption is allowed, and a warning event says why.
`disruptionsAllowed` is healthy minus desired, never below 0. An evicted pod stays in `disruptedPods`
until it is being deleted or gone, or for 2 minutes at most.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from tenantgpu.apiserver.eviction import covers
from tenantgpu.controlplane.conditions import get_condition, parse_time
from tenantgpu.controlplane.owners import controller_of
from tenantgpu.controlplane.podstate import is_ready
from tenantgpu.controlplane.workqueue import Key, WorkQueue, object_key
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

COMPONENT = "controllermanager"
DELETION_TIMEOUT_SECONDS = 120.0


class NoScale(Exception):
    """The budget needs its pods' scale, and a pod has no controller that has one."""


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scaled(value: int | str, total: int) -> int:
    """kube's GetScaledValueFromIntOrPercent with rounding up."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


class DisruptionController:
    """Runs every PodDisruptionBudget of one tenant."""

    def __init__(
        self,
        client: KubeClient,
        *,
        pods: Informer,
        replica_sets: Informer,
        deployments: Informer,
        stateful_sets: Informer,
        budgets: Informer | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.pods = pods
        self.replica_sets = replica_sets
        self.deployments = deployments
        self.stateful_sets = stateful_sets
        self.budgets = budgets or Informer(client, "poddisruptionbudgets")
        self.clock = clock
        self.queue = WorkQueue("disruption-controller", self.sync)
        # namespace → its budgets' names: a pod event in a namespace without budgets costs one lookup
        self._by_namespace: dict[str, set[str]] = {}

    async def start(self) -> None:
        self.budgets.add_handler(self._budget_changed)
        self.pods.add_handler(self._pod_changed)
        await self.budgets.start()
        await self.pods.start()
        for budget in self.budgets.items():
            self.queue.add(object_key(budget))
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()
        await self.budgets.stop()

    def _budget_changed(self, event: str, budget: dict[str, Any], old: dict[str, Any] | None) -> None:
        namespace, name = object_key(budget)
        names = self._by_namespace.setdefault(namespace, set())
        if event == "DELETED":
            names.discard(name)
            if not names:
                del self._by_namespace[namespace]
            return
        names.add(name)
        self.queue.add((namespace, name))

    def _pod_changed(self, event: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        namespace = pod["metadata"].get("namespace") or ""
        names = self._by_namespace.get(namespace)
        if not names:
            return
        for name in list(names):
            budget = self.budgets.get(namespace, name)
            if budget is not None and (covers(budget, pod) or (old is not None and covers(budget, old))):
                self.queue.add((namespace, name))

    def _expected_scale(self, pods: list[dict[str, Any]]) -> int:
        """The summed replicas of the pods' controllers, each counted once (kube's getExpectedScale)."""
        scales: dict[str, int] = {}
        for pod in pods:
            ref = controller_of(pod)
            namespace = pod["metadata"].get("namespace") or ""
            owner: dict[str, Any] | None = None
            if ref is not None and ref.get("kind") == "ReplicaSet":
                owner = self.replica_sets.get(namespace, ref.get("name", ""))
                parent = controller_of(owner) if owner is not None else None
                if parent is not None and parent.get("kind") == "Deployment":
                    owner = self.deployments.get(namespace, parent.get("name", "")) or owner
            elif ref is not None and ref.get("kind") == "StatefulSet":
                owner = self.stateful_sets.get(namespace, ref.get("name", ""))
            if owner is None:
                raise NoScale(f'found no controllers for pod "{pod["metadata"]["name"]}"')
            replicas = (owner.get("spec") or {}).get("replicas")
            scales[owner["metadata"]["uid"]] = 1 if replicas is None else int(replicas)
        return sum(scales.values())

    async def sync(self, key: Key) -> None:
        budget = self.budgets.get(*key)
        if budget is None or budget["metadata"].get("deletionTimestamp"):
            return
        namespace = key[0]
        pods = [
            p
            for p in self.pods.items()
            if (p["metadata"].get("namespace") or "") == namespace and covers(budget, p)
        ]
        spec = budget.get("spec") or {}
        try:
            if spec.get("maxUnavailable") is not None:
                expected = self._expected_scale(pods)
                desired = max(0, expected - scaled(spec["maxUnavailable"], expected))
            elif isinstance(spec.get("minAvailable"), int):
                expected, desired = len(pods), int(spec["minAvailable"])
            elif spec.get("minAvailable") is not None:
                expected = self._expected_scale(pods)
                desired = scaled(spec["minAvailable"], expected)
            else:
                expected, desired = len(pods), 0
        except NoScale as missing:
            await self._fail_safe(budget, str(missing))
            return
        disrupted, recheck = self._still_disrupted(budget, pods)
        healthy = sum(
            1
            for p in pods
            if is_ready(p)
            and not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["name"] not in disrupted
        )
        allowed = max(0, healthy - desired)
        status: dict[str, Any] = {
            "observedGeneration": budget["metadata"].get("generation", 1),
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "conditions": [
                self._condition(
                    budget, allowed > 0, "SufficientPods" if allowed > 0 else "InsufficientPods", ""
                )
            ],
        }
        if disrupted:
            status["disruptedPods"] = disrupted
        await self._write(budget, status)
        if recheck is not None:
            self.queue.add_after(key, max(0.0, recheck - self.clock()))

    def _still_disrupted(
        self, budget: dict[str, Any], pods: list[dict[str, Any]]
    ) -> tuple[dict[str, str], float | None]:
        """The evicted pods still counted as disrupted, and when the first of them stops counting."""
        listed = (budget.get("status") or {}).get("disruptedPods") or {}
        alive = {p["metadata"]["name"]: p for p in pods if not p["metadata"].get("deletionTimestamp")}
        now = self.clock()
        kept: dict[str, str] = {}
        recheck: float | None = None
        for name, when in listed.items():
            since = parse_time(when)
            if name not in alive or since is None or since + DELETION_TIMEOUT_SECONDS < now:
                continue
            kept[name] = when
            expiry = since + DELETION_TIMEOUT_SECONDS
            recheck = expiry if recheck is None else min(recheck, expiry)
        return kept, recheck

    def _condition(self, budget: dict[str, Any], allowed: bool, reason: str, message: str) -> dict[str, Any]:
        status = "True" if allowed else "False"
        previous = get_condition(budget.get("status") or {}, "DisruptionAllowed")
        since = (
            previous.get("lastTransitionTime")
            if previous is not None and previous.get("status") == status
            else _rfc3339(self.clock())
        )
        return {
            "type": "DisruptionAllowed",
            "status": status,
            "reason": reason,
            "message": message,
            "observedGeneration": budget["metadata"].get("generation", 1),
            "lastTransitionTime": since,
        }

    async def _fail_safe(self, budget: dict[str, Any], why: str) -> None:
        """As kube: no disruption allowed while the expected pod count cannot be worked out."""
        old = budget.get("status") or {}
        status = {
            **{k: old.get(k, 0) for k in ("currentHealthy", "desiredHealthy", "expectedPods")},
            "observedGeneration": budget["metadata"].get("generation", 1),
            "disruptionsAllowed": 0,
            "conditions": [self._condition(budget, False, "SyncFailed", why)],
        }
        if await self._write(budget, status):
            with contextlib.suppress(ApiError):
                await self.client.create_event(
                    {**budget, "apiVersion": "policy/v1", "kind": "PodDisruptionBudget"},
                    reason="CalculateExpectedPodCountFailed",
                    message=f"Failed to calculate the number of expected pods: {why}",
                    type="Warning",
                    component=COMPONENT,
                )

    async def _write(self, budget: dict[str, Any], status: dict[str, Any]) -> bool:
        """Write the status unless it is what the budget has; whether it was written."""
        if (budget.get("status") or {}) == status:
            return False
        await self.client.update_status(
            "poddisruptionbudgets",
            {**budget, "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "status": status},
        )
        return True
