"""The StatefulSet controller of kube-controller-manager: pods with a stable name and identity.

Pod `<set>-<ordinal>` (ordinals from `spec.ordinals.start`, 0 by default) gets the hostname of its name
and the subdomain `spec.serviceName`, and the labels `statefulset.kubernetes.io/pod-name`,
`apps.kubernetes.io/pod-index` and `controller-revision-hash` (the name of its ControllerRevision). With
`podManagementPolicy: OrderedReady` (the default) pods are created one at a time in ordinal order, each
once the ones before it run and are ready, and removed from the highest ordinal down; with `Parallel` all
at once. RollingUpdate replaces pods from the highest ordinal down to `partition`, one at a time, each
once the others are ready; pods below the partition keep, and are re-created from, the current revision.
OnDelete replaces a pod only when it is deleted. A failed pod is deleted and made again. Volume claim
templates are refused by validation: the lab serves no PersistentVolumeClaims.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from tenantgpu.controlplane.history import REVISION_HASH, History
from tenantgpu.controlplane.owners import controller_of, owned_by, pod_from_template
from tenantgpu.controlplane.podstate import is_ready, is_terminal
from tenantgpu.controlplane.workqueue import Key, WorkQueue, object_key
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

COMPONENT = "statefulset-controller"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
Event = tuple[str, str, str]


def _ordinal(sts: dict[str, Any], pod: dict[str, Any]) -> int | None:
    prefix = sts["metadata"]["name"] + "-"
    name = pod["metadata"]["name"]
    suffix = name[len(prefix) :]
    return int(suffix) if name.startswith(prefix) and suffix.isdigit() else None


def _template_of(revision: dict[str, Any]) -> dict[str, Any]:
    template = copy.deepcopy(((revision.get("data") or {}).get("spec") or {}).get("template") or {})
    template.pop("$patch", None)
    return template


class StatefulSetController:
    """Runs every StatefulSet of one tenant."""

    def __init__(self, client: KubeClient, *, pods: Informer, revisions: Informer) -> None:
        self.client = client
        self.pods = pods
        self.revisions = revisions
        self.history = History(client, revisions)
        self.stateful_sets = Informer(client, "statefulsets")
        self.queue = WorkQueue("statefulset-controller", self.sync)

    async def start(self) -> None:
        self.stateful_sets.add_handler(self._sts_changed)
        self.pods.add_handler(self._pod_changed)
        await self.revisions.start()
        await self.stateful_sets.start()
        await self.pods.start()
        for sts in self.stateful_sets.items():
            self.queue.add(object_key(sts))
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()
        await self.stateful_sets.stop()

    def _sts_changed(self, event: str, sts: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event != "DELETED":
            self.queue.add(object_key(sts))

    def _pod_changed(self, event: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        ref = controller_of(pod)
        if ref is not None and ref.get("kind") == "StatefulSet":
            self.queue.add((pod["metadata"].get("namespace") or "", ref.get("name", "")))

    # --- one StatefulSet -----------------------------------------------------------------------------

    async def sync(self, key: Key) -> None:
        sts = self.stateful_sets.get(*key)
        if sts is None or sts["metadata"].get("deletionTimestamp"):
            return
        sts = {**sts, "apiVersion": "apps/v1", "kind": "StatefulSet"}
        name = sts["metadata"]["name"]
        spec = sts.get("spec") or {}
        owned = owned_by(sts, self.pods.items())
        update_hash = await self.history.current(sts, owned, lambda p: self._pod_hash(sts, p))
        update_revision = f"{name}-{update_hash}"
        current_revision = (sts.get("status") or {}).get("currentRevision") or update_revision
        events: list[Event] = []
        start = int((spec.get("ordinals") or {}).get("start") or 0)
        replicas = int(spec.get("replicas", 1))
        wanted = range(start, start + replicas)
        by_ordinal = {o: p for p in owned if (o := _ordinal(sts, p)) is not None}
        ordered = spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        terminating = any(p["metadata"].get("deletionTimestamp") for p in by_ordinal.values())

        for ordinal in wanted:
            pod = by_ordinal.get(ordinal)
            if pod is not None and (pod.get("status") or {}).get("phase") == "Failed":
                await self._delete(sts, pod, events)
                pod = None
                by_ordinal.pop(ordinal)
                if ordered:
                    break
            if pod is None:
                if not (ordered and terminating):
                    revision = current_revision if self._below_partition(sts, ordinal) else update_revision
                    await self._create(sts, ordinal, revision, update_revision, events)
                if ordered:
                    break  # one at a time: the next waits for this one to run and be ready
                continue
            if ordered and (pod["metadata"].get("deletionTimestamp") or not is_ready(pod)):
                break
        else:
            await self._scale_down_and_update(sts, by_ordinal, wanted, update_revision, ordered, events)

        await self._write_status(sts, owned, current_revision, update_revision, wanted)
        for kind, reason, message in events:
            with contextlib.suppress(ApiError):
                await self.client.create_event(
                    sts, reason=reason, message=message, type=kind, component=COMPONENT
                )

    async def _scale_down_and_update(
        self,
        sts: dict[str, Any],
        by_ordinal: dict[int, dict[str, Any]],
        wanted: range,
        update_revision: str,
        ordered: bool,
        events: list[Event],
    ) -> None:
        """Every wanted pod exists: remove the surplus, then roll the update."""
        live = {o: p for o, p in by_ordinal.items() if not p["metadata"].get("deletionTimestamp")}
        surplus = sorted((o for o in live if o not in wanted), reverse=True)
        all_ready = all(is_ready(p) for p in by_ordinal.values()) and len(live) == len(by_ordinal)
        if surplus:
            for ordinal in surplus if not ordered else surplus[:1]:
                if ordered and not all_ready:
                    return
                await self._delete(sts, live[ordinal], events)
            return
        strategy = (sts.get("spec") or {}).get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate" or not all_ready:
            return
        for ordinal in sorted(wanted, reverse=True):
            pod = live.get(ordinal)
            if self._below_partition(sts, ordinal) or pod is None:
                continue
            if (pod["metadata"].get("labels") or {}).get(REVISION_HASH) != update_revision:
                await self._delete(sts, pod, events)  # re-created from the update revision
                return

    @staticmethod
    def _below_partition(sts: dict[str, Any], ordinal: int) -> bool:
        strategy = (sts.get("spec") or {}).get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return False
        return ordinal < int((strategy.get("rollingUpdate") or {}).get("partition") or 0)

    @staticmethod
    def _pod_hash(sts: dict[str, Any], pod: dict[str, Any]) -> str:
        label = (pod["metadata"].get("labels") or {}).get(REVISION_HASH, "")
        return label.removeprefix(sts["metadata"]["name"] + "-")

    async def _create(
        self, sts: dict[str, Any], ordinal: int, revision: str, update_revision: str, events: list[Event]
    ) -> None:
        source = sts
        if revision != update_revision:
            stored = next(
                (r for r in owned_by(sts, self.revisions.items()) if r["metadata"]["name"] == revision), None
            )
            if stored is not None:
                source = {**sts, "spec": {**sts["spec"], "template": _template_of(stored)}}
            else:
                revision = update_revision
        name = f"{sts['metadata']['name']}-{ordinal}"
        body = pod_from_template(source)
        del body["metadata"]["generateName"]
        body["metadata"]["name"] = name
        body["metadata"]["labels"] = {
            **body["metadata"]["labels"],
            REVISION_HASH: revision,
            POD_NAME_LABEL: name,
            POD_INDEX_LABEL: str(ordinal),
        }
        body["spec"]["hostname"] = name
        service = (sts.get("spec") or {}).get("serviceName")
        if service:
            body["spec"]["subdomain"] = service
        try:
            await self.client.create("pods", body)
        except ApiError as error:
            if error.code != 409:  # 409: the old pod of this name is still going away
                events.append(
                    (
                        "Warning",
                        "FailedCreate",
                        f"create Pod {name} in StatefulSet {sts['metadata']['name']} failed error: {error}",
                    )
                )
            return
        events.append(
            (
                "Normal",
                "SuccessfulCreate",
                f"create Pod {name} in StatefulSet {sts['metadata']['name']} successful",
            )
        )

    async def _delete(self, sts: dict[str, Any], pod: dict[str, Any], events: list[Event]) -> None:
        meta = pod["metadata"]
        try:
            await self.client.delete("pods", meta["name"], meta.get("namespace"), uid=meta["uid"])
        except ApiError:
            return
        events.append(
            (
                "Normal",
                "SuccessfulDelete",
                f"delete Pod {meta['name']} in StatefulSet {sts['metadata']['name']} successful",
            )
        )

    async def _write_status(
        self,
        sts: dict[str, Any],
        owned: list[dict[str, Any]],
        current_revision: str,
        update_revision: str,
        wanted: range,
    ) -> None:
        pods = [p for p in owned if not is_terminal(p)]

        def revision_of(pod: dict[str, Any]) -> str:
            return (pod["metadata"].get("labels") or {}).get(REVISION_HASH, "")

        updated = sum(1 for p in pods if revision_of(p) == update_revision)
        ready = sum(1 for p in pods if is_ready(p))
        done = updated == len(wanted) and len(pods) == len(wanted) and ready == len(wanted)
        if done:
            current_revision = update_revision  # the rollout is complete: the update is current now
        status: dict[str, Any] = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(pods),
            "readyReplicas": ready,
            "currentReplicas": sum(1 for p in pods if revision_of(p) == current_revision),
            "updatedReplicas": updated,
            "currentRevision": current_revision,
            "updateRevision": update_revision,
            "collisionCount": int((sts.get("status") or {}).get("collisionCount") or 0),
            "availableReplicas": ready,
        }
        for optional in ("readyReplicas", "currentReplicas", "updatedReplicas"):
            if not status[optional]:
                del status[optional]
        if status != (sts.get("status") or {}):
            with contextlib.suppress(ApiError):  # a conflict: the watch brings the StatefulSet back
                await self.client.update_status("statefulsets", {**sts, "status": status})
