"""The StatefulSet controller of kube-controller-manager: pods with a stable name and identity.

Pod `<set>-<ordinal>` (ordinals from `spec.ordinals.start`, 0 by default) gets the hostname of its name
and the subdomain `spec.serviceName`, and the labels `statefulset.kubernetes.io/pod-name`,
`apps.kubernetes.io/pod-index` and `controller-revision-hash` (the name of its ControllerRevision). With
`podManagementPolicy: OrderedReady` (the default) pods are created one at a time in ordinal order, each
once the ones before it run and are ready, and removed from the highest ordinal down; with `Parallel` all
at once. RollingUpdate replaces pods from the highest ordinal down to `partition`, one at a time, each
once the others are ready; pods below the partition keep, and are re-created from, the current revision.
OnDelete replaces a pod only when it is deleted. A failed pod is deleted and made again.

Each `volumeClaimTemplates` entry gives every pod its own claim `<template>-<set>-<ordinal>` (with the
set's selector labels), made before the pod if missing (`create Claim data-web-0 Pod web-0 in
StatefulSet web success`) and kept when the pod goes, so a pod made again finds its data; the pod's
volume of the template's name uses it. `persistentVolumeClaimRetentionPolicy` (kube's
StatefulSetAutoDeletePVC, on by default from 1.27): `whenDeleted: Delete` makes the set the claims'
owner, so they go with it; `whenScaled: Delete` makes a pod that a scale down removes the owner of its
claims first, so they go with it.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from tenantgpu.controlplane.history import REVISION_HASH, History
from tenantgpu.controlplane.owners import controller_of, owned_by, owner_reference, pod_from_template
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


def _retention(sts: dict[str, Any]) -> dict[str, Any]:
    return (sts.get("spec") or {}).get("persistentVolumeClaimRetentionPolicy") or {}


def claims_of(sts: dict[str, Any], ordinal: int) -> list[tuple[str, dict[str, Any]]]:
    """getPersistentVolumeClaims: (template name, claim) for each of the set's claim templates, named
    `<template>-<set>-<ordinal>`, with the template's labels and the set's selector labels."""
    meta = sts["metadata"]
    selector = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    found = []
    for template in (sts.get("spec") or {}).get("volumeClaimTemplates") or []:
        claim = copy.deepcopy(template)
        template_meta = claim.pop("metadata", None) or {}
        claim.pop("status", None)
        name = template_meta.get("name", "")
        claim_meta = {k: v for k, v in template_meta.items() if k in ("labels", "annotations") and v}
        claim_meta["labels"] = {**(template_meta.get("labels") or {}), **selector}
        claim_meta["name"] = f"{name}-{meta['name']}-{ordinal}"
        claim_meta["namespace"] = meta.get("namespace") or "default"
        found.append(
            (name, {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": claim_meta, **claim})
        )
    return found


class StatefulSetController:
    """Runs every StatefulSet of one tenant."""

    def __init__(
        self, client: KubeClient, *, pods: Informer, revisions: Informer, claims: Informer | None = None
    ) -> None:
        self.client = client
        self.pods = pods
        self.claims = claims
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
        if self.claims is not None:
            await self.claims.start()
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
                await self._release_claims(sts, live[ordinal])
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
        claims = claims_of(sts, ordinal)
        if claims:
            if not await self._create_claims(sts, name, claims, events):
                return
            body["spec"]["volumes"] = [
                *(
                    {"name": t, "persistentVolumeClaim": {"claimName": c["metadata"]["name"]}}
                    for t, c in claims
                ),
                *(v for v in body["spec"].get("volumes") or [] if v.get("name") not in dict(claims)),
            ]
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

    async def _create_claims(
        self,
        sts: dict[str, Any],
        pod_name: str,
        claims: list[tuple[str, dict[str, Any]]],
        events: list[Event],
    ) -> bool:
        """createPersistentVolumeClaims: each claim the pod needs that does not exist yet; whether the pod
        may be made (not while one of its claims is still going away)."""
        set_name = sts["metadata"]["name"]
        ready = True
        for _, claim in claims:
            name = claim["metadata"]["name"]
            existing = (
                self.claims.get(claim["metadata"]["namespace"], name) if self.claims is not None else None
            )
            if existing is not None:
                if existing["metadata"].get("deletionTimestamp"):
                    ready = False  # kube: "pvc ... is being deleted"; the pod waits for it to go
                continue
            if _retention(sts).get("whenDeleted") == "Delete":
                claim["metadata"]["ownerReferences"] = [owner_reference(sts)]
            try:
                await self.client.create("persistentvolumeclaims", claim)
            except ApiError as error:
                if error.code == 409:
                    continue  # made meanwhile; the informer has not shown it yet
                events.append(
                    (
                        "Warning",
                        "FailedCreate",
                        f"create Claim {name} for Pod {pod_name} in StatefulSet {set_name} failed error: {error}",
                    )
                )
                ready = False
                continue
            events.append(
                (
                    "Normal",
                    "SuccessfulCreate",
                    f"create Claim {name} Pod {pod_name} in StatefulSet {set_name} success",
                )
            )
        return ready

    async def _release_claims(self, sts: dict[str, Any], pod: dict[str, Any]) -> None:
        """whenScaled Delete: the pod a scale down removes becomes its claims' owner, so that the garbage
        collector deletes them once the pod is gone."""
        ordinal = _ordinal(sts, pod)
        if ordinal is None or _retention(sts).get("whenScaled") != "Delete":
            return
        for _, claim in claims_of(sts, ordinal):
            meta = claim["metadata"]
            existing = self.claims.get(meta["namespace"], meta["name"]) if self.claims is not None else None
            if existing is None:
                continue
            refs = [
                r
                for r in existing["metadata"].get("ownerReferences") or []
                if r.get("uid") not in (sts["metadata"]["uid"], pod["metadata"]["uid"])
            ]
            refs.append(owner_reference({**pod, "apiVersion": "v1", "kind": "Pod"}))
            with contextlib.suppress(ApiError):
                await self.client.patch(
                    "persistentvolumeclaims",
                    meta["name"],
                    {
                        "metadata": {
                            "ownerReferences": refs,
                            "resourceVersion": existing["metadata"].get("resourceVersion"),
                        }
                    },
                    meta["namespace"],
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
