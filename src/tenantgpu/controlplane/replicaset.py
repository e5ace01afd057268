"""The ReplicaSet controller of kube-controller-manager: keeps `spec.replicas` pods of the template.

Pods are created from the template (named `<replicaset>-<5 characters>`, owned by the ReplicaSet)
and, when there are too many, deleted in kube's order: unscheduled before scheduled, pending before
running, not ready before ready, the youngest first. The status counts replicas, fully labelled,
ready and available pods.

A pod that is deleted is replaced at once, as in kube. One guard of the lab's: a pod that ends
although its restartPolicy is Always (its `tenantgpu.io/run-for` time is up, its GPU workload failed,
or admission refused it) is replaced after the delay CrashLoopBackOff would wait (10 s, doubling up to
5 minutes) rather than at once, so a template that cannot run does not flood the tenant with pods.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tenantgpu.controlplane.conditions import now_text
from tenantgpu.controlplane.owners import controller_of, owned_by, pod_from_template
from tenantgpu.controlplane.podstate import is_ready, is_terminal
from tenantgpu.controlplane.workqueue import Expectations, Key, WorkQueue, object_key, observe_event
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

COMPONENT = "replicaset-controller"
RESTART_BACKOFF_BASE = 10.0
RESTART_BACKOFF_MAX = 300.0


@dataclass
class _Restarts:
    """When owned pods ended, to space their replacements as CrashLoopBackOff spaces restarts."""

    ended: list[float] = field(default_factory=list)

    def delay(self, now: float) -> float:
        self.ended = [t for t in self.ended if now - t < 2 * RESTART_BACKOFF_MAX]
        if not self.ended:
            return 0.0
        wait = min(RESTART_BACKOFF_BASE * 2 ** (len(self.ended) - 1), RESTART_BACKOFF_MAX)
        return self.ended[-1] + wait - now


def ended_on_its_own(pod: dict[str, Any], old: dict[str, Any] | None) -> bool:
    """The pod has just ended without being deleted: what the CrashLoopBackOff-like guard counts.

    A deleted or scaled-down pod also reaches a terminal phase while the kubelet stops it; counting those
    held the replacements of a few deleted pods, or a scale back up, for up to 5 minutes."""
    if pod["metadata"].get("deletionTimestamp"):
        return False
    return is_terminal(pod) and (old is None or not is_terminal(old))


def replica_failure(conditions: list[dict[str, Any]], failed: ApiError | None) -> list[dict[str, Any]]:
    """The conditions after a sync, as kube's calculateStatus keeps them: a refused create adds
    `ReplicaFailure` (reason FailedCreate, the refusal's message) unless one is there already, and a sync
    that went through removes it."""
    present = any(c.get("type") == "ReplicaFailure" for c in conditions)
    if failed is None:
        return [c for c in conditions if c.get("type") != "ReplicaFailure"]
    if present:
        return conditions
    added = {
        "type": "ReplicaFailure",
        "status": "True",
        "lastTransitionTime": now_text(),
        "reason": "FailedCreate",
        "message": failed.message,
    }
    return [*conditions, added]


def deletion_order(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The order kube deletes surplus pods in (ActivePodsWithRanks, simplified): unscheduled before
    scheduled, pending before running, not ready before ready, and among equals the youngest first."""
    youngest_first = sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "", reverse=True)

    def rank(pod: dict[str, Any]) -> tuple[int, int, int]:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        phase = {"Pending": 0, "Unknown": 1, "Running": 2}.get(status.get("phase", ""), 0)
        return (1 if spec.get("nodeName") else 0, phase, 1 if is_ready(pod) else 0)

    return sorted(youngest_first, key=rank)  # stable: equal ranks keep the youngest first


class ReplicaSetController:
    """Runs every ReplicaSet of one tenant."""

    def __init__(
        self, client: KubeClient, *, pods: Informer, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.client = client
        self.pods = pods
        self.replica_sets = Informer(client, "replicasets")
        self.clock = clock
        self.queue = WorkQueue("replicaset-controller", self.sync)
        self._expected: dict[str, Expectations] = {}
        self._restarts: dict[str, _Restarts] = {}

    async def start(self) -> None:
        self.replica_sets.add_handler(self._rs_changed)
        self.pods.add_handler(self._pod_changed)
        await self.replica_sets.start()
        await self.pods.start()
        for rs in self.replica_sets.items():
            self.queue.add(object_key(rs))
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()
        await self.replica_sets.stop()

    def _rs_changed(self, event: str, rs: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event == "DELETED":
            uid = rs["metadata"].get("uid", "")
            self._expected.pop(uid, None)
            self._restarts.pop(uid, None)
        self.queue.add(object_key(rs))

    def _pod_changed(self, event: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        ref = controller_of(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        if event != "DELETED" and ended_on_its_own(pod, old):
            self._restarts.setdefault(ref.get("uid", ""), _Restarts()).ended.append(self.clock())
        observe_event(self._expected, ref.get("uid", ""), event, pod, self.clock())
        self.queue.add((pod["metadata"].get("namespace") or "", ref.get("name", "")))

    async def sync(self, key: Key) -> None:
        rs = self.replica_sets.get(*key)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return
        uid = rs["metadata"]["uid"]
        pods = owned_by(rs, self.pods.items())
        active = [p for p in pods if not is_terminal(p) and not p["metadata"].get("deletionTimestamp")]
        now = self.clock()
        expected = self._expected.setdefault(uid, Expectations()).count(
            {p["metadata"]["name"] for p in pods}, now
        )
        wanted = int((rs.get("spec") or {}).get("replicas", 1))
        diff = wanted - len(active) - expected
        events: list[tuple[str, str, str]] = []
        failed: ApiError | None = None
        if diff > 0:
            delay = self._restarts.get(uid, _Restarts()).delay(now)
            if delay > 0:
                self.queue.add_after(key, delay)
            else:
                for _ in range(diff):
                    try:
                        name = await self._create_pod(rs)
                    except ApiError as err:
                        # kube stops creating at the first refusal and says why on the ReplicaSet
                        failed = err
                        events.append(("Warning", "FailedCreate", f"Error creating: {err.message}"))
                        break
                    events.append(("Normal", "SuccessfulCreate", f"Created pod: {name}"))
        elif diff < 0:
            for pod in deletion_order(active)[:-diff]:
                meta = pod["metadata"]
                with contextlib.suppress(ApiError):
                    await self.client.delete("pods", meta["name"], meta.get("namespace"), uid=meta["uid"])
                    events.append(("Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}"))
                active.remove(pod)
        await self._write_status(rs, active, failed)
        for kind, reason, message in events:
            with contextlib.suppress(ApiError):
                await self.client.create_event(
                    {**rs, "apiVersion": "apps/v1", "kind": "ReplicaSet"},
                    reason=reason,
                    message=message,
                    type=kind,
                    component=COMPONENT,
                )
        if failed is not None:
            raise failed  # the work queue tries again

    async def _create_pod(self, rs: dict[str, Any]) -> str:
        body = pod_from_template({**rs, "apiVersion": "apps/v1", "kind": "ReplicaSet"})
        pod = await self.client.create("pods", body)
        name = pod["metadata"]["name"]
        self._expected.setdefault(rs["metadata"]["uid"], Expectations()).expect(name, self.clock())
        return name

    async def _write_status(
        self, rs: dict[str, Any], active: list[dict[str, Any]], failed: ApiError | None = None
    ) -> None:
        labels = ((rs.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
        ready = sum(1 for p in active if is_ready(p))
        status = {
            "replicas": len(active),
            "fullyLabeledReplicas": sum(
                1
                for p in active
                if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())
            ),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        # kube leaves zero counts out of the object
        status = {k: v for k, v in status.items() if v or k in ("replicas", "observedGeneration")}
        old = rs.get("status") or {}
        conditions = replica_failure(old.get("conditions") or [], failed)
        if conditions:
            status["conditions"] = conditions
        if {k: old.get(k) for k in status} == status and set(old) <= set(status):
            return
        await self.client.update_status(
            "replicasets", {**rs, "apiVersion": "apps/v1", "kind": "ReplicaSet", "status": status}
        )
