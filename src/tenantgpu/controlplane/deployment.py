"""The Deployment controller of kube-controller-manager: rolls a Deployment's template out through
ReplicaSets.

Each template gets a ReplicaSet named `<deployment>-<pod-template-hash>`, labelled and selected by
that hash, with the `deployment.kubernetes.io/revision` annotation that `kubectl rollout history` and
`undo` read. RollingUpdate scales the new ReplicaSet up within `maxSurge` and the old ones down within
`maxUnavailable`, as kube's rolling.go does; Recreate scales the old ones to zero and starts the new
one once their pods are gone. The status (replicas, updated, ready, available, unavailable,
observedGeneration) and the Available and Progressing conditions carry kube's reasons and messages, so
`kubectl rollout status` follows a rollout. Old ReplicaSets beyond `revisionHistoryLimit` are
deleted. `spec.paused` stops rollouts; scaling still applies.

The pod-template-hash is this lab's own hash of the template (kube hashes Go's printed struct), in
kube's alphabet; only its stability matters.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable
from typing import Any

import orjson

from tenantgpu.controlplane.conditions import get_condition, now_text, parse_time, set_condition
from tenantgpu.controlplane.owners import controller_of, owned_by, owner_reference
from tenantgpu.controlplane.podstate import is_terminal
from tenantgpu.controlplane.workqueue import Key, WorkQueue, object_key
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

COMPONENT = "deployment-controller"
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
# client-go's rand.SafeEncodeString alphabet: no vowels, no look-alikes.
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


def template_hash(template: dict[str, Any], collisions: int = 0) -> str:
    """FNV-1a (32 bit) of the template's canonical JSON, written in kube's safe alphabet."""
    value = 0x811C9DC5
    for byte in (
        orjson.dumps(template, option=orjson.OPT_SORT_KEYS) + (str(collisions) if collisions else "").encode()
    ):
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[int(c) % len(_SAFE)] for c in str(value))


def resolve(value: Any, total: int, *, round_up: bool) -> int:
    """An IntOrString (`25%` or `1`) against `total`: surge rounds up, unavailability down."""
    if isinstance(value, str) and value.endswith("%"):
        scaled = int(value[:-1]) * total
        return -(-scaled // 100) if round_up else scaled // 100
    return int(value or 0)


def surge_and_unavailable(deploy: dict[str, Any]) -> tuple[int, int]:
    spec = deploy.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    surge = resolve(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = resolve(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1  # kube's rule: a rollout must be able to move
    return surge, min(unavailable, replicas)


def _replicas(rs: dict[str, Any]) -> int:
    return int((rs.get("spec") or {}).get("replicas") or 0)


def _available(rs: dict[str, Any]) -> int:
    return int((rs.get("status") or {}).get("availableReplicas") or 0)


def _revision(rs: dict[str, Any]) -> int:
    with contextlib.suppress(ValueError):
        return int((rs["metadata"].get("annotations") or {}).get(REVISION, "0"))
    return 0


def _without_hash(template: dict[str, Any]) -> dict[str, Any]:
    clean = copy.deepcopy(template)
    labels = (clean.get("metadata") or {}).get("labels")
    if labels:
        labels.pop(HASH_LABEL, None)
    return clean


class DeploymentController:
    """Runs every Deployment of one tenant, through the ReplicaSet controller's informer."""

    def __init__(
        self,
        client: KubeClient,
        *,
        replica_sets: Informer,
        pods: Informer,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.replica_sets = replica_sets
        self.pods = pods
        self.deployments = Informer(client, "deployments")
        self.clock = clock
        self.queue = WorkQueue("deployment-controller", self.sync)

    async def start(self) -> None:
        self.deployments.add_handler(lambda event, d, old: self.queue.add(object_key(d)))
        self.replica_sets.add_handler(self._rs_changed)
        await self.deployments.start()
        await self.replica_sets.start()
        for deploy in self.deployments.items():
            self.queue.add(object_key(deploy))
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()
        await self.deployments.stop()

    def _rs_changed(self, event: str, rs: dict[str, Any], old: dict[str, Any] | None) -> None:
        ref = controller_of(rs)
        if ref is not None and ref.get("kind") == "Deployment":
            self.queue.add((rs["metadata"].get("namespace") or "", ref.get("name", "")))

    async def sync(self, key: Key) -> None:
        deploy = self.deployments.get(*key)
        if deploy is None or deploy["metadata"].get("deletionTimestamp"):
            return
        deploy = {**deploy, "apiVersion": "apps/v1", "kind": "Deployment"}
        spec = deploy.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        owned = owned_by(deploy, self.replica_sets.items())
        template = spec.get("template") or {}
        new_rs = next((rs for rs in owned if _without_hash(rs["spec"]["template"]) == template), None)
        old = [rs for rs in owned if rs is not new_rs]
        events: list[str] = []

        if spec.get("paused"):
            if new_rs is not None and _replicas(new_rs) != replicas and not any(_replicas(r) for r in old):
                await self._scale(deploy, new_rs, replicas, events)
        elif (spec.get("strategy") or {}).get("type") == "Recreate":
            new_rs = await self._recreate(deploy, new_rs, old, owned, events)
        else:
            new_rs = await self._roll(deploy, new_rs, old, owned, events)
        if new_rs is not None:
            new_rs = await self._sync_revision(deploy, new_rs, owned)
        await self._clean_history(deploy, [rs for rs in old if rs is not new_rs])
        created = new_rs is not None and all(
            rs["metadata"]["uid"] != new_rs["metadata"]["uid"] for rs in owned
        )
        await self._write_status(deploy, new_rs, owned, created=created)
        for message in events:
            with contextlib.suppress(ApiError):
                await self.client.create_event(
                    deploy, reason="ScalingReplicaSet", message=message, component=COMPONENT
                )

    # --- strategies -----------------------------------------------------------------------------

    async def _roll(
        self,
        deploy: dict[str, Any],
        new_rs: dict[str, Any] | None,
        old: list[dict[str, Any]],
        owned: list[dict[str, Any]],
        events: list[str],
    ) -> dict[str, Any]:
        replicas = int(deploy["spec"].get("replicas", 1))
        surge, unavailable = surge_and_unavailable(deploy)
        total = sum(_replicas(rs) for rs in owned)
        current_new = _replicas(new_rs) if new_rs is not None else 0
        if not any(_replicas(rs) for rs in old):
            target = replicas  # nothing to roll from: plain scaling
        elif current_new >= replicas:
            target = replicas
        else:
            room = max(replicas + surge - total, 0)
            target = min(current_new + room, replicas)
        if new_rs is None:
            new_rs = await self._create_rs(deploy, owned, target, events)
        elif target != current_new:
            new_rs = await self._scale(deploy, new_rs, target, events)
        # Scale the old ones down as far as availability allows: first what is not available anyway.
        all_pods = sum(_replicas(rs) for rs in old) + _replicas(new_rs)
        new_unavailable = max(_replicas(new_rs) - _available(new_rs), 0)
        budget = all_pods - (replicas - unavailable) - new_unavailable
        for rs in sorted(old, key=lambda r: r["metadata"].get("creationTimestamp") or ""):
            if budget <= 0:
                break
            if _replicas(rs) == 0:
                continue
            cut = min(_replicas(rs), budget)
            await self._scale(deploy, rs, _replicas(rs) - cut, events)
            budget -= cut
        return new_rs

    async def _recreate(
        self,
        deploy: dict[str, Any],
        new_rs: dict[str, Any] | None,
        old: list[dict[str, Any]],
        owned: list[dict[str, Any]],
        events: list[str],
    ) -> dict[str, Any] | None:
        replicas = int(deploy["spec"].get("replicas", 1))
        for rs in old:
            if _replicas(rs):
                await self._scale(deploy, rs, 0, events)
        old_uids = {rs["metadata"]["uid"] for rs in old}
        if any(
            (controller_of(p) or {}).get("uid") in old_uids and not is_terminal(p) for p in self.pods.items()
        ):
            return new_rs  # the new pods start once the old ones are gone
        if new_rs is None:
            return await self._create_rs(deploy, owned, replicas, events)
        if _replicas(new_rs) != replicas:
            return await self._scale(deploy, new_rs, replicas, events)
        return new_rs

    # --- writes -------------------------------------------------------------------------------------

    async def _create_rs(
        self, deploy: dict[str, Any], owned: list[dict[str, Any]], replicas: int, events: list[str]
    ) -> dict[str, Any]:
        meta, spec = deploy["metadata"], deploy["spec"]
        collisions = int((deploy.get("status") or {}).get("collisionCount") or 0)
        digest = template_hash(spec["template"], collisions)
        template = copy.deepcopy(spec["template"])
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = digest
        selector = copy.deepcopy(spec["selector"])
        selector.setdefault("matchLabels", {})[HASH_LABEL] = digest
        surge, _ = surge_and_unavailable(deploy)
        body = {
            "metadata": {
                "name": f"{meta['name']}-{digest}",
                "namespace": meta.get("namespace"),
                "labels": {**(template["metadata"].get("labels") or {})},
                "annotations": {
                    DESIRED: str(spec.get("replicas", 1)),
                    MAX_REPLICAS: str(int(spec.get("replicas", 1)) + surge),
                    REVISION: str(max((_revision(rs) for rs in owned), default=0) + 1),
                },
                "ownerReferences": [owner_reference(deploy)],
            },
            "spec": {"replicas": replicas, "selector": selector, "template": template},
        }
        if spec.get("minReadySeconds"):
            body["spec"]["minReadySeconds"] = spec["minReadySeconds"]
        rs = await self.client.create("replicasets", body)
        events.append(f"Scaled up replica set {rs['metadata']['name']} from 0 to {replicas}")
        return rs

    async def _scale(
        self, deploy: dict[str, Any], rs: dict[str, Any], replicas: int, events: list[str]
    ) -> dict[str, Any]:
        before = _replicas(rs)
        surge, _ = surge_and_unavailable(deploy)
        annotations = {
            DESIRED: str(deploy["spec"].get("replicas", 1)),
            MAX_REPLICAS: str(int(deploy["spec"].get("replicas", 1)) + surge),
        }
        patch = {"metadata": {"annotations": annotations}, "spec": {"replicas": replicas}}
        updated = await self.client.patch(
            "replicasets", rs["metadata"]["name"], patch, rs["metadata"].get("namespace")
        )
        direction = "up" if replicas > before else "down"
        events.append(f"Scaled {direction} replica set {rs['metadata']['name']} from {before} to {replicas}")
        return updated

    async def _sync_revision(
        self, deploy: dict[str, Any], new_rs: dict[str, Any], owned: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The current ReplicaSet holds the highest revision (an undo makes an old one current again),
        and the Deployment's own annotation names it, which `kubectl rollout undo` patches."""
        others = [_revision(rs) for rs in owned if rs["metadata"]["uid"] != new_rs["metadata"]["uid"]]
        if others and _revision(new_rs) <= max(others):
            patch = {"metadata": {"annotations": {REVISION: str(max(others) + 1)}}}
            meta = new_rs["metadata"]
            new_rs = await self.client.patch("replicasets", meta["name"], patch, meta.get("namespace"))
        revision = str(_revision(new_rs))
        if (deploy["metadata"].get("annotations") or {}).get(REVISION) != revision:
            meta = deploy["metadata"]
            patch = {"metadata": {"annotations": {REVISION: revision}}}
            # Through status, as kube's controller writes it: a new annotation there is no new generation.
            written = await self.client.patch(
                "deployments", meta["name"], patch, meta.get("namespace"), subresource="status"
            )
            deploy["metadata"] = written["metadata"]
        return new_rs

    async def _clean_history(self, deploy: dict[str, Any], old: list[dict[str, Any]]) -> None:
        limit = (deploy.get("spec") or {}).get("revisionHistoryLimit", 10)
        idle = [
            rs
            for rs in old
            if _replicas(rs) == 0
            and not (rs.get("status") or {}).get("replicas")
            and not rs["metadata"].get("deletionTimestamp")
        ]
        for rs in sorted(idle, key=_revision)[: max(len(idle) - int(limit), 0)]:
            with contextlib.suppress(ApiError):
                await self.client.delete(
                    "replicasets",
                    rs["metadata"]["name"],
                    rs["metadata"].get("namespace"),
                    uid=rs["metadata"]["uid"],
                )

    async def _write_status(
        self,
        deploy: dict[str, Any],
        new_rs: dict[str, Any] | None,
        owned: list[dict[str, Any]],
        *,
        created: bool,
    ) -> None:
        """`created`: this sync created `new_rs`, which the Progressing condition says."""
        replicas = int(deploy["spec"].get("replicas", 1))
        # Counts come from the ReplicaSets as the watch shows them; their writes above arrive as events.
        current = [
            self.replica_sets.get(rs["metadata"].get("namespace"), rs["metadata"]["name"]) or rs
            for rs in owned
        ]
        counted = {rs["metadata"]["uid"]: rs for rs in current}
        if new_rs is not None:
            counted.setdefault(new_rs["metadata"]["uid"], new_rs)
        new_status = (counted.get(new_rs["metadata"]["uid"]) if new_rs else {}) or {}
        total = sum(int((rs.get("status") or {}).get("replicas") or 0) for rs in counted.values())
        available = sum(_available(rs) for rs in counted.values())
        ready = sum(int((rs.get("status") or {}).get("readyReplicas") or 0) for rs in counted.values())
        updated = int((new_status.get("status") or {}).get("replicas") or 0)
        old_status = copy.deepcopy(deploy.get("status") or {})
        status: dict[str, Any] = {
            "observedGeneration": deploy["metadata"].get("generation", 1),
            "replicas": total,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": available,
            "unavailableReplicas": max(replicas - available, 0),
        }
        status = {k: v for k, v in status.items() if v or k == "observedGeneration"}
        if old_status.get("collisionCount"):
            status["collisionCount"] = old_status["collisionCount"]
        status["conditions"] = old_status.get("conditions") or []
        _, unavailable = surge_and_unavailable(deploy)
        if available >= replicas - unavailable:
            set_condition(status, "Available", "True", "MinimumReplicasAvailable",
                          "Deployment has minimum availability.", stamp="lastUpdateTime")  # fmt: skip
        else:
            set_condition(status, "Available", "False", "MinimumReplicasUnavailable",
                          "Deployment does not have minimum availability.", stamp="lastUpdateTime")  # fmt: skip
        self._set_progressing(
            deploy, status, new_rs, old_status, total, updated, available, replicas, created
        )
        _copy_replica_failure(status, new_status)
        if status != old_status:
            await self.client.update_status("deployments", {**deploy, "status": status})

    def _set_progressing(
        self,
        deploy: dict[str, Any],
        status: dict[str, Any],
        new_rs: dict[str, Any] | None,
        old_status: dict[str, Any],
        total: int,
        updated: int,
        available: int,
        replicas: int,
        created: bool,
    ) -> None:
        if new_rs is None:
            return
        name = new_rs["metadata"]["name"]
        complete = updated == replicas and available == replicas and total == replicas
        progressing = get_condition(status, "Progressing")
        if complete:
            set_condition(status, "Progressing", "True", "NewReplicaSetAvailable",
                          f'ReplicaSet "{name}" has successfully progressed.', stamp="lastUpdateTime")  # fmt: skip
            return
        if created:
            set_condition(status, "Progressing", "True", "NewReplicaSetCreated",
                          f'Created new replica set "{name}"', stamp="lastUpdateTime")  # fmt: skip
            return
        moved = any(
            int(status.get(k) or 0) != int(old_status.get(k) or 0)
            for k in ("updatedReplicas", "availableReplicas", "readyReplicas", "replicas")
        )
        deadline = int((deploy.get("spec") or {}).get("progressDeadlineSeconds", 600))
        last = parse_time((progressing or {}).get("lastUpdateTime")) if progressing else None
        if progressing is not None and progressing.get("reason") == "ProgressDeadlineExceeded" and not moved:
            return
        if not moved and last is not None and self.clock() - last > deadline:
            set_condition(status, "Progressing", "False", "ProgressDeadlineExceeded",
                          f'ReplicaSet "{name}" has timed out progressing.', stamp="lastUpdateTime")  # fmt: skip
            return
        message = f'ReplicaSet "{name}" is progressing.'
        if moved or progressing is None or progressing.get("message") != message:
            set_condition(status, "Progressing", "True", "ReplicaSetUpdated", message, stamp="lastUpdateTime")
            cond = get_condition(status, "Progressing")
            if cond is not None:
                cond["lastUpdateTime"] = now_text()
        self.queue.add_after(object_key(deploy), deadline + 1)


def _copy_replica_failure(status: dict[str, Any], new_rs: dict[str, Any]) -> None:
    """The new ReplicaSet's `ReplicaFailure` becomes the Deployment's, and goes when the ReplicaSet's goes
    (kube's syncRolloutStatus and SetDeploymentCondition: both times are the ReplicaSet condition's
    transition time; one of the same status and reason is left as it is)."""
    failure = get_condition(new_rs.get("status") or {}, "ReplicaFailure")
    current = get_condition(status, "ReplicaFailure")
    others = [c for c in status.get("conditions") or [] if c.get("type") != "ReplicaFailure"]
    if failure is None:
        status["conditions"] = others
        return
    value, reason = failure.get("status", "True"), failure.get("reason", "")
    if current is not None and (current.get("status"), current.get("reason")) == (value, reason):
        return
    since = failure.get("lastTransitionTime")
    copied = {
        "type": "ReplicaFailure",
        "status": value,
        "lastUpdateTime": since,
        "lastTransitionTime": current["lastTransitionTime"]
        if current is not None and current.get("status") == value
        else since,
        "reason": reason,
        "message": failure.get("message", ""),
    }
    status["conditions"] = [*others, copied]
