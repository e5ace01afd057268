"""Node lifecycle: a node whose Lease stops being renewed turns Ready=Unknown and gets the unreachable taints.

As kube-controller-manager does with `--node-monitor-grace-period` (40 s by default): once the kubelet
renews its Lease and reports Ready again, the taints go away. Meanwhile its pods are marked not Ready
(MarkPodsNotReady, with a `NodeNotReady` event), and the taint eviction controller deletes those that do
not tolerate the NoExecute taint for longer: at once without a toleration, after `tolerationSeconds`
with one (300 s, which every pod gets from the DefaultTolerationSeconds admission plugin), never with
one that has no seconds (a DaemonSet's).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime
from typing import Any

from tenantgpu.controlplane.conditions import get_condition
from tenantgpu.controlplane.podstate import is_terminal
from tenantgpu.kubeclient import ApiError, Informer, KubeClient
from tenantgpu.kubeclient.client import now_rfc3339

log = logging.getLogger(__name__)

NODE_LEASE_NAMESPACE = "kube-node-lease"
UNREACHABLE_TAINT_KEY = "node.kubernetes.io/unreachable"
_EFFECTS = ("NoSchedule", "NoExecute")
EVICTION_COMPONENT = "taint-eviction-controller"
NODE_CONTROLLER = "node-controller"


def _tolerates(toleration: dict[str, Any], key: str, effect: str) -> bool:
    """kube's Toleration.ToleratesTaint for a taint of `key` with no value."""
    if toleration.get("effect") not in (None, "", effect):
        return False
    operator = toleration.get("operator") or "Equal"
    if toleration.get("key") in (None, ""):
        return operator == "Exists"
    return toleration.get("key") == key and (operator == "Exists" or toleration.get("value") in (None, ""))


def toleration_seconds(pod: dict[str, Any], key: str, effect: str = "NoExecute") -> float | None:
    """How long `pod` tolerates a taint of `key` and `effect`: 0 when it does not, None for ever. As the
    taint eviction controller's getMinTolerationTime: the shortest `tolerationSeconds` of the matching
    tolerations, and for ever only when none of them has one."""
    matching = [t for t in (pod.get("spec") or {}).get("tolerations") or [] if _tolerates(t, key, effect)]
    if not matching:
        return 0.0
    seconds = [float(t["tolerationSeconds"]) for t in matching if t.get("tolerationSeconds") is not None]
    if not seconds:
        return None
    return max(0.0, min(seconds))


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _ready_condition(node: dict[str, Any]) -> dict[str, Any] | None:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition
    return None


def has_unreachable_taints(node: dict[str, Any]) -> bool:
    return any(t.get("key") == UNREACHABLE_TAINT_KEY for t in (node.get("spec") or {}).get("taints") or [])


def last_heartbeat(node: dict[str, Any], lease: dict[str, Any] | None) -> datetime | None:
    """The newest sign of life: the Lease's renewTime, else the Ready condition's heartbeat."""
    times = []
    if lease is not None:
        times.append(_parse_time((lease.get("spec") or {}).get("renewTime")))
    ready = _ready_condition(node)
    if ready is not None:
        times.append(_parse_time(ready.get("lastHeartbeatTime")))
    known = [t for t in times if t is not None]
    return max(known) if known else None


class NodeLifecycleController:
    """Watches nodes and their Leases; marks silent nodes Unknown and taints them unreachable."""

    def __init__(
        self,
        client: KubeClient,
        *,
        grace_seconds: float = 40.0,
        monitor_seconds: float = 5.0,
        nodes: Informer | None = None,
        pods: Informer | None = None,
    ) -> None:
        self.client = client
        self.grace_seconds = grace_seconds
        self.monitor_seconds = monitor_seconds
        self.nodes = nodes or Informer(client, "nodes")
        self.pods = pods or Informer(client, "pods")
        self.leases = Informer(client, "leases", NODE_LEASE_NAMESPACE)
        self._task: asyncio.Task[None] | None = None
        self._evicted: set[str] = set()  # pod UIDs marked for deletion
        # Node name → uid of the nodes this controller has seen, in memory as kube's knownNodeSet: a
        # restarted controller registers every node again.
        self._known: dict[str, str] = {}

    async def start(self) -> None:
        await self.nodes.start()
        await self.pods.start()
        await self.leases.start()
        self._task = asyncio.create_task(self._loop(), name="node-lifecycle")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.leases.stop()
        await self.pods.stop()
        await self.nodes.stop()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.monitor_seconds)
            try:
                await self.check_nodes(datetime.now(UTC))
            except Exception:  # one failed pass must not end monitoring
                log.exception("node lifecycle pass failed")

    async def _record_node_event(self, name: str, uid: str, reason: str, message: str) -> None:
        """A Normal event on a node, referenced as kube's controller util does (apiVersion v1, its uid)."""
        reference = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}
        with contextlib.suppress(Exception):  # events are best effort
            await self.client.create_event(
                {}, reason=reason, message=message, component=NODE_CONTROLLER, reference=reference,
                decode=False,
            )  # fmt: skip

    async def _track_nodes(self, nodes: list[dict[str, Any]]) -> None:
        """kube's monitorNodeHealth: `RegisteredNode` for a node seen the first time, `RemovingNode`
        for one that is gone."""
        present = {node["metadata"]["name"]: str(node["metadata"].get("uid", "")) for node in nodes}
        for name, uid in present.items():
            if self._known.get(name) != uid:
                self._known[name] = uid
                await self._record_node_event(
                    name, uid, "RegisteredNode", f"Node {name} event: Registered Node {name} in Controller"
                )
        for name in [name for name in self._known if name not in present]:
            uid = self._known.pop(name)
            await self._record_node_event(
                name, uid, "RemovingNode", f"Node {name} event: Removing Node {name} from Controller"
            )

    async def check_nodes(self, now: datetime) -> None:
        nodes = self.nodes.items()
        await self._track_nodes(nodes)
        for node in nodes:
            name = node["metadata"]["name"]
            heartbeat = last_heartbeat(node, self.leases.get(NODE_LEASE_NAMESPACE, name))
            silent = heartbeat is None or (now - heartbeat).total_seconds() > self.grace_seconds
            ready = _ready_condition(node)
            try:
                if silent and (ready is None or ready.get("status") != "Unknown"):
                    await self._mark_unknown(node)
                    if ready is not None and ready.get("status") == "True":
                        # kube's RecordNodeStatusChange, when a Ready node stops being so
                        await self._record_node_event(
                            name, str(node["metadata"].get("uid", "")), "NodeNotReady",
                            f"Node {name} status is now: NodeNotReady",
                        )  # fmt: skip
                if silent and not has_unreachable_taints(node):
                    await self._set_taints(node, add=True)
                if not silent and has_unreachable_taints(node) and ready and ready.get("status") == "True":
                    await self._set_taints(node, add=False)
                if silent:
                    await self._handle_pods(node, now)
            except ApiError as exc:
                if exc.code not in (404, 409):  # gone, or changed under us: the next pass sees the new state
                    raise

    async def _handle_pods(self, node: dict[str, Any], now: datetime) -> None:
        """The pods of a silent node: not Ready any more, and evicted once they stop tolerating it."""
        name = node["metadata"]["name"]
        added = next(
            (
                _parse_time(t.get("timeAdded"))
                for t in (node.get("spec") or {}).get("taints") or []
                if t.get("key") == UNREACHABLE_TAINT_KEY and t.get("effect") == "NoExecute"
            ),
            None,
        )
        for pod in self.pods.items():
            if (pod.get("spec") or {}).get("nodeName") != name or is_terminal(pod):
                continue
            with contextlib.suppress(ApiError):
                await self._mark_not_ready(pod)
                if added is not None:
                    await self._evict_if_due(pod, (now - added).total_seconds())

    async def _patch_condition(self, pod: dict[str, Any], condition: dict[str, Any]) -> None:
        meta = pod["metadata"]
        await self.client.patch(
            "pods",
            meta["name"],
            {"status": {"conditions": [condition]}},
            meta["namespace"],
            patch_type="strategic",  # conditions merge by type
            subresource="status",
        )

    async def _mark_not_ready(self, pod: dict[str, Any]) -> None:
        ready = get_condition(pod.get("status") or {}, "Ready")
        if ready is None or ready.get("status") == "False" or pod["metadata"].get("deletionTimestamp"):
            return
        await self._patch_condition(pod, {**ready, "status": "False", "lastTransitionTime": now_rfc3339()})
        await self.client.create_event(
            pod, reason="NodeNotReady", message="Node is not ready", type="Warning", component=NODE_CONTROLLER
        )

    async def _evict_if_due(self, pod: dict[str, Any], tainted_for: float) -> None:
        meta = pod["metadata"]
        uid = meta.get("uid", "")
        if uid in self._evicted or meta.get("deletionTimestamp"):
            return
        tolerated = toleration_seconds(pod, UNREACHABLE_TAINT_KEY)
        if tolerated is None or tainted_for < tolerated:
            return
        self._evicted.add(uid)
        namespace, name = meta["namespace"], meta["name"]
        await self.client.create_event(
            pod,
            reason="TaintManagerEviction",
            message=f"Marking for deletion Pod {namespace}/{name}",
            component=EVICTION_COMPONENT,
        )
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint",
            "lastTransitionTime": now_rfc3339(),
        }
        await self._patch_condition(pod, condition)
        await self.client.delete("pods", name, namespace)

    async def _mark_unknown(self, node: dict[str, Any]) -> None:
        now = now_rfc3339()
        conditions = []
        for condition in (node.get("status") or {}).get("conditions") or []:
            if condition.get("status") == "Unknown":
                continue
            conditions.append(
                {
                    "type": condition.get("type"),
                    "status": "Unknown",
                    "reason": "NodeStatusUnknown",
                    "message": "Kubelet stopped posting node status.",
                    "lastTransitionTime": now,
                }
            )
        if not conditions:
            conditions.append(
                {
                    "type": "Ready",
                    "status": "Unknown",
                    "reason": "NodeStatusNeverUpdated",
                    "message": "Kubelet never posted node status.",
                    "lastTransitionTime": now,
                }
            )
        await self.client.patch(
            "nodes",
            node["metadata"]["name"],
            {"status": {"conditions": conditions}},
            patch_type="strategic",
            subresource="status",
        )

    async def _set_taints(self, node: dict[str, Any], *, add: bool) -> None:
        taints = [
            t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != UNREACHABLE_TAINT_KEY
        ]
        if add:
            now = now_rfc3339()
            taints += [{"key": UNREACHABLE_TAINT_KEY, "effect": e, "timeAdded": now} for e in _EFFECTS]
        patch = {
            "metadata": {"resourceVersion": node["metadata"].get("resourceVersion")},
            "spec": {"taints": taints or None},
        }
        await self.client.patch("nodes", node["metadata"]["name"], patch)
