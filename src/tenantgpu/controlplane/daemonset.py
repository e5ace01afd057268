"""The DaemonSet controller of kube-controller-manager: one pod of the template on each node that should
run it.

A node should run the daemon pod when the pod, with the tolerations kube adds to every daemon pod
(not-ready, unreachable, disk/memory/pid pressure, unschedulable), tolerates its taints and matches its
nodeSelector and node affinity. Each pod is pinned to its node by a required node affinity on
`metadata.name` and placed by its scheduler, as since Kubernetes 1.12 (a GPU daemon pod goes through
HAMi like any other). Each template is recorded in a ControllerRevision `<daemonset>-<hash>`, whose
hash labels the pods (`controller-revision-hash`), so `kubectl rollout history/undo ds` work.
RollingUpdate replaces old pods node by node within `maxUnavailable` (or, with `maxSurge`, starts the
new pod beside the old one first); OnDelete replaces a pod only when it is deleted. A failed daemon pod
is deleted and replaced. The status counts as kube's does.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable
from typing import Any

from tenantgpu.controlplane.deployment import resolve
from tenantgpu.controlplane.history import REVISION_HASH, History
from tenantgpu.controlplane.owners import controller_of, owned_by, pod_from_template
from tenantgpu.controlplane.podstate import is_ready, is_terminal
from tenantgpu.controlplane.workqueue import Expectations, Key, WorkQueue, object_key, observe_event
from tenantgpu.gpushare.basics import static_reason
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

COMPONENT = "daemonset-controller"
TEMPLATE_GENERATION = "pod-template-generation"
# Where apps/v1 shows a DaemonSet's template generation (the API server counts it).
TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"
Event = tuple[str, str, str]

# What kube's daemon controller adds to every daemon pod, so that node conditions do not evict it.
_DAEMON_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)


def daemon_pod_spec(template_spec: dict[str, Any], node: str | None) -> dict[str, Any]:
    """The template's pod spec with the daemon tolerations and, given a node, pinned to it."""
    spec = copy.deepcopy(template_spec)
    tolerations = spec.setdefault("tolerations", [])
    extra = list(_DAEMON_TOLERATIONS)
    if spec.get("hostNetwork"):
        extra.append(("node.kubernetes.io/network-unavailable", "NoSchedule"))
    for key, effect in extra:
        if not any(t.get("key") == key and t.get("effect") == effect for t in tolerations):
            tolerations.append({"key": key, "operator": "Exists", "effect": effect})
    if node is not None:
        # kube replaces every required term with this one; the node was chosen by the same rules.
        pinned = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        node_affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})[
            "nodeSelectorTerms"
        ] = [pinned]
    return spec


def target_node(pod: dict[str, Any]) -> str:
    """The node a daemon pod is for: where it is bound, else the node its affinity pins it to."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for expression in term.get("matchFields") or []:
            if expression.get("key") == "metadata.name" and expression.get("values"):
                return str(expression["values"][0])
    return ""


def should_run(ds: dict[str, Any], node: dict[str, Any]) -> bool:
    template_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    return static_reason({"spec": daemon_pod_spec(template_spec, None)}, node) is None


def _pod_hash(pod: dict[str, Any]) -> str:
    return (pod["metadata"].get("labels") or {}).get(REVISION_HASH, "")


class DaemonSetController:
    """Runs every DaemonSet of one tenant."""

    def __init__(
        self,
        client: KubeClient,
        *,
        pods: Informer,
        nodes: Informer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.pods = pods
        self.nodes = nodes
        self.daemon_sets = Informer(client, "daemonsets")
        self.revisions = Informer(client, "controllerrevisions")
        self.history = History(client, self.revisions)
        self.clock = clock
        self.queue = WorkQueue("daemonset-controller", self.sync)
        self._expected: dict[str, Expectations] = {}

    async def start(self) -> None:
        self.daemon_sets.add_handler(self._ds_changed)
        self.pods.add_handler(self._pod_changed)
        self.nodes.add_handler(self._node_changed)
        await self.revisions.start()
        await self.daemon_sets.start()
        await self.pods.start()
        await self.nodes.start()
        for ds in self.daemon_sets.items():
            self.queue.add(object_key(ds))
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()
        await self.daemon_sets.stop()
        await self.revisions.stop()

    def _ds_changed(self, event: str, ds: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event == "DELETED":
            self._expected.pop(ds["metadata"].get("uid", ""), None)
        else:
            self.queue.add(object_key(ds))

    def _pod_changed(self, event: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        ref = controller_of(pod)
        if ref is not None and ref.get("kind") == "DaemonSet":
            observe_event(self._expected, ref.get("uid", ""), event, pod, self.clock())
            self.queue.add((pod["metadata"].get("namespace") or "", ref.get("name", "")))

    def _node_changed(self, event: str, node: dict[str, Any], old: dict[str, Any] | None) -> None:
        # HAMi's node lock changes a node's annotations with every GPU pod: only what decides where
        # daemon pods run (the node itself, its labels, taints, unschedulable) concerns the controller.
        if old is not None and event == "MODIFIED":
            before, after = old.get("metadata") or {}, node.get("metadata") or {}
            if before.get("labels") == after.get("labels") and old.get("spec") == node.get("spec"):
                return
        for ds in self.daemon_sets.items():
            self.queue.add(object_key(ds))

    # --- one DaemonSet -------------------------------------------------------------------------------

    async def sync(self, key: Key) -> None:
        ds = self.daemon_sets.get(*key)
        if ds is None or ds["metadata"].get("deletionTimestamp"):
            return
        ds = {**ds, "apiVersion": "apps/v1", "kind": "DaemonSet"}
        events: list[Event] = []
        owned = owned_by(ds, self.pods.items())
        current_hash = await self.history.current(ds, owned, _pod_hash)
        pods = [p for p in owned if not p["metadata"].get("deletionTimestamp")]
        now = self.clock()
        uid = ds["metadata"]["uid"]
        if self._expected.setdefault(uid, Expectations()).count({p["metadata"]["name"] for p in pods}, now):
            self.queue.add_after(key, 0.5)  # wait until the watch shows the pods just created
            return
        by_node: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            by_node.setdefault(target_node(pod), []).append(pod)
        nodes = {n["metadata"]["name"]: n for n in self.nodes.items()}
        wanted = sorted(name for name, node in nodes.items() if should_run(ds, node))
        to_create: list[str] = []
        to_delete: list[dict[str, Any]] = []
        for name in wanted:
            node_pods = by_node.get(name, [])
            failed = [p for p in node_pods if (p.get("status") or {}).get("phase") == "Failed"]
            for pod in failed:
                events.append(
                    (
                        "Warning",
                        "FailedDaemonPod",
                        f"Found failed daemon pod {pod['metadata'].get('namespace')}/{pod['metadata']['name']} "
                        f"on node {name}, will try to kill it",
                    )
                )
            to_delete += failed
            running = [p for p in node_pods if p not in failed and not is_terminal(p)]
            if not running:
                to_create.append(name)
            elif len(running) > 1 and not self._surging(ds, running, current_hash):
                oldest_first = sorted(running, key=lambda p: p["metadata"].get("creationTimestamp") or "")
                to_delete += oldest_first[1:]
        for name, node_pods in by_node.items():
            if name not in wanted:
                to_delete += node_pods  # the node is gone or no longer fits the daemon pod
        to_delete += self._rolling_update(
            ds, {n: by_node.get(n, []) for n in wanted}, current_hash, to_create
        )
        for pod in {p["metadata"]["uid"]: p for p in to_delete}.values():
            await self._delete_pod(pod, events)
        failed: ApiError | None = None
        for name in to_create:
            failed = await self._create_pod(ds, name, current_hash, events) or failed
        await self._write_status(ds, wanted, by_node, current_hash)
        for kind, reason, message in events:
            with contextlib.suppress(ApiError):
                await self.client.create_event(
                    ds, reason=reason, message=message, type=kind, component=COMPONENT
                )
        if failed is not None:
            # kube's syncNodes returns the refusals and the DaemonSet is queued again: a pod refused for
            # want of its ServiceAccount comes once the account is there.
            raise failed

    def _surging(self, ds: dict[str, Any], running: list[dict[str, Any]], current_hash: str) -> bool:
        """An old and a new pod side by side on one node is a surge in progress, not a duplicate."""
        hashes = {(p["metadata"].get("labels") or {}).get(REVISION_HASH) for p in running}
        return (
            len(running) == 2 and current_hash in hashes and len(hashes) == 2 and self._max_surge(ds, 1) > 0
        )

    @staticmethod
    def _rolling(ds: dict[str, Any]) -> dict[str, Any] | None:
        strategy = (ds.get("spec") or {}).get("updateStrategy") or {}
        return (
            strategy.get("rollingUpdate") or {}
            if strategy.get("type", "RollingUpdate") == "RollingUpdate"
            else None
        )

    def _max_surge(self, ds: dict[str, Any], desired: int) -> int:
        rolling = self._rolling(ds)
        return 0 if rolling is None else resolve(rolling.get("maxSurge", 0), desired, round_up=True)

    def _rolling_update(
        self,
        ds: dict[str, Any],
        wanted: dict[str, list[dict[str, Any]]],
        current_hash: str,
        to_create: list[str],
    ) -> list[dict[str, Any]]:
        """Old pods to delete now (and, with maxSurge, nodes to start a new pod on first)."""
        rolling = self._rolling(ds)
        if rolling is None:
            return []  # OnDelete: an old pod goes only when someone deletes it
        desired = len(wanted)
        max_unavailable = resolve(rolling.get("maxUnavailable", 1), desired, round_up=True)
        max_surge = self._max_surge(ds, desired)
        old_only: list[dict[str, Any]] = []
        unavailable = 0
        deletions: list[dict[str, Any]] = []
        surging = 0
        for node_pods in wanted.values():
            live = [p for p in node_pods if not is_terminal(p)]
            new = [p for p in live if (p["metadata"].get("labels") or {}).get(REVISION_HASH) == current_hash]
            old = [p for p in live if p not in new]
            if not live or not any(is_ready(p) for p in live):
                unavailable += 1
            if new and old:
                surging += 1
                if any(is_ready(p) for p in new):
                    deletions += old  # the new pod is ready: the old one may go
            elif old:
                old_only.append(min(old, key=lambda p: p["metadata"].get("creationTimestamp") or ""))
        if max_surge > 0:
            budget = max_surge - surging
            for pod in old_only:
                if budget <= 0:
                    break
                to_create.append(target_node(pod))
                budget -= 1
            return deletions
        # Unavailable old pods cost nothing to replace; then as many available ones as the budget allows.
        budget = max_unavailable - unavailable
        for pod in old_only:
            if not is_ready(pod):
                deletions.append(pod)
            elif budget > 0:
                deletions.append(pod)
                budget -= 1
        return deletions

    async def _create_pod(
        self, ds: dict[str, Any], node: str, current_hash: str, events: list[Event]
    ) -> ApiError | None:
        body = pod_from_template(ds)
        body["metadata"]["labels"] = {
            **body["metadata"]["labels"],
            REVISION_HASH: current_hash,
            # the template's own generation, which the API server keeps in the DaemonSet's annotation
            TEMPLATE_GENERATION: (ds["metadata"].get("annotations") or {}).get(
                TEMPLATE_GENERATION_ANNOTATION, "1"
            ),
        }
        body["spec"] = daemon_pod_spec(body["spec"], node)
        try:
            pod = await self.client.create("pods", body)
        except ApiError as error:
            events.append(("Warning", "FailedCreate", f"Error creating: {error.message}"))
            return error
        name = pod["metadata"]["name"]
        self._expected.setdefault(ds["metadata"]["uid"], Expectations()).expect(name, self.clock())
        events.append(("Normal", "SuccessfulCreate", f"Created pod: {name}"))
        return None

    async def _delete_pod(self, pod: dict[str, Any], events: list[Event]) -> None:
        meta = pod["metadata"]
        try:
            await self.client.delete("pods", meta["name"], meta.get("namespace"), uid=meta["uid"])
        except ApiError:
            return
        events.append(("Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}"))

    async def _write_status(
        self,
        ds: dict[str, Any],
        wanted: list[str],
        by_node: dict[str, list[dict[str, Any]]],
        current_hash: str,
    ) -> None:
        def live(name: str) -> list[dict[str, Any]]:
            return [p for p in by_node.get(name, []) if not is_terminal(p)]

        scheduled = [n for n in wanted if live(n)]
        ready = [n for n in wanted if any(is_ready(p) for p in live(n))]
        updated = [
            n
            for n in wanted
            if any((p["metadata"].get("labels") or {}).get(REVISION_HASH) == current_hash for p in live(n))
        ]
        status: dict[str, Any] = {
            "currentNumberScheduled": len(scheduled),
            "numberMisscheduled": sum(1 for n, pods in by_node.items() if n not in wanted and pods),
            "desiredNumberScheduled": len(wanted),
            "numberReady": len(ready),
            "observedGeneration": ds["metadata"].get("generation", 1),
            "updatedNumberScheduled": len(updated),
            "numberAvailable": len(ready),
            "numberUnavailable": len(wanted) - len(ready),
        }
        # kube leaves the optional counts out when they are zero
        for optional in ("updatedNumberScheduled", "numberAvailable", "numberUnavailable"):
            if not status[optional]:
                del status[optional]
        if ds.get("status", {}).get("collisionCount") is not None:
            status["collisionCount"] = ds["status"]["collisionCount"]
        if status != (ds.get("status") or {}):
            with contextlib.suppress(ApiError):  # a conflict: the watch brings the DaemonSet back
                await self.client.update_status("daemonsets", {**ds, "status": status})
