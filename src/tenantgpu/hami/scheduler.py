"""HAMi's scheduler on the wire: watches pending pods, filters and scores with gpushare, locks, binds.

It plays both parts of HAMi's scheduler pod — the kube-scheduler profile `hami-scheduler` and the
vGPU extender — for pods whose `schedulerName` is `hami-scheduler`. For each pod: `ClusterState.schedule`
(gpushare's filter and scores), then HAMi's Bind: take the node lock (`hami.io/mutex.lock`), patch the
filter annotations (`hami.io/vgpu-node`, `-time`, `-devices-to-allocate`, `-devices-allocated`) together
with `bind-phase: allocating` and `bind-time` (one patch for HAMi's two, sent while the lock is being
taken, as HAMi too writes the filter annotations before locking), then POST the Binding.

Throughput: a node stays locked from Bind until the device plugin's Allocate. When a pod's best node is
locked, the pod is decided again among the unlocked nodes (`pipeline_locked_nodes`, default on; HAMi
itself would fail the bind and retry the same node); if none fits, it waits for that node's lock to be
released — seen on the node watch, not after a fixed sleep — while other pods keep flowing.

Unschedulable pods are retried when capacity may have changed (a pod ended or was
deleted, a node or quota changed), on a periodic flush, and with backoff after bind errors; nothing is
kept that the API does not hold, so a restarted scheduler rebuilds it all by list + watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tenantgpu import eager
from tenantgpu.apiserver.sharing import share_workload_object
from tenantgpu.gpushare import ClusterState, ContainerDevice, Decision, SharingConfig, volumes
from tenantgpu.gpushare import annotations as ann
from tenantgpu.gpushare.policy import node_policy_of, spreads
from tenantgpu.gpushare.reasons import fit_error, prefilter_error
from tenantgpu.gpushare.request import init_container_count
from tenantgpu.hami import events
from tenantgpu.hami.install import NAMESPACE as HAMI_NAMESPACE
from tenantgpu.hami.install import SCHEDULER as HAMI_SCHEDULER
from tenantgpu.hami.install import SCHEDULER_FOLLOWER, SCHEDULER_LEADER, SCHEDULER_ROLE_LABEL
from tenantgpu.hami.metrics import scheduler_registry
from tenantgpu.hami.metricsendpoint import MetricsEndpoint
from tenantgpu.hami.nodelock import NODE_LOCK, LockVerdict, NodeLockError, NodeLocks, judge_lock
from tenantgpu.klog import ComponentLog, kobj
from tenantgpu.kubeclient import ApiError, Informer, KubeClient
from tenantgpu.kubeclient.eventsink import EventBroadcaster

log = logging.getLogger(__name__)

Key = tuple[str, str]
_TERMINAL = ("Succeeded", "Failed")
_MAX_BACKOFF = 10.0  # kube-scheduler's podMaxBackoffSeconds
_ANY_NODE = ""  # where pods wait that found every node locked: for whichever node frees first


def _key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "default", meta.get("name", "")


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


@dataclass
class _InFlight:
    """A node we locked for a pod, until the node watch shows the lock gone again."""

    pod: Key
    since: float
    seen: bool = False


class _WorkQueue:
    """A deduplicating FIFO of pod keys; `push_front` lets a pod waiting for a lock go first."""

    def __init__(self) -> None:
        self._items: deque[Key] = deque()
        self._members: set[Key] = set()
        self._ready = asyncio.Event()

    def push(self, key: Key, *, front: bool = False) -> None:
        if key in self._members:
            return
        self._members.add(key)
        if front:
            self._items.appendleft(key)
        else:
            self._items.append(key)
        self._ready.set()

    def pop_nowait(self) -> Key | None:
        if not self._items:
            return None
        key = self._items.popleft()
        self._members.discard(key)
        return key

    async def pop(self) -> Key:
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        key = self._items.popleft()
        self._members.discard(key)
        return key

    def __len__(self) -> int:
        return len(self._items)


class HamiScheduler:
    """One tenant's HAMi scheduler; `await start()` returns once its caches are synced and it is running."""

    def __init__(
        self,
        client: KubeClient,
        sharing: SharingConfig | None = None,
        *,
        scheduler_name: str | None = None,
        metrics_host: str = "127.0.0.1",
        metrics_port: int | None = None,
        flush_seconds: float = 30.0,
        pipeline_locked_nodes: bool = True,
        klog: ComponentLog | None = None,
    ) -> None:
        self.client = client
        # what the extender's container would print (`kubectl logs … -c vgpu-scheduler-extender`)
        self.klog = klog or ComponentLog()
        self._logged_nodes: set[str] = set()
        self.cfg = sharing or SharingConfig()
        self.scheduler_name = scheduler_name or self.cfg.scheduler_name
        self.state = ClusterState(self.cfg)
        self.lock_timeout = timedelta(seconds=self.cfg.node_lock_timeout_seconds)
        self.locks = NodeLocks(client, self.lock_timeout)
        # The scheduler pod's two recorders: HAMi's extender (Filtering*, Binding*) and kube-scheduler's
        # (Scheduled, FailedScheduling), each writing its events in order from a queue of its own.
        self.hami_events = EventBroadcaster(client, events.COMPONENT)
        self.scheduler_events = EventBroadcaster(client, events.COMPONENT)
        self.nodes = Informer(client, "nodes")
        # the system pods of every tenant it serves repeat the same specs: one instance of equal parts
        self.pods = Informer(client, "pods", transform=share_workload_object)
        self.quotas = Informer(client, "resourcequotas")
        self.nodes.add_handler(self._on_node)
        self.pods.add_handler(self._on_pod)
        self.quotas.add_handler(self._on_quota)
        self.flush_seconds = flush_seconds
        self.bind_timeout_seconds = 600.0  # VolumeBinding's bindTimeoutSeconds
        self.pipeline_locked_nodes = pipeline_locked_nodes
        self.metrics_host, self.metrics_port = metrics_host, metrics_port
        self.registry = scheduler_registry(lambda: self.state, self._placed_pods, self.quotas.items)
        self._queue = _WorkQueue()
        self._unschedulable: set[Key] = set()
        self._last_failure: dict[Key, str] = {}
        self._waiting: dict[str, dict[Key, None]] = {}  # node → pods (FIFO) whose best node is locked
        self._parked: dict[Key, int] = {}  # when each waiting pod was parked: a freed node wakes the oldest
        self._parkings = 0
        self._assumed: dict[Key, dict[str, Any]] = {}  # pods with a bind in flight, as we will write them
        self._inflight: dict[str, _InFlight] = {}
        self._attempts: dict[Key, int] = {}
        # VolumeBinding's verdict on a pod's claims, and the volumes a delayed claim may take, fetched for
        # the pod's next decision
        self._claim_verdicts: dict[Key, tuple[volumes.ClaimVerdict, list[dict[str, Any]]]] = {}
        self._prebinding: set[Key] = set()  # pods whose claims are being bound for a node
        self._handshaking: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._metrics: MetricsEndpoint | None = None
        self.bound = 0

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Rebuild everything from the API (also when this instance was stopped before) and run."""
        self.state = ClusterState(self.cfg)
        self.state.load_fast_path()
        self._queue = _WorkQueue()
        for book in (self._unschedulable, self._last_failure, self._waiting, self._assumed, self._inflight):
            book.clear()
        self._parked.clear()
        self._attempts.clear()
        self._claim_verdicts.clear()
        self._prebinding.clear()
        self._handshaking.clear()
        self._logged_nodes.clear()
        self.klog.info("scheduler.go:85", "Initializing HAMi scheduler")
        self.klog.info("scheduler.go:356", "Starting HAMi scheduler components")
        await self.nodes.start()
        await self.quotas.start()
        await self.pods.start()
        self.klog.started()  # with the nodes it found at its start
        self._loops = [
            asyncio.create_task(self._schedule_loop(), name="hami-scheduler"),
            asyncio.create_task(self._flush_loop(), name="hami-scheduler-flush"),
        ]
        if self.metrics_port is not None:
            await self._start_metrics()

    async def stop(self) -> None:
        for task in [*self._loops, *self._tasks]:
            task.cancel()
        for task in [*self._loops, *self._tasks]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._loops, self._tasks = [], set()
        for recorder in (self.hami_events, self.scheduler_events):
            await recorder.close()
        for informer in (self.pods, self.nodes, self.quotas):
            await informer.stop()
        if self._metrics is not None:
            await self._metrics.stop()

    async def _start_metrics(self) -> None:
        if self._metrics is None:
            assert self.metrics_port is not None
            self._metrics = MetricsEndpoint(self.registry, self.metrics_host, self.metrics_port)
        await self._metrics.start()
        self.metrics_port = self._metrics.port

    def _placed_pods(self) -> list[dict[str, Any]]:
        return [
            p
            for p in self.pods.items()
            if _annotations(p).get(ann.VGPU_NODE) and (p.get("status") or {}).get("phase") not in _TERMINAL
        ]

    def _spawn(self, coro: Any) -> None:
        # started at once: a bind's first requests go out in this loop turn, not the next
        task = eager.start(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- watch handlers -----------------------------------------------------------------------

    def _ours(self, pod: dict[str, Any]) -> bool:
        spec = pod.get("spec") or {}
        return (
            spec.get("schedulerName") == self.scheduler_name
            and not spec.get("nodeName")
            and not (pod.get("metadata") or {}).get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
        )

    def _on_pod(self, kind: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = _key(pod)
        if kind == "DELETED":
            self.state.remove_pod(*key)
            self._assumed.pop(key, None)
            self._forget(key)
            self._requeue_unschedulable()
            return
        assumed = self._assumed.get(key)
        if assumed is not None:
            if (pod.get("spec") or {}).get("nodeName") == assumed["spec"]["nodeName"]:
                self._assumed.pop(key, None)  # the API now shows the binding we assumed
            else:
                return  # an older view of the pod must not undo our reservation
        self.state.upsert_pod(pod)
        if _is_scheduler_pod(pod):
            self._spawn(self._label_roles())
        phase = (pod.get("status") or {}).get("phase")
        old_phase = ((old or {}).get("status") or {}).get("phase")
        if phase in _TERMINAL and old_phase not in _TERMINAL:
            self._forget(key)
            self._requeue_unschedulable()
        if self._ours(pod) and key not in self._unschedulable:
            self._queue.push(key)

    async def _label_roles(self) -> None:
        """HAMi's `updateSchedulerLabel`: the leader's pod is labelled `hami.io/scheduler-role: leader`,
        the other replicas' `follower`, so that the Service reaches the leader. The lab's one scheduler
        stands for the Deployment's oldest pod."""
        pods = sorted(
            (
                p
                for p in self.pods.items()
                if _is_scheduler_pod(p) and not p["metadata"].get("deletionTimestamp")
            ),
            key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"].get("name", "")),
        )
        for i, pod in enumerate(pods):
            role = SCHEDULER_LEADER if i == 0 else SCHEDULER_FOLLOWER
            meta = pod["metadata"]
            if (meta.get("labels") or {}).get(SCHEDULER_ROLE_LABEL) == role:
                continue
            with contextlib.suppress(ApiError):  # gone meanwhile, or labelled at the next event
                await self.client.patch(
                    "pods",
                    meta["name"],
                    {"metadata": {"labels": {SCHEDULER_ROLE_LABEL: role}}},
                    meta["namespace"],
                )

    def _forget(self, key: Key) -> None:
        self._unschedulable.discard(key)
        self._last_failure.pop(key, None)
        self._attempts.pop(key, None)
        self._claim_verdicts.pop(key, None)
        for node, flight in list(self._inflight.items()):
            if flight.pod == key:
                self._release_inflight(node)

    def _on_node(self, kind: str, node: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = (node.get("metadata") or {}).get("name", "")
        if kind == "DELETED":
            self.state.remove_node(name)
            self._release_inflight(name)
            return
        self.state.upsert_node(node)
        if name not in self._logged_nodes and ann.NODE_REGISTER in _annotations(node):
            self._log_node(name)
        handshake = _annotations(node).get(ann.NODE_HANDSHAKE) or ""
        if (
            ann.NODE_REGISTER in _annotations(node)
            and not handshake.startswith("Requesting_")
            and name not in self._handshaking
        ):
            self._handshaking.add(name)
            self._spawn(self._handshake(name))
        lock = _annotations(node).get(NODE_LOCK)
        flight = self._inflight.get(name)
        if flight is not None:
            owner = f",{flight.pod[0]},{flight.pod[1]}"
            if lock is not None and lock.endswith(owner):
                flight.seen = True
            elif flight.seen and self._release_inflight(name):
                self._schedule_woken()
        elif lock is None and self._wake(name):
            self._schedule_woken()
        if kind == "ADDED" or _capacity_view(node) != _capacity_view(old or {}):
            self._requeue_unschedulable()

    def _log_node(self, name: str) -> None:
        """HAMi's line for a node whose devices it learns (scheduler.go), once per node it caches."""
        self._logged_nodes.add(name)
        cards = " ".join(d.id for d in self.state.node_devices(name))
        info = f"&{{ID:{name} Devices:[{cards}]}}"
        self.klog.info(
            "scheduler.go:541", "Node device added", nodeName=name, deviceVendor="NVIDIA", nodeInfo=info
        )

    async def _handshake(self, node: str) -> None:
        """HAMi v2.10's register loop stamps `hami.io/node-handshake: Requesting_<time>` on GPU nodes."""
        stamp = datetime.now(UTC).strftime("Requesting_%Y-%m-%d %H:%M:%S")
        try:
            await self.client.patch("nodes", node, {"metadata": {"annotations": {ann.NODE_HANDSHAKE: stamp}}})
        except ApiError as err:
            log.debug("hami-scheduler: handshake on %s: %s", node, err)
        finally:
            self._handshaking.discard(node)

    def _on_quota(self, kind: str, quota: dict[str, Any], old: dict[str, Any] | None) -> None:
        if kind == "DELETED":
            self.state.remove_quota(*_key(quota))
        else:
            self.state.upsert_quota(quota)
        self._requeue_unschedulable()

    def _release_inflight(self, node: str) -> bool:
        """The node's bind is over: let the next pod waiting for it retry; whether one was woken."""
        self._inflight.pop(node, None)
        return self._wake(node)

    def _wake(self, node: str, *, everyone: bool = False) -> bool:
        """Let the longest-waiting pod for `node` retry (all of them with `everyone`): of those parked on
        it and those that found every node locked, whichever was parked first. Whether one was woken.

        One at a time: the first one re-locks the node, and re-deciding the others would be wasted work.
        """
        if everyone:
            woken = self._waiting.pop(node, {})
            for key in woken:
                self._parked.pop(key, None)
                self._queue.push(key, front=True)
            return bool(woken)
        oldest: tuple[int, Key, str] | None = None
        for source in dict.fromkeys((node, _ANY_NODE)):
            waiting = self._waiting.get(source)
            if waiting:
                key = next(iter(waiting))
                candidate = (self._parked.get(key, 0), key, source)
                oldest = candidate if oldest is None or candidate < oldest else oldest
        if oldest is None:
            return False
        _, key, source = oldest
        waiting = self._waiting[source]
        del waiting[key]
        if not waiting:
            del self._waiting[source]
        self._parked.pop(key, None)
        self._queue.push(key, front=True)
        return True

    def _schedule_woken(self) -> None:
        """Decide the pod at the queue's front now, in the loop turn that saw its node free, rather than
        in the schedule loop's next turn: under load a turn takes milliseconds, and each node's lock
        cycle waits for this decision."""
        key = self._queue.pop_nowait()
        if key is not None:
            self._schedule_logged(key)

    def _schedule_logged(self, key: Key) -> None:
        """`_schedule_one`, whose bug leaves the pod Pending and logged rather than the loop stopped."""
        try:
            self._schedule_one(key)
        except Exception:
            log.exception("hami-scheduler: scheduling %s/%s", *key)

    def _park(self, node: str, key: Key) -> None:
        self._parkings += 1
        self._parked[key] = self._parkings
        self._waiting.setdefault(node, {})[key] = None

    def _node_free(self, node: str) -> bool:
        if node == _ANY_NODE:
            return any(self._node_free(n) for n in self.state.node_names)
        return node not in self._inflight and NODE_LOCK not in _annotations(self.nodes.get(None, node) or {})

    def _every_node_locked_for(self, pod: dict[str, Any], key: Key) -> bool:
        """Whether a bind of this pod would meet a lock on every node: deciding now could only park it."""
        names = self.state.node_names
        return bool(names) and all(self._node_locked_for(n, key) for n in names) and self._takes_lock(pod)

    def _requeue_unschedulable(self) -> None:
        for key in list(self._unschedulable):
            self._queue.push(key)
        self._unschedulable.clear()

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(self.flush_seconds)
            self._requeue_unschedulable()
            now = time.monotonic()
            for node, flight in list(self._inflight.items()):
                if now - flight.since > self.lock_timeout.total_seconds():
                    self._release_inflight(node)
            for node in list(self._waiting):
                self._wake(node, everyone=True)  # locks also end by expiry or a vanished holder

    # --- scheduling ---------------------------------------------------------------------------

    def _takes_lock(self, pod: dict[str, Any]) -> bool:
        """NVIDIA LockNode looks at app containers only: a pod whose GPUs are all in init containers
        binds without the node lock (and so does not wait for it)."""
        return any(self.state.pod_requests(pod)[init_container_count(pod) :])

    def _node_locked_for(self, node_name: str, key: Key) -> bool:
        """Whether Bind to this node would meet a lock it may not break (so the pod should wait)."""
        flight = self._inflight.get(node_name)
        if flight is not None and flight.pod != key:
            return True
        node = self.nodes.get(None, node_name)
        value = _annotations(node or {}).get(NODE_LOCK)
        if value is None:
            return False
        try:
            verdict, holder = judge_lock(value, key[0], key[1], datetime.now(UTC), self.lock_timeout)
        except ValueError:
            return True
        if verdict is LockVerdict.HOLDER_CHECK and holder is not None:
            return self.pods.get(holder.namespace, holder.pod) is not None
        return verdict is LockVerdict.CONTENDED

    async def _schedule_loop(self) -> None:
        while True:
            self._schedule_logged(await self._queue.pop())
            for node in [n for n in self._waiting if self._node_free(n)]:
                self._wake(node)  # the woken pod went elsewhere: the next one may take the node
            await asyncio.sleep(0)  # let watch events in between decisions

    def _decide(self, pod: dict[str, Any]) -> Decision:
        if not self.state.node_names:
            return Decision(None, reason="no nodes available to schedule pods")
        try:
            return self.state.schedule(pod)
        except Exception as err:  # a decision bug must leave the pod Pending and retried, never lost
            log.exception("hami-scheduler: deciding %s", (pod.get("metadata") or {}).get("name"))
            return Decision(None, reason=f"scheduling error: {err}")

    def _schedule_one(self, key: Key) -> None:
        pod = self.pods.get(*key)
        if pod is None or not self._ours(pod) or key in self._assumed or key in self._prebinding:
            return
        if self.pipeline_locked_nodes and self._every_node_locked_for(pod, key):
            # The decision would either park the pod or refuse it; both wait for the first node
            # to free, when it is decided on what the cluster then holds.
            self._park(_ANY_NODE, key)
            return
        conflicting: list[str] = []
        verdict: volumes.ClaimVerdict | None = None
        free_volumes: list[dict[str, Any]] = []
        if volumes.pod_claim_names(pod):
            # kube-scheduler's VolumeBinding runs before HAMi's extender is asked (on claims fetched
            # for this attempt: the scheduler keeps no watch on claims for the pods that have none)
            fetched = self._claim_verdicts.pop(key, None)
            if fetched is None:
                self._spawn(self._fetch_claims(pod))
                return
            verdict, free_volumes = fetched
            refusal = self._volume_refusal(pod, verdict, free_volumes)
            if isinstance(refusal, str):
                self._spawn(self._report_message(pod, refusal))
                self._retry_later(key)  # a claim bound or created does not reach this scheduler's watches
                return
            conflicting = refusal
        decision = self._decide(_excluding(pod, conflicting) if conflicting else pod)
        if decision.requests_gpu:
            # kube-scheduler asks HAMi's extender only about pods with HAMi's resources
            meta = pod.get("metadata") or {}
            self.klog.info(
                "scheduler.go:1068",
                "Starting schedule filter process",
                pod=key[1],
                uuid=meta.get("uid", ""),
                namespace=key[0],
            )
        if decision.node is None:
            self._unschedulable.add(key)
            self._spawn(self._report_unschedulable(pod, decision))
            return
        node = decision.node
        if verdict is not None and verdict.needs_binding:
            # PreBind first, without the node lock: the claims are bound for this node (a volume there,
            # or the node given to the provisioner), and the pod is decided again once they are, its
            # bound volumes then keeping it to the node
            plan = volumes.bindings_for_node(verdict, self.nodes.get(None, node) or {}, free_volumes) or []
            self._prebinding.add(key)
            self._spawn(self._prebind(pod, node, plan))
            return
        takes_lock = decision.requests_gpu and self._takes_lock(pod)
        if takes_lock and self._node_locked_for(node, key):
            alternative = None
            if self.pipeline_locked_nodes:
                names = self.state.node_names
                locked = [n for n in names if self._node_locked_for(n, key)]
                # with every node locked the pod could only be refused: no need to decide that again
                if len(locked) < len(names):
                    alternative = self.state.schedule(_excluding(pod, [*locked, *conflicting]))
            if alternative is None or alternative.node is None:
                self._park(node, key)
                return
            decision, node = alternative, alternative.node
        now = int(time.time())
        patch_annotations: dict[str, str] = {}
        if decision.requests_gpu:
            self.klog.info(
                "scheduler.go:1119",
                "Scheduling pod to node",
                podNamespace=key[0],
                podName=key[1],
                nodeID=node,
                devices=_go_pod_devices(decision.devices),
            )
            patch_annotations = decision.scheduled_annotations(now)
            patch_annotations[ann.BIND_PHASE] = ann.BIND_PHASE_ALLOCATING
            patch_annotations[ann.BIND_TIME] = str(now)
            if takes_lock:
                self._inflight[node] = _InFlight(key, time.monotonic())
        assumed = _assume(pod, node, patch_annotations)
        self.state.upsert_pod(assumed)
        self._assumed[key] = assumed
        self._spawn(self._bind(pod, decision, patch_annotations, takes_lock))

    async def _prebind(self, pod: dict[str, Any], node: str, plan: list[volumes.ClaimBinding]) -> None:
        """kube-scheduler's VolumeBinding PreBind, which runs before the extender's Bind: each delayed
        claim is bound to its chosen volume or given the node for its provisioner, then awaited; the pod
        is then decided again (on a failure, FailedScheduling says why and it is retried later)."""
        key = _key(pod)
        try:
            await self._bind_claims(pod, node, plan)
        except (ApiError, TimeoutError, OSError) as err:
            if isinstance(err, ApiError) and err.code == 404:
                return
            detail = err.message if isinstance(err, ApiError) else str(err)
            await self._report_message(
                pod, f'running PreBind plugin "VolumeBinding": binding volumes: {detail}'
            )
            self._retry_later(key)
            return
        finally:
            self._prebinding.discard(key)
        self._queue.push(key)

    async def _bind_claims(self, pod: dict[str, Any], node: str, plan: list[volumes.ClaimBinding]) -> None:
        namespace = pod["metadata"].get("namespace") or ""
        for write in volumes.prebind_patches(plan, node):
            await self.client.patch(write.resource, write.name, write.patch, write.namespace)
        deadline = time.monotonic() + self.bind_timeout_seconds
        names = volumes.pod_claim_names(pod)
        while True:
            claims = [await self.client.get_if_found("persistentvolumeclaims", n, namespace) for n in names]
            if volumes.all_bound(claims):
                return
            if time.monotonic() > deadline:
                raise TimeoutError("timed out waiting for the condition")
            await asyncio.sleep(0.1)

    async def _bind(
        self, pod: dict[str, Any], decision: Decision, annotations: dict[str, str], takes_lock: bool
    ) -> None:
        key = _key(pod)
        ns, name = key
        node = decision.node or ""
        locked = False
        locking: asyncio.Future[None] | None = None
        if decision.requests_gpu:
            self.klog.info(
                "scheduler.go:999", "Attempting to bind pod to node", pod=name, namespace=ns, node=node
            )
            self.klog.info(
                "scheduler.go:1020",
                "Trying to get the target node for pod",
                pod=name,
                namespace=ns,
                node=node,
            )
        try:
            if decision.requests_gpu:
                # HAMi writes the filter annotations before it locks, so both may go out together. The
                # patch is awaited here, not through a task and a gather, each of which would cost the
                # Binding one more loop turn; the lock's task has mostly finished by then.
                patch = {"metadata": {"annotations": annotations, "labels": {ann.VGPU_NODE: node}}}
                if takes_lock:
                    locking = eager.start(self.locks.lock(node, ns, name, node=self.nodes.get(None, node)))
                patch_error: Exception | None = None
                try:
                    await self.client.patch("pods", name, patch, ns, decode=False)
                except Exception as err:
                    patch_error = err
                if locking is not None:
                    await locking  # its error (the lock is held by another pod) is the one reported
                    locked = True
                if patch_error is not None:
                    raise patch_error
            await self.client.create_binding(ns, name, node, pod_uid=(pod.get("metadata") or {}).get("uid"))
        except asyncio.CancelledError:
            # The scheduler is stopping: the lock's own steps stop with the bind, not after it.
            if locking is not None:
                locking.cancel()
            raise
        except NodeLockError as err:
            self.klog.error("scheduler.go:1048", err, "Failed to lock node", node=node, pod=kobj(ns, name))
            self._undo(key, node)
            self._park(node, key)
            events.emit(self.hami_events, pod, events.BINDING_FAILED, str(err), warning=True)
            return
        except Exception as err:
            self._undo(key, node)
            if locked:
                with contextlib.suppress(Exception):
                    await self.locks.release(node, ns, name)
            if decision.requests_gpu:
                self.klog.error(
                    "scheduler.go:1058", err, "Failed to bind pod", pod=name, namespace=ns, node=node
                )
            if isinstance(err, ApiError) and err.code == 404:
                return  # the pod is gone
            events.emit(self.hami_events, pod, events.BINDING_FAILED, str(err), warning=True)
            self._retry_later(key)
            return
        self.bound += 1
        if decision.requests_gpu:
            self.klog.info(
                "scheduler.go:1063", "Successfully bound pod to node", pod=name, namespace=ns, node=node
            )
        self._attempts.pop(key, None)
        self._last_failure.pop(key, None)
        if decision.requests_gpu:
            total = len(self.state.node_names)
            events.emit(
                self.hami_events,
                pod,
                events.FILTERING_SUCCEED,
                events.filtering_succeed_message(
                    total, decision, spread=spreads(node_policy_of(pod, self.state.cfg))
                ),
            )
        events.emit(self.scheduler_events, pod, events.SCHEDULED, events.scheduled_message(node, ns, name))
        if decision.requests_gpu:
            events.emit(
                self.hami_events, pod, events.BINDING_SUCCEED, events.binding_succeed_message(node, ns, name)
            )

    def _undo(self, key: Key, node: str) -> None:
        """Drop a reservation whose bind did not happen; the cached API view counts again."""
        self._assumed.pop(key, None)
        current = self.pods.get(*key)
        if current is not None:
            self.state.upsert_pod(current)
        else:
            self.state.remove_pod(*key)
        flight = self._inflight.get(node)
        if flight is not None and flight.pod == key:
            self._inflight.pop(node, None)

    def _retry_later(self, key: Key) -> None:
        attempt = self._attempts.get(key, 0)
        self._attempts[key] = attempt + 1
        delay = min(_MAX_BACKOFF, 1.0 * 2**attempt)

        async def later() -> None:
            await asyncio.sleep(delay)
            self._queue.push(key)

        self._spawn(later())

    async def _fetch_claims(self, pod: dict[str, Any]) -> None:
        """The pod's claims, the volumes they are bound to and their classes, for VolumeBinding's verdict;
        the pod is then decided again."""
        key = _key(pod)
        try:
            claims = {
                name: await self.client.get_if_found("persistentvolumeclaims", name, key[0])
                for name in volumes.pod_claim_names(pod)
            }
            bound: dict[str, dict[str, Any] | None] = {}
            classes: dict[str, dict[str, Any] | None] = {}
            for claim in claims.values():
                if claim is None:
                    continue
                if (name := (claim.get("spec") or {}).get("volumeName")) and name not in bound:
                    bound[name] = await self.client.get_if_found("persistentvolumes", name)
                if (name := volumes.claim_class(claim)) and name not in classes:
                    classes[name] = await self.client.get_if_found("storageclasses", name)
        except Exception as err:
            log.info("hami-scheduler: reading the claims of %s/%s: %s", *key, err)
            self._retry_later(key)
            return
        verdict = volumes.judge_claims(pod, claims, bound, classes)
        listed: list[dict[str, Any]] = []
        if verdict.needs_binding:
            try:
                listed = (await self.client.list("persistentvolumes"))["items"]
            except Exception as err:
                log.info("hami-scheduler: listing volumes for %s/%s: %s", *key, err)
                self._retry_later(key)
                return
        if self.pods.get(*key) is None:
            return  # deleted while its claims were read: nothing to keep for it
        self._claim_verdicts[key] = (verdict, listed)
        self._queue.push(key)

    def _volume_refusal(
        self, pod: dict[str, Any], verdict: volumes.ClaimVerdict, free_volumes: list[dict[str, Any]]
    ) -> str | list[str]:
        """kube-scheduler's message when the claims rule the pod out (PreFilter, or no node fits the
        bound volumes), else the nodes the bound volumes rule out."""
        total = len(self.state.node_names)
        policy = (pod.get("spec") or {}).get("preemptionPolicy") or ""
        if verdict.refusal is not None:
            if not total:
                return "no nodes available to schedule pods"
            return prefilter_error(total, verdict.refusal, preemption_policy=policy)
        reasons = {
            name: reason
            for name in self.state.node_names
            if (reason := volumes.node_reason(verdict, self.nodes.get(None, name) or {}, free_volumes))
            is not None
        }
        if reasons and len(reasons) == total:
            return fit_error(total, reasons, preemption_policy=policy)
        return sorted(reasons)

    async def _report_unschedulable(self, pod: dict[str, Any], decision: Decision) -> None:
        """Events and PodScheduled=False, once per distinct reason (retries stay quiet)."""
        total = len(self.state.node_names)
        policy = (pod.get("spec") or {}).get("preemptionPolicy") or ""
        message = events.unschedulable_message(total, decision, preemption_policy=policy)
        filtering = events.filtering_failed_messages(decision) if decision.requests_gpu else []
        await self._report_message(pod, message, filtering)

    async def _report_message(
        self, pod: dict[str, Any], message: str, filtering: list[str] | None = None
    ) -> None:
        key = _key(pod)
        if self._last_failure.get(key) == message:
            return
        self._last_failure[key] = message
        for text in filtering or ():
            events.emit(self.hami_events, pod, events.FILTERING_FAILED, text, warning=True)
        events.emit(self.scheduler_events, pod, events.FAILED_SCHEDULING, message, warning=True)
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        with contextlib.suppress(ApiError):
            await self.client.patch(
                "pods", key[1], {"status": {"conditions": [condition]}}, key[0], subresource="status"
            )


def _go_pod_devices(devices: list[list[ContainerDevice]]) -> str:
    """Go's `%v` of HAMi's PodDevices (vendor → one list of cards per container), as its log prints it."""
    containers = " ".join(
        "[" + " ".join(f"{{0 {d.uuid} {d.type} {d.usedmem} {d.usedcores} 0 map[]}}" for d in cards) + "]"
        for cards in devices
    )
    return f"map[NVIDIA:[{containers}]]"


def _assume(pod: dict[str, Any], node: str, annotations: dict[str, str]) -> dict[str, Any]:
    """The pod as the bind will leave it: bound to `node`, with `annotations` added.

    Only the changed levels are copied; the rest is shared with the informer's object, which nobody
    mutates (the informer replaces objects, it does not edit them).
    """
    meta = pod.get("metadata") or {}
    assumed = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node}}
    if annotations:
        assumed["metadata"] = {**meta, "annotations": {**(meta.get("annotations") or {}), **annotations}}
    return assumed


def _excluding(pod: dict[str, Any], nodes: list[str]) -> dict[str, Any]:
    """A copy of the pod that may not land on `nodes` (a required node affinity on metadata.name).

    Copied along the path that changes only; scheduling reads the pod and never mutates it.
    """
    clone = dict(pod)
    spec = clone["spec"] = dict(pod.get("spec") or {})
    affinity = spec["affinity"] = dict(spec.get("affinity") or {})
    node_affinity = affinity["nodeAffinity"] = dict(affinity.get("nodeAffinity") or {})
    required_key = "requiredDuringSchedulingIgnoredDuringExecution"
    required = node_affinity[required_key] = dict(node_affinity.get(required_key) or {})
    terms = required.get("nodeSelectorTerms") or [{}]
    expression = {"key": "metadata.name", "operator": "NotIn", "values": list(nodes)}
    required["nodeSelectorTerms"] = [
        {**t, "matchFields": [*(t.get("matchFields") or []), expression]} for t in terms
    ]
    return clone


def _capacity_view(node: dict[str, Any]) -> tuple[Any, ...]:
    """What of a node can change whether a pod fits (not heartbeats, not the lock)."""
    a = _annotations(node)
    status = node.get("status") or {}
    # the values themselves: tuples compare them by value, without formatting them first
    return (
        a.get(ann.NODE_REGISTER),
        a.get(ann.DEVICE_CORDON),
        status.get("allocatable"),
        node.get("spec"),
        (node.get("metadata") or {}).get("labels"),
    )


def _is_scheduler_pod(pod: dict[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    return (
        meta.get("namespace") == HAMI_NAMESPACE
        and (meta.get("labels") or {}).get("app.kubernetes.io/component") == HAMI_SCHEDULER
    )
