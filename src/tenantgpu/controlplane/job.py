"""The Job controller of kube-controller-manager, for NonIndexed batch/v1 Jobs.

It creates a Job's pods from its template, counts each pod that ends exactly once through the
`batch.kubernetes.io/job-tracking` finalizer and `status.uncountedTerminatedPods` (as the real
controller does, so a restart or a deleted pod neither loses nor doubles a count), and finishes the
Job with kube's conditions and reasons: SuccessCriteriaMet then Complete (`CompletionsReached`),
FailureTarget then Failed (`BackoffLimitExceeded`, `DeadlineExceeded`). It also does the
ttl-after-finished controller's one job: deleting a finished Job after `ttlSecondsAfterFinished`.

A Job whose `spec.managedBy` names another controller (JobManagedBy, on from 1.32; an API server of
an older release does not store the field) is left to that controller, as kube's syncJob skips it;
the ttl-after-finished duty still applies to it.

What it leaves out, refused by validation instead: Indexed completion, pod failure and success
policies, backoff limits per index.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
from collections.abc import Callable
from typing import Any

from tenantgpu.controlplane.conditions import get_condition, now_text, parse_time, set_condition
from tenantgpu.controlplane.owners import (
    JOB_TRACKING_FINALIZER,
    controller_of,
    finalizers,
    owned_by,
    pod_from_template,
    without_finalizer_patch,
)
from tenantgpu.controlplane.podstate import is_ready, is_terminal
from tenantgpu.controlplane.workqueue import Expectations, Key, WorkQueue, object_key, observe_event
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

log = logging.getLogger(__name__)

COMPONENT = "job-controller"
# kube's pod-failure backoff: 10 s, doubled per failure, at most 6 minutes.
BACKOFF_BASE_SECONDS = 10.0
BACKOFF_MAX_SECONDS = 360.0

REASON_COMPLETIONS = "CompletionsReached"
MESSAGE_COMPLETIONS = "Reached expected number of succeeded pods"
REASON_BACKOFF = "BackoffLimitExceeded"
MESSAGE_BACKOFF = "Job has reached the specified backoff limit"
REASON_DEADLINE = "DeadlineExceeded"
MESSAGE_DEADLINE = "Job was active longer than specified deadline"
# The `spec.managedBy` that means this controller (kube's batch.JobControllerName).
CONTROLLER_NAME = "kubernetes.io/job-controller"


def condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The Job's condition of this type, if it is True."""
    cond = get_condition(job.get("status") or {}, kind)
    return cond if cond is not None and cond.get("status") == "True" else None


def is_finished(job: dict[str, Any]) -> bool:
    return condition(job, "Complete") is not None or condition(job, "Failed") is not None


def finished_at(job: dict[str, Any]) -> float | None:
    for kind in ("Complete", "Failed"):
        cond = condition(job, kind)
        if cond is not None:
            return parse_time(cond.get("lastTransitionTime"))
    return None


def _ended_as(pod: dict[str, Any]) -> str | None:
    """ "succeeded" or "failed" once a pod counts for its Job; a deleted pod that had not succeeded
    counts as failed, as with podReplacementPolicy TerminatingOrFailed."""
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return "succeeded"
    if phase == "Failed" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "failed"
    return None


def _past_backoff_on_failure(spec: dict[str, Any], active: list[dict[str, Any]]) -> bool:
    """With restartPolicy OnFailure, failures are container restarts inside running pods: kube fails
    the Job once they reach backoffLimit (any restart when the limit is 0)."""
    if ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy") != "OnFailure":
        return False
    restarts = sum(
        int(cs.get("restartCount") or 0)
        for pod in active
        if (pod.get("status") or {}).get("phase") in ("Pending", "Running")
        for group in ("initContainerStatuses", "containerStatuses")
        for cs in (pod.get("status") or {}).get(group) or []
    )
    limit = int(spec.get("backoffLimit", 6))
    return restarts > 0 if limit == 0 else restarts >= limit


class JobController:
    """Runs every Job of one tenant to completion or failure."""

    def __init__(self, client: KubeClient, *, pods: Informer, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.pods = pods
        self.jobs = Informer(client, "jobs")
        self.clock = clock
        self.queue = WorkQueue("job-controller", self.sync)
        self._expected: dict[str, Expectations] = {}
        self._last_failure: dict[str, float] = {}
        self._tasks: set[asyncio.Future[None]] = set()

    async def start(self) -> None:
        self.jobs.add_handler(self._job_changed)
        self.pods.add_handler(self._pod_changed)
        await self.jobs.start()
        await self.pods.start()
        for job in self.jobs.items():
            self.queue.add(object_key(job))
        for pod in self.pods.items():
            self._pod_changed("ADDED", pod, None)
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()
        await self.jobs.stop()

    # --- events ----------------------------------------------------------------------------------

    def _job_changed(self, event: str, job: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event == "DELETED":
            uid = job["metadata"].get("uid", "")
            self._expected.pop(uid, None)
            self._last_failure.pop(uid, None)
        self.queue.add(object_key(job))

    def _pod_changed(self, event: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        ref = controller_of(pod)
        if ref is None or ref.get("kind") != "Job" or not str(ref.get("apiVersion", "")).startswith("batch/"):
            return
        namespace = pod["metadata"].get("namespace") or ""
        job = self.jobs.get(namespace, ref.get("name", ""))
        if job is not None and job["metadata"].get("uid") == ref.get("uid"):
            observe_event(self._expected, ref.get("uid", ""), event, pod, self.clock())
            self.queue.add((namespace, ref["name"]))
        elif self.jobs.synced and JOB_TRACKING_FINALIZER in finalizers(pod):
            # Its Job is gone: nothing will count it any more, so it must not keep the finalizer.
            task = asyncio.ensure_future(self._release_orphan(pod, ref))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _release_orphan(self, pod: dict[str, Any], ref: dict[str, Any]) -> None:
        namespace = pod["metadata"].get("namespace") or ""
        try:
            job = await self.client.get("jobs", ref.get("name", ""), namespace)
            if job["metadata"].get("uid") == ref.get("uid"):
                return
        except ApiError as err:
            if err.code != 404:
                return
        await self._remove_finalizer(pod)

    async def _remove_finalizer(self, pod: dict[str, Any]) -> bool:
        """Drop the job-tracking finalizer; False if the pod still holds it (the patch was refused)."""
        meta = pod["metadata"]
        try:
            await self.client.patch(
                "pods",
                meta["name"],
                without_finalizer_patch(pod, JOB_TRACKING_FINALIZER),
                meta.get("namespace"),
                patch_type="json",
            )
        except ApiError as err:
            return err.code == 404
        return True

    # --- one Job -----------------------------------------------------------------------------------

    async def sync(self, key: Key) -> None:
        job = self.jobs.get(*key)
        if job is None:
            return
        if (job.get("spec") or {}).get("managedBy") not in (None, CONTROLLER_NAME):
            if is_finished(job) and not job["metadata"].get("deletionTimestamp"):
                await self._expire(job, key)
            return
        uid = job["metadata"]["uid"]
        pods = owned_by(job, self.pods.items())
        if job["metadata"].get("deletionTimestamp") or is_finished(job):
            # A finished or deleted Job counts nothing more: its pods must not keep its finalizer.
            for pod in pods:
                if JOB_TRACKING_FINALIZER in finalizers(pod):
                    await self._remove_finalizer(pod)
            if not job["metadata"].get("deletionTimestamp"):
                await self._expire(job, key)
            return

        job = await self._count_ended(job, pods)
        status = copy.deepcopy(job.get("status") or {})
        now = self.clock()
        spec = job.get("spec") or {}
        active = [p for p in pods if not is_terminal(p) and not p["metadata"].get("deletionTimestamp")]
        terminating = [p for p in pods if not is_terminal(p) and p["metadata"].get("deletionTimestamp")]
        seen = {p["metadata"]["name"] for p in pods}
        expected = self._expected.setdefault(uid, Expectations()).count(seen, now)
        succeeded = int(status.get("succeeded") or 0)
        failed = int(status.get("failed") or 0)
        completions = spec.get("completions")
        parallelism = int(spec.get("parallelism") or 0)
        events: list[tuple[str, str, str]] = []

        if spec.get("suspend"):
            for pod in active:
                await self._delete_pod(pod, events)
            active = []
            if condition(job, "Suspended") is None:
                set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended")
                status.pop("startTime", None)
                events.append(("Normal", "Suspended", "Job suspended"))
        else:
            if condition(job, "Suspended") is not None:
                set_condition(status, "Suspended", "False", "JobResumed", "Job resumed")
                events.append(("Normal", "Resumed", "Job resumed"))
            status.setdefault("startTime", now_text())

        failure = condition(job, "FailureTarget")
        success = condition(job, "SuccessCriteriaMet")
        if not spec.get("suspend") and failure is None and success is None:
            deadline = spec.get("activeDeadlineSeconds")
            started = parse_time(status.get("startTime"))
            if failed > int(spec.get("backoffLimit", 6)) or _past_backoff_on_failure(spec, active):
                failure = {"reason": REASON_BACKOFF, "message": MESSAGE_BACKOFF}
            elif deadline is not None and started is not None and now - started >= deadline:
                failure = {"reason": REASON_DEADLINE, "message": MESSAGE_DEADLINE}
            elif (completions is not None and succeeded >= completions) or (
                completions is None and succeeded > 0 and not active and not expected
            ):
                success = {"reason": REASON_COMPLETIONS, "message": MESSAGE_COMPLETIONS}
            if failure is not None:
                set_condition(status, "FailureTarget", "True", failure["reason"], failure["message"])
                events.append(("Warning", failure["reason"], failure["message"]))
            elif success is not None:
                set_condition(status, "SuccessCriteriaMet", "True", success["reason"], success["message"])
            elif deadline is not None and started is not None:
                self.queue.add_after(key, started + deadline - now + 0.05)

        if failure is not None or success is not None:
            for pod in active:
                await self._delete_pod(pod, events)
            active = []
            if not terminating:
                if failure is not None:
                    set_condition(status, "Failed", "True", failure["reason"], failure["message"])
                else:
                    set_condition(status, "Complete", "True", success["reason"], success["message"])
                    status["completionTime"] = now_text()
                    events.append(("Normal", "Completed", "Job completed"))
        elif not spec.get("suspend"):
            wanted = parallelism
            if completions is not None:
                wanted = min(parallelism, max(completions - succeeded, 0))
            missing = wanted - len(active) - expected
            delay = self._backoff_delay(uid, failed, now)
            if missing > 0 and delay > 0:
                self.queue.add_after(key, delay)
            elif missing > 0:
                for _ in range(missing):
                    await self._create_pod(job, events)
                expected = self._expected[uid].count(seen, now)

        counts = {"active": len(active) + expected, "succeeded": succeeded, "failed": failed}
        for name, count in counts.items():
            # int32 fields with omitempty in kube's JobStatus: a zero is not written. `ready` and
            # `terminating` are pointers, so the Job controller's 0 shows.
            if count:
                status[name] = count
            else:
                status.pop(name, None)
        status["ready"] = sum(1 for p in active if is_ready(p))
        status["terminating"] = len(terminating)
        status.setdefault("uncountedTerminatedPods", {})
        if status != (job.get("status") or {}):
            await self._write_status(job, status)
        for kind, reason, message in events:
            with contextlib.suppress(ApiError):
                await self.client.create_event(
                    job, reason=reason, message=message, type=kind, component=COMPONENT
                )
        if condition({"status": status}, "Complete") or condition({"status": status}, "Failed"):
            self.queue.add(key)  # release the finished pods' finalizers and arm the TTL

    def _backoff_delay(self, uid: str, failed: int, now: float) -> float:
        last = self._last_failure.get(uid)
        if not failed or last is None:
            return 0.0
        wait = min(BACKOFF_BASE_SECONDS * 2 ** (failed - 1), BACKOFF_MAX_SECONDS)
        return last + wait - now

    async def _count_ended(self, job: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any]:
        """Record ended pods in uncountedTerminatedPods, drop their finalizers, then count them;
        returns the Job as last written."""
        status = copy.deepcopy(job.get("status") or {})
        uncounted = status.setdefault("uncountedTerminatedPods", {})
        recorded = {bucket: set(uncounted.get(bucket) or []) for bucket in ("succeeded", "failed")}
        fresh = False
        for pod in pods:
            outcome = _ended_as(pod)
            pod_uid = pod["metadata"]["uid"]
            if outcome is None or JOB_TRACKING_FINALIZER not in finalizers(pod):
                continue
            if pod_uid not in recorded["succeeded"] and pod_uid not in recorded["failed"]:
                recorded[outcome].add(pod_uid)
                fresh = True
                if outcome == "failed":
                    self._last_failure[job["metadata"]["uid"]] = self.clock()
        if fresh:
            uncounted.update({b: sorted(v) for b, v in recorded.items() if v})
            job = await self._write_status(job, status)
        if not recorded["succeeded"] and not recorded["failed"]:
            return job
        still_held = set()
        for pod in pods:
            pod_uid = pod["metadata"]["uid"]
            if (
                JOB_TRACKING_FINALIZER in finalizers(pod)
                and (pod_uid in recorded["succeeded"] or pod_uid in recorded["failed"])
                and not await self._remove_finalizer(pod)
            ):
                still_held.add(pod_uid)
        status = copy.deepcopy(job.get("status") or {})
        uncounted = status.setdefault("uncountedTerminatedPods", {})
        for bucket in ("succeeded", "failed"):
            done = recorded[bucket] - still_held
            status[bucket] = int(status.get(bucket) or 0) + len(done)
            left = sorted(recorded[bucket] & still_held)
            if left:
                uncounted[bucket] = left
            else:
                uncounted.pop(bucket, None)
        return await self._write_status(job, status)

    async def _write_status(self, job: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        body = {**job, "status": status}
        body.setdefault("apiVersion", "batch/v1")
        body.setdefault("kind", "Job")
        written = await self.client.update_status("jobs", body)
        # Later steps of this sync build on what was written, not on the informer's older copy.
        return written

    async def _create_pod(self, job: dict[str, Any], events: list[tuple[str, str, str]]) -> None:
        body = pod_from_template(
            {**job, "apiVersion": "batch/v1", "kind": "Job"}, finalizer=JOB_TRACKING_FINALIZER
        )
        try:
            pod = await self.client.create("pods", body)
        except ApiError as err:
            with contextlib.suppress(ApiError):
                await self.client.create_event(
                    job, reason="FailedCreate", message=f"Error creating: {err.message}", type="Warning",
                    component=COMPONENT,
                )  # fmt: skip
            raise
        name = pod["metadata"]["name"]
        self._expected.setdefault(job["metadata"]["uid"], Expectations()).expect(name, self.clock())
        events.append(("Normal", "SuccessfulCreate", f"Created pod: {name}"))

    async def _delete_pod(self, pod: dict[str, Any], events: list[tuple[str, str, str]]) -> None:
        meta = pod["metadata"]
        # A pod the controller itself removes is not counted: it lets go of the finalizer first.
        if JOB_TRACKING_FINALIZER in finalizers(pod):
            await self._remove_finalizer(pod)
        try:
            await self.client.delete("pods", meta["name"], meta.get("namespace"), uid=meta.get("uid"))
        except ApiError as err:
            if err.code != 404:
                raise
            return
        events.append(("Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}"))

    async def _expire(self, job: dict[str, Any], key: Key) -> None:
        """ttl-after-finished: delete a finished Job (and, in the foreground, its pods) once its TTL ends."""
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        ended = finished_at(job)
        if ttl is None or ended is None:
            return
        left = ended + ttl - self.clock()
        if left > 0:
            self.queue.add_after(key, left + 0.05)
            return
        meta = job["metadata"]
        with contextlib.suppress(ApiError):
            await self.client.delete(
                "jobs", meta["name"], meta.get("namespace"), uid=meta["uid"], propagation_policy="Foreground"
            )
