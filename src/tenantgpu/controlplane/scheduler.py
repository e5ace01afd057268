"""The default scheduler: places pods that name no other scheduler, as kube-scheduler's default profile does.

Filters are kube-scheduler's (unschedulable, taints, nodeSelector/affinity, NodeResourcesFit for cpu,
memory, pods and extended resources); the score is NodeResourcesLeastAllocated; the result is a
Binding through the API. A pod that fits nowhere gets `PodScheduled=False` (reason Unschedulable) and a
`FailedScheduling` event, and is retried whenever a node or another pod changes. Unless its
`preemptionPolicy` is Never, it may first evict lower-priority pods as kube's DefaultPreemption does
(`preemption.py`); it is then nominated to their node, whose room is kept for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tenantgpu.controlplane import preemption
from tenantgpu.controlplane.podstate import is_terminal, node_name, pod_key, wants_default_scheduler
from tenantgpu.gpushare import volumes
from tenantgpu.gpushare.basics import capacity_reason, node_capacity, pod_amounts, pod_demand, static_reason
from tenantgpu.gpushare.quantity import QuantityError, parse_quantity
from tenantgpu.gpushare.reasons import PREEMPTION_NOT_HELPFUL, fit_error, is_unresolvable, prefilter_error
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


def failure_message(
    total: int,
    reasons: dict[str, str],
    preemption_policy: str = "",
    preemption: dict[str, str] | str | None = None,
) -> str:
    """kube-scheduler's summary from each node's reason, e.g. `0/2 nodes are available: 1 Insufficient
    cpu, 1 node(s) were unschedulable. preemption: 0/2 nodes are available: 1 No preemption victims
    found for incoming pod, 1 Preemption is not helpful for scheduling..`"""
    if total == 0:
        return "no nodes available to schedule pods"
    return fit_error(total, reasons, preemption_policy=preemption_policy, preemption=preemption)


class DefaultScheduler:
    """Schedules pods with schedulerName `default-scheduler` onto the tenant's nodes."""

    def __init__(
        self,
        client: KubeClient,
        *,
        retry_seconds: float = 5.0,
        pods: Informer | None = None,
        nodes: Informer | None = None,
        budgets: Informer | None = None,
        claims: Informer | None = None,
        volumes: Informer | None = None,
        classes: Informer | None = None,
    ) -> None:
        self.client = client
        # VolumeBinding's view of the claims, volumes and classes (the PV controller's informers).
        self.claims = claims
        self.volumes = volumes
        self.classes = classes
        self.retry_seconds = retry_seconds
        self.pods = pods or Informer(client, "pods")
        self.nodes = nodes or Informer(client, "nodes")
        # The PodDisruptionBudgets preemption tries to keep (the disruption controller's informer).
        self.budgets = budgets
        self._wake = asyncio.Event()
        self._assumed: dict[tuple[str, str], str] = {}
        self._reported: dict[tuple[str, str], str] = {}
        # Pods that want this scheduler, kept by the watch: a round looks at them, not at every pod, and
        # with none pending a change elsewhere (HAMi's pods, heartbeats) does not start a round at all.
        self._pending: set[tuple[str, str]] = set()
        self._task: asyncio.Task[None] | None = None
        self._binding: set[asyncio.Task[None]] = set()
        # VolumeBinding's bindTimeoutSeconds
        self.bind_timeout_seconds = 600.0

    async def start(self) -> None:
        self.pods.add_handler(self._pod_changed)
        self.nodes.add_handler(self._node_changed)
        for informer in (self.claims, self.volumes):
            if informer is not None:
                informer.add_handler(self._node_changed)  # a claim bound may be what a pod waits for
        await self.nodes.start()
        for informer in (self.claims, self.volumes, self.classes):
            if informer is not None:
                await informer.start()  # before any pod is judged on its claims
        await self.pods.start()
        self._task = asyncio.create_task(self._loop(), name="default-scheduler")
        self._wake.set()

    async def stop(self) -> None:
        for task in [*self._binding, *([self._task] if self._task else [])]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._binding.clear()
        self._task = None
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
        nominations = self._nominations()
        for pod in pending:
            await self._schedule_one(pod, use, nominations)

    def _placed(self) -> dict[str, list[dict[str, Any]]]:
        """The live pods on each node, those bound and those this scheduler has just bound."""
        placed: dict[str, list[dict[str, Any]]] = {}
        assumed_nodes = dict(self._assumed)
        for pod in self.pods.items():
            node = node_name(pod) or assumed_nodes.get(pod_key(pod), "")
            if node and not is_terminal(pod):
                placed.setdefault(node, []).append(pod)
        return placed

    def _usage(self) -> dict[str, _NodeUse]:
        use: dict[str, _NodeUse] = {}
        for node, pods in self._placed().items():
            entry = use[node] = _NodeUse(extended=Counter())
            for pod in pods:
                self._charge(entry, pod)
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

    def _nominations(self) -> list[tuple[str, dict[str, Any]]]:
        """(node, pod) for each pod an earlier preemption nominated to a node and not bound yet."""
        return [
            (target, other)
            for other in self.pods.items()
            if (target := (other.get("status") or {}).get("nominatedNodeName"))
            and not node_name(other)
            and not is_terminal(other)
            and not (other.get("metadata") or {}).get("deletionTimestamp")
        ]

    @staticmethod
    def _nominated(
        pod: dict[str, Any], nominations: list[tuple[str, dict[str, Any]]]
    ) -> dict[str, list[dict[str, Any]]]:
        """The nominated pods of at least this pod's priority, by node: kube-scheduler keeps their room
        for them when it places another pod (addNominatedPods)."""
        own, key = preemption.priority(pod), pod_key(pod)
        found: dict[str, list[dict[str, Any]]] = {}
        for target, other in nominations:
            if pod_key(other) != key and preemption.priority(other) >= own:
                found.setdefault(target, []).append(other)
        return found

    def _with_nominated(self, entry: _NodeUse, nominated: list[dict[str, Any]]) -> _NodeUse:
        if not nominated:
            return entry
        assert entry.extended is not None
        copy = _NodeUse(entry.cpu_milli, entry.memory, entry.pods, Counter(entry.extended))
        for other in nominated:
            self._charge(copy, other)
        return copy

    async def _schedule_one(
        self,
        pod: dict[str, Any],
        use: dict[str, _NodeUse],
        nominations: list[tuple[str, dict[str, Any]]],
    ) -> None:
        key = pod_key(pod)
        nodes = sorted(self.nodes.items(), key=lambda n: n["metadata"]["name"])
        reasons: dict[str, str] = {}
        best: tuple[float, str] | None = None
        nominated = self._nominated(pod, nominations)
        claims = self._claims_verdict(pod)
        if claims.refusal is not None and nodes:
            policy = (pod.get("spec") or {}).get("preemptionPolicy") or ""
            await self._unschedulable(
                pod, prefilter_error(len(nodes), claims.refusal, preemption_policy=policy)
            )
            return
        try:
            for node in nodes:
                name = node["metadata"]["name"]
                entry = use.setdefault(name, _NodeUse(extended=Counter()))
                entry = self._with_nominated(entry, nominated.get(name, []))
                reason = self._reason(pod, node, entry) or volumes.node_reason(
                    claims, node, self.volumes.items() if claims.needs_binding and self.volumes else ()
                )
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
            verdict: dict[str, str] | str | None = None
            if policy != "Never" and nodes:
                verdict = await self._preempt(pod, nodes, reasons, nominated)
            await self._unschedulable(pod, failure_message(len(nodes), reasons, policy, verdict))
            return
        target = best[1]
        meta = pod["metadata"]
        if claims.needs_binding:
            node = self.nodes.get(None, target) or {}
            plan = volumes.bindings_for_node(claims, node, self.volumes.items() if self.volumes else ())
            self._assumed[key] = target
            self._charge(use.setdefault(target, _NodeUse(extended=Counter())), pod)
            task = asyncio.create_task(self._bind_with_volumes(pod, target, plan or []))
            self._binding.add(task)
            task.add_done_callback(self._binding.discard)
            return
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

    async def _bind_with_volumes(
        self, pod: dict[str, Any], target: str, plan: list[volumes.ClaimBinding]
    ) -> None:
        """VolumeBinding's PreBind, then the Binding: each delayed claim is bound to its chosen volume or
        given the node for its provisioner, and the pod is bound once every claim is (kube's binding
        cycle runs apart from the scheduling loop, as this task does)."""
        key = pod_key(pod)
        meta = pod["metadata"]
        try:
            for write in volumes.prebind_patches(plan, target):
                await self.client.patch(write.resource, write.name, write.patch, write.namespace)
            deadline = asyncio.get_running_loop().time() + self.bind_timeout_seconds
            names = volumes.pod_claim_names(pod)
            while not volumes.all_bound(self.claims.get(key[0], n) if self.claims else None for n in names):
                if asyncio.get_running_loop().time() > deadline:
                    raise TimeoutError("timed out waiting for the condition")
                await asyncio.sleep(0.05)
            await self.client.create_binding(meta["namespace"], meta["name"], target, pod_uid=meta.get("uid"))
        except (ApiError, TimeoutError) as exc:
            self._assumed.pop(key, None)
            if isinstance(exc, ApiError) and exc.code == 404:
                return
            detail = exc.message if isinstance(exc, ApiError) else str(exc)
            await self._unschedulable(
                pod, f'running PreBind plugin "VolumeBinding": binding volumes: {detail}'
            )
            self._wake.set()
            return
        self._reported.pop(key, None)
        await self._event(pod, "Normal", "Scheduled", f"Successfully assigned {key[0]}/{key[1]} to {target}")

    def _claims_verdict(self, pod: dict[str, Any]) -> volumes.ClaimVerdict:
        """VolumeBinding's PreFilter on what the informers hold."""
        names = volumes.pod_claim_names(pod)
        if not names or self.claims is None:
            return volumes.ClaimVerdict()
        namespace = pod["metadata"].get("namespace") or ""
        claims = {name: self.claims.get(namespace, name) for name in names}
        bound = {
            name: self.volumes.get(None, name) if self.volumes is not None else None
            for claim in claims.values()
            if claim is not None and (name := (claim.get("spec") or {}).get("volumeName"))
        }
        classes = {
            name: self.classes.get(None, name) if self.classes is not None else None
            for claim in claims.values()
            if claim is not None and (name := volumes.claim_class(claim))
        }
        return volumes.judge_claims(pod, claims, bound, classes)

    async def _preempt(
        self,
        pod: dict[str, Any],
        nodes: list[dict[str, Any]],
        reasons: dict[str, str],
        nominated: dict[str, list[dict[str, Any]]],
    ) -> dict[str, str] | str:
        """kube's DefaultPreemption (PostFilter): each node's dry run, and on the best node the eviction
        of its victims. Returns the nodes' verdicts, why the pod may not preempt, or "" once it has."""
        placed = self._placed()
        target = (pod.get("status") or {}).get("nominatedNodeName")
        if target and not is_unresolvable(reasons.get(target, "")):
            own = preemption.priority(pod)
            if any(
                preemption.priority(p) < own and preemption.terminating_by_preemption(p)
                for p in placed.get(target, [])
            ):
                return preemption.NOT_ELIGIBLE_TERMINATING
        budgets = self.budgets.items() if self.budgets is not None else []
        verdicts: dict[str, str] = {}
        candidates: list[preemption.Candidate] = []
        for node in nodes:
            name = node["metadata"]["name"]
            reason = reasons.get(name)
            if reason is None or is_unresolvable(reason):
                verdicts[name] = PREEMPTION_NOT_HELPFUL
                continue

            def fits(
                staying: list[dict[str, Any]], node: dict[str, Any] = node, name: str = name
            ) -> str | None:
                entry = _NodeUse(extended=Counter())
                for other in [*staying, *nominated.get(name, [])]:
                    self._charge(entry, other)
                return self._reason(pod, node, entry)

            found = preemption.select_victims(pod, name, placed.get(name, []), fits, budgets)
            if isinstance(found, str):
                verdicts[name] = found
            else:
                candidates.append(found)
        if not candidates:
            return verdicts
        chosen = preemption.pick_node(candidates)
        await self._evict(pod, chosen)
        return ""

    async def _evict(self, pod: dict[str, Any], chosen: preemption.Candidate) -> None:
        """prepareCandidate: each victim gets the DisruptionTarget condition, is deleted, and records a
        `Preempted` event; lower-priority pods nominated to the node lose their nomination; the preemptor
        is nominated to it."""
        meta = pod["metadata"]
        scheduler = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
        for victim in chosen.victims:
            vkey = pod_key(victim)
            condition = {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": preemption.PREEMPTED_REASON,
                "message": f"{scheduler}: preempting to accommodate a higher priority pod",
                "lastProbeTime": None,
                "lastTransitionTime": now_rfc3339(),
            }
            try:
                await self.client.patch(
                    "pods", vkey[1], {"status": {"conditions": [condition]}}, vkey[0],
                    patch_type="strategic", subresource="status",
                )  # fmt: skip
                await self.client.delete("pods", vkey[1], vkey[0])
            except ApiError as exc:
                if exc.code != 404:
                    raise
                continue  # gone already
            await self._event(
                victim, "Normal", "Preempted", f"Preempted by pod {meta.get('uid', '')} on node {chosen.node}"
            )
        own = preemption.priority(pod)
        for target, other in self._nominations():
            if target == chosen.node and preemption.priority(other) < own:
                await self._set_nominated(other, None)
        await self._set_nominated(pod, chosen.node)

    async def _set_nominated(self, pod: dict[str, Any], node: str | None) -> None:
        key = pod_key(pod)
        with contextlib.suppress(ApiError):
            await self.client.patch(
                "pods", key[1], {"status": {"nominatedNodeName": node}}, key[0],
                patch_type="merge", subresource="status",
            )  # fmt: skip

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
