"""The CronJob controller of kube-controller-manager (its second version, the only one since 1.23).

At each scheduled time of a CronJob (`spec.schedule` in `spec.timeZone`, UTC when unset) it creates a
Job `<cronjob>-<scheduled minute since the epoch>` from `spec.jobTemplate`, controlled by the CronJob
and annotated with `batch.kubernetes.io/cronjob-scheduled-timestamp`. It keeps `status.active`,
`lastScheduleTime` and `lastSuccessfulTime`, applies `concurrencyPolicy` (Allow, Forbid, Replace),
`startingDeadlineSeconds` and `suspend`, and deletes finished Jobs beyond the history limits. A missed
run is started late, once, as kube does; a CronJob created after a scheduled time does not run it.
Events and their reasons are kube's.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

from tenantgpu.apiserver.cronschedule import ScheduleError, parse_schedule, time_zone_error, zone
from tenantgpu.controlplane.conditions import parse_time
from tenantgpu.controlplane.job import condition, is_finished
from tenantgpu.controlplane.owners import controller_of, owned_by, owner_reference
from tenantgpu.controlplane.workqueue import Key, WorkQueue, object_key
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

log = logging.getLogger(__name__)

COMPONENT = "cronjob-controller"
SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
# kube gives up counting missed runs past this many and asks for a starting deadline.
MAX_MISSED = 100
Event = tuple[str, str, str]


def _format(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def job_name(cron_job_name: str, scheduled: dt.datetime) -> str:
    """`<cronjob>-<minutes since the epoch>`: one name per scheduled time, so a run is created once."""
    return f"{cron_job_name}-{int(scheduled.timestamp()) // 60}"


def _reference(job: dict[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": meta["name"],
        "namespace": meta.get("namespace", ""),
        "uid": meta["uid"],
        "resourceVersion": meta.get("resourceVersion", ""),
    }


def _start_time(job: dict[str, Any]) -> float:
    return (
        parse_time((job.get("status") or {}).get("startTime"))
        or parse_time(job["metadata"].get("creationTimestamp"))
        or 0.0
    )


class CronJobController:
    """Runs every CronJob of one tenant on its schedule."""

    def __init__(self, client: KubeClient, *, jobs: Informer, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.jobs = jobs
        self.cron_jobs = Informer(client, "cronjobs")
        self.clock = clock
        self.queue = WorkQueue("cronjob-controller", self.sync)

    async def start(self) -> None:
        self.cron_jobs.add_handler(self._cron_job_changed)
        self.jobs.add_handler(self._job_changed)
        await self.cron_jobs.start()
        await self.jobs.start()
        for cron_job in self.cron_jobs.items():
            self.queue.add(object_key(cron_job))
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()
        await self.cron_jobs.stop()

    def _cron_job_changed(self, event: str, cron_job: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event != "DELETED":
            self.queue.add(object_key(cron_job))

    def _job_changed(self, event: str, job: dict[str, Any], old: dict[str, Any] | None) -> None:
        ref = controller_of(job)
        if ref is not None and ref.get("kind") == "CronJob":
            self.queue.add((job["metadata"].get("namespace") or "", ref.get("name", "")))

    # --- one CronJob -------------------------------------------------------------------------------

    async def sync(self, key: Key) -> None:
        cron_job = self.cron_jobs.get(*key)
        if cron_job is None:
            return
        cron_job = {**cron_job, "apiVersion": "batch/v1", "kind": "CronJob"}
        events: list[Event] = []
        status = copy.deepcopy(cron_job.get("status") or {})
        children = owned_by(cron_job, self.jobs.items())
        self._track_children(status, children, events)
        delay: float | None = None
        if not cron_job["metadata"].get("deletionTimestamp"):
            delay = await self._run_schedule(cron_job, status, children, events)
            await self._clean_up_history(cron_job, status, children, events)
        if status != (cron_job.get("status") or {}):
            with contextlib.suppress(ApiError):  # a conflict: the watch brings the CronJob back
                await self.client.update_status("cronjobs", {**cron_job, "status": status})
        for kind, reason, message in events:
            with contextlib.suppress(ApiError):
                await self.client.create_event(
                    cron_job, reason=reason, message=message, type=kind, component=COMPONENT
                )
        if delay is not None:
            self.queue.add_after(key, delay)

    def _track_children(
        self, status: dict[str, Any], children: list[dict[str, Any]], events: list[Event]
    ) -> None:
        """`status.active` lists the unfinished Jobs; a finished one is reported and may set lastSuccessfulTime."""
        by_uid = {job["metadata"]["uid"]: job for job in children}
        active = []
        for ref in status.get("active") or []:
            job = by_uid.get(ref.get("uid"))
            if job is None:
                events.append(("Normal", "MissingJob", f"Active job went missing: {ref.get('name')}"))
            elif is_finished(job):
                state = "Complete" if condition(job, "Complete") else "Failed"
                events.append(
                    ("Normal", "SawCompletedJob", f"Saw completed job: {ref.get('name')}, condition: {state}")
                )
            else:
                active.append(ref)
        listed = {ref.get("uid") for ref in active}
        for job in children:
            if not is_finished(job) and job["metadata"]["uid"] not in listed:
                # e.g. `kubectl create job --from=cronjob/…`: kube reports it and leaves it out of active.
                name = job["metadata"]["name"]
                events.append(
                    (
                        "Warning",
                        "UnexpectedJob",
                        f"Saw a job that the controller did not create or forgot: {name}",
                    )
                )
        for job in children:
            completed = condition(job, "Complete")
            if completed is not None:
                finished = (job.get("status") or {}).get("completionTime") or completed.get(
                    "lastTransitionTime"
                )
                last = status.get("lastSuccessfulTime")
                if finished and (last is None or (parse_time(finished) or 0) > (parse_time(last) or 0)):
                    status["lastSuccessfulTime"] = finished
        if active:
            status["active"] = active
        else:
            status.pop("active", None)

    async def _run_schedule(
        self,
        cron_job: dict[str, Any],
        status: dict[str, Any],
        children: list[dict[str, Any]],
        events: list[Event],
    ) -> float | None:
        """Starts the run that is due, if any; returns the seconds until the next scheduled time."""
        spec = cron_job.get("spec") or {}
        zone_name = spec.get("timeZone")
        if zone_name is not None and time_zone_error(zone_name):
            events.append(
                (
                    "Warning",
                    "UnknownTimeZone",
                    f"invalid timeZone: {zone_name!r}: {time_zone_error(zone_name)}",
                )
            )
            return None
        try:
            schedule = parse_schedule(spec.get("schedule") or "")
        except ScheduleError as error:
            events.append(
                (
                    "Warning",
                    "UnparseableSchedule",
                    f"unparseable schedule: {spec.get('schedule')!r} : {error}",
                )
            )
            return None
        if spec.get("suspend"):
            return None
        tz = zone(zone_name)
        now = dt.datetime.fromtimestamp(self.clock(), dt.UTC)
        since = parse_time(status.get("lastScheduleTime")) or parse_time(
            cron_job["metadata"].get("creationTimestamp")
        )
        earliest = dt.datetime.fromtimestamp(since or self.clock(), dt.UTC)
        deadline = spec.get("startingDeadlineSeconds")
        if deadline is not None:
            earliest = max(earliest, now - dt.timedelta(seconds=deadline))
        due, missed = None, 0
        moment = schedule.next_after(earliest, tz)
        while moment <= now:
            due, missed = moment, missed + 1
            moment = schedule.next_after(moment, tz)
        wait = (moment - now).total_seconds() + 0.1
        if due is None:
            return wait
        if missed > MAX_MISSED:
            events.append(
                (
                    "Warning",
                    "TooManyMissedTimes",
                    f"too many missed start times: {missed}. Set or decrease .spec.startingDeadlineSeconds "
                    "or check clock skew",
                )
            )
        name = job_name(cron_job["metadata"]["name"], due)
        if any(ref.get("name") == name for ref in status.get("active") or []) or any(
            job["metadata"]["name"] == name for job in children
        ):
            return wait  # this run exists already
        active = status.get("active") or []
        policy = spec.get("concurrencyPolicy", "Allow")
        if policy == "Forbid" and active:
            events.append(
                (
                    "Normal",
                    "JobAlreadyActive",
                    "Not starting job because prior execution is running and concurrency policy is Forbid",
                )
            )
            return wait
        if policy == "Replace":
            for ref in list(active):
                if await self._delete_job(cron_job, ref.get("name", ""), events):
                    active.remove(ref)
            if active:
                status["active"] = active
            else:
                status.pop("active", None)
        job = await self._create_job(cron_job, due, tz, events)
        if job is not None:
            status.setdefault("active", []).append(_reference(job))
            status["lastScheduleTime"] = _format(due)
        return wait

    async def _create_job(
        self, cron_job: dict[str, Any], scheduled: dt.datetime, tz: dt.tzinfo, events: list[Event]
    ) -> dict[str, Any] | None:
        template = copy.deepcopy((cron_job.get("spec") or {}).get("jobTemplate") or {})
        template_meta = template.get("metadata") or {}
        meta = cron_job["metadata"]
        name = job_name(meta["name"], scheduled)
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": meta.get("namespace"),
                "labels": template_meta.get("labels") or {},
                "annotations": {
                    **(template_meta.get("annotations") or {}),
                    SCHEDULED_TIMESTAMP: scheduled.astimezone(tz).isoformat().replace("+00:00", "Z"),
                },
                "ownerReferences": [owner_reference(cron_job)],
            },
            "spec": template.get("spec") or {},
        }
        try:
            job = await self.client.create("jobs", body, meta.get("namespace"))
        except ApiError as error:
            if error.code == 409:
                return None  # created by an earlier sync whose result the watch has not shown yet
            events.append(("Warning", "FailedCreate", f"Error creating job: {error.message}"))
            return None
        events.append(("Normal", "SuccessfulCreate", f"Created job {name}"))
        return job

    async def _delete_job(self, cron_job: dict[str, Any], name: str, events: list[Event]) -> bool:
        try:
            await self.client.delete(
                "jobs", name, cron_job["metadata"].get("namespace"), propagation_policy="Background"
            )
        except ApiError as error:
            if error.code != 404:
                events.append(("Warning", "FailedDelete", f"Deleted job: {error}"))
                return False
        events.append(("Normal", "SuccessfulDelete", f"Deleted job {name}"))
        return True

    async def _clean_up_history(
        self,
        cron_job: dict[str, Any],
        status: dict[str, Any],
        children: list[dict[str, Any]],
        events: list[Event],
    ) -> None:
        spec = cron_job.get("spec") or {}
        for state, limit_field, default in (
            ("Complete", "successfulJobsHistoryLimit", 3),
            ("Failed", "failedJobsHistoryLimit", 1),
        ):
            limit = spec.get(limit_field, default)
            finished = sorted(
                (j for j in children if condition(j, state) and not j["metadata"].get("deletionTimestamp")),
                key=_start_time,
            )
            for job in finished[: max(len(finished) - limit, 0)]:
                await self._delete_job(cron_job, job["metadata"]["name"], events)
