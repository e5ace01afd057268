"""The default scheduler: places pods that name no other scheduler, as kube-scheduler's default profile does.

Filters are kube-scheduler's (unschedulable, taints, nodeSelector/affinity, NodeResourcesFit for cpu,
memory, pods and extended resources); the score is NodeResourcesLeastAllocated; the result is a
Binding through the API. A pod that fits nowhere gets `PodScheduled=False` (reason Unschedulable) and a
`FailedScheduling` event, and is retried whenever a node or another pod changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tenantgpu.controlplane.podstate import is_terminal, node_name, pod_key, wants_default_scheduler
from tenantgpu.gpushare.basics import capacity_reason, node_capacity, pod_amounts, pod_demand, static_reason
from tenantgpu.gpushare.quantity import QuantityError, parse_quantity
from tenantgpu.gpushare.reasons import fit_error
from tenantgpu.kubeclient import ApiError, Informer, KubeClient
from tenantgpu.kubeclient.client import now_rfc3339

log = logging.getLogger(__name__)

# Resources NodeResourcesFit handles by name; every other requested resource is "extended".
_BASIC_RESOURCES = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})


@dataclass
class _NodeUse:
    cpu_milli: int = 0
    memory: int = 0
    pods: int = 0
    extended: Counter[str] | None = None


def _requests(container: Mapping[str, Any]) -> dict[str, Any]:
    resources = container.get("resources") or {}
    # Requests default to limits when only limits are given (the API server does this; be safe twice).
    return {**(resources.get("limits") or {}), **(resources.get("requests") or {})}


def _extended(container: Mapping[str, Any]) -> dict[str, int]:
    return {
        name: int(parse_quantity(value))
        for name, value in _requests(container).items()
        if name not in _BASIC_RESOURCES
    }


def extended_requests(pod: dict[str, Any]) -> Counter[str]:
    """Extended resources a pod asks for, per name, counted as kube's PodRequests counts them: the app
    containers and sidecars add up, and the pod gets at least what each init container needs beside the
    sidecars started before it (see `pod_amounts`)."""
    return Counter(pod_amounts(pod.get("spec") or {}, _extended))


def _allocatable(node: dict[str, Any], name: str) -> int:
    status = node.get("status") or {}
    value = (status.get("allocatable") or status.get("capacity") or {}).get(name)
    return 0 if value is None else int(parse_quantity(value))


def failure_message(total: int, reasons: dict[str, str], preemption_policy: str = "") -> str:
    """kube-scheduler's summary from each node's reason, e.g. `0/2 nodes are available: 1 Insufficient
    cpu, 1 node(s) were unschedulable. preemption: 0/2 nodes are available: 1 No preemption victims
    found for incoming pod, 1 Preemption is not helpful for scheduling..`"""
    if total == 0:
        return "no nodes available to schedule pods"
    return fit_error(total, reasons, preemption_policy=preemption_policy)


class DefaultScheduler:
    """Schedules pods with schedulerName `default-scheduler` onto the tenant's nodes."""

    def __init__(
        self,
        client: KubeClient,
        *,
        retry_seconds: float = 5.0,
        pods: Informer | None = None,
        nodes: Informer | None = None,
    ) -> None:
        self.client = client
        self.retry_seconds = retry_seconds
        self.pods = pods or Informer(client, "pods")
        self.nodes = nodes or Informer(client, "nodes")
        self._wake = asyncio.Event()
        self._assumed: dict[tuple[str, str], str] = {}
        self._reported: dict[tuple[str, str], str] = {}
        # Pods that want this scheduler, kept by the watch: a round looks at them, not at every pod, and
        # with none pending a change elsewhere (HAMi's pods, heartbeats) does not start a round at all.
        self._pending: set[tuple[str, str]] = set()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.pods.add_handler(self._pod_changed)
        self.nodes.add_handler(self._node_changed)
        await self.nodes.start()
        await self.pods.start()
        self._task = asyncio.create_task(self._loop(), name="default-scheduler")
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.pods.stop()
        await self.nodes.stop()

    def _pod_changed(self, event: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = pod_key(pod)
        if node_name(pod):
            self._assumed.pop(key, None)
        if event != "DELETED" and wants_default_scheduler(pod):
            self._pending.add(key)
        else:
            self._pending.discard(key)
        if self._pending:
            self._wake.set()

    def _node_changed(self, event: str, node: dict[str, Any], old: dict[str, Any] | None) -> None:
        if self._pending:
            self._wake.set()

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.retry_seconds)
            self._wake.clear()
            try:
                await self.schedule_pending()
            except Exception:  # a failed round must not stop the scheduler; the next one retries
                log.exception("default scheduler round failed")

    async def schedule_pending(self) -> None:
        """One round: every pending pod in creation order, each placement counting for the next."""
        candidates = (self.pods.get(*key) for key in list(self._pending) if key not in self._assumed)
        pending = sorted(
            (p for p in candidates if p is not None and wants_default_scheduler(p)),
            key=lambda p: ((p.get("metadata") or {}).get("creationTimestamp") or "", pod_key(p)),
        )
        if not pending:
            return
        use = self._usage()
        for pod in pending:
            await self._schedule_one(pod, use)

    def _usage(self) -> dict[str, _NodeUse]:
        use: dict[str, _NodeUse] = {}
        assumed_nodes = dict(self._assumed)
        for pod in self.pods.items():
            node = node_name(pod) or assumed_nodes.get(pod_key(pod), "")
            if not node or is_terminal(pod):
                continue
            self._charge(use.setdefault(node, _NodeUse(extended=Counter())), pod)
        return use

    @staticmethod
    def _charge(entry: _NodeUse, pod: dict[str, Any]) -> None:
        try:
            demand = pod_demand(pod)
            extended = extended_requests(pod)
        except QuantityError:
            return
        entry.cpu_milli += demand.cpu_milli
        entry.memory += demand.memory
        entry.pods += 1
        assert entry.extended is not None
        entry.extended.update(extended)

    def _reason(self, pod: dict[str, Any], node: dict[str, Any], entry: _NodeUse) -> str | None:
        reason = static_reason(pod, node)
        if reason is not None:
            return reason
        demand = pod_demand(pod)
        reason = capacity_reason(demand, node_capacity(node), entry.cpu_milli, entry.memory, entry.pods)
        if reason is not None:
            return reason
        assert entry.extended is not None
        for name, amount in sorted(extended_requests(pod).items()):
            if amount and entry.extended[name] + amount > _allocatable(node, name):
                return f"Insufficient {name}"
        return None

    @staticmethod
    def _score(pod: dict[str, Any], node: dict[str, Any], entry: _NodeUse) -> float:
        """NodeResourcesLeastAllocated: the mean free share of cpu and memory after placing the pod."""
        capacity = node_capacity(node)
        demand = pod_demand(pod)
        shares = []
        for total, used in (
            (capacity.cpu_milli, entry.cpu_milli + demand.cpu_milli),
            (capacity.memory, entry.memory + demand.memory),
        ):
            if total:
                shares.append(max(0.0, (total - used) / total))
        return 100.0 * sum(shares) / len(shares) if shares else 0.0

    async def _schedule_one(self, pod: dict[str, Any], use: dict[str, _NodeUse]) -> None:
        key = pod_key(pod)
        nodes = sorted(self.nodes.items(), key=lambda n: n["metadata"]["name"])
        reasons: dict[str, str] = {}
        best: tuple[float, str] | None = None
        try:
            for node in nodes:
                name = node["metadata"]["name"]
                entry = use.setdefault(name, _NodeUse(extended=Counter()))
                reason = self._reason(pod, node, entry)
                if reason is not None:
                    reasons[name] = reason
                    continue
                score = self._score(pod, node, entry)
                if best is None or score > best[0]:  # ties keep the first node by name
                    best = (score, name)
        except QuantityError as exc:
            await self._unschedulable(pod, f"invalid resource quantity: {exc}")
            return
        if best is None:
            policy = (pod.get("spec") or {}).get("preemptionPolicy") or ""
            await self._unschedulable(pod, failure_message(len(nodes), reasons, policy))
            return
        target = best[1]
        meta = pod["metadata"]
        try:
            await self.client.create_binding(meta["namespace"], meta["name"], target, pod_uid=meta.get("uid"))
        except ApiError as exc:
            if exc.code in (404, 409):  # deleted meanwhile, or someone else bound it: nothing to do
                return
            raise
        self._assumed[key] = target
        self._reported.pop(key, None)
        self._charge(use.setdefault(target, _NodeUse(extended=Counter())), pod)
        await self._event(pod, "Normal", "Scheduled", f"Successfully assigned {key[0]}/{key[1]} to {target}")

    async def _unschedulable(self, pod: dict[str, Any], message: str) -> None:
        key = pod_key(pod)
        if self._reported.get(key) == message:
            return  # said already; repeating it every retry would only flood the events
        self._reported[key] = message
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339(),
        }
        try:
            await self.client.patch(
                "pods",
                key[1],
                {"status": {"conditions": [condition]}},
                key[0],
                patch_type="strategic",
                subresource="status",
            )
        except ApiError as exc:
            if exc.code != 404:
                raise
            return
        await self._event(pod, "Warning", "FailedScheduling", message)

    async def _event(self, pod: dict[str, Any], type_: str, reason: str, message: str) -> None:
        with contextlib.suppress(ApiError):
            await self.client.create_event(
                pod, reason=reason, message=message, type=type_, component="default-scheduler"
            )
