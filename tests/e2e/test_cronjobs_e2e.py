"""batch/v1 CronJobs: the API (kubectl create/get, validation) and the CronJob controller beside a tenant
API server, driven by a clock the test moves, so a schedule's minutes pass at once.

Only the CronJob controller and its garbage collector run here: the test finishes a Job by writing its
status, as the Job controller would. What kube's controller does that is checked (kubernetes/kubernetes
pkg/controller/cronjob, read for these facts): a Job per scheduled time named `<cronjob>-<minutes since
the epoch>`, annotated `batch.kubernetes.io/cronjob-scheduled-timestamp`; after missed times only the
most recent is started; Forbid skips with `JobAlreadyActive`, Replace deletes the running Job first;
finished Jobs leave `status.active` with `SawCompletedJob` and beyond the history limits are deleted.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer, wait_for

from tenantgpu.controlplane.cronjob import SCHEDULED_TIMESTAMP, CronJobController
from tenantgpu.controlplane.garbagecollector import GarbageCollector
from tenantgpu.kubeclient import Informer, KubeClient

pytestmark = pytest.mark.slow

NS = "default"


class Clock:
    """Real time plus an offset the test moves forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return dt.datetime.now(dt.UTC).timestamp() + self.offset


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(autouse=True)
def real_time_at_start(clock: Clock) -> None:
    """Each test starts at the real time: a new CronJob's creationTimestamp is the server's clock, and a
    clock left ahead by an earlier test would make its first run due at once."""
    clock.offset = 0.0


@pytest.fixture(scope="module")
def controller(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, clock: Clock
) -> Iterator[CronJobController]:
    async def up() -> tuple[CronJobController, GarbageCollector]:
        client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
        running = CronJobController(client, jobs=Informer(client, "jobs"), clock=clock)
        collector = GarbageCollector(client, owners=running.cron_jobs, dependents=running.jobs)
        await running.start()
        await collector.start()
        return running, collector

    running, collector = background_loop.run(up())
    yield running

    async def down() -> None:
        await collector.stop()
        await running.stop()
        await running.jobs.stop()
        await running.client.close()

    background_loop.run(down())


@pytest.fixture(scope="module")
def batch(apiserver: RunningAPIServer, controller: CronJobController) -> kubernetes.client.BatchV1Api:
    return kubernetes.client.BatchV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))


@pytest.fixture(scope="module")
def core(apiserver: RunningAPIServer) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))


def cron_job(name: str, schedule: str = "*/5 * * * *", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": schedule,
            "jobTemplate": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
                        }
                    }
                },
            },
            **spec,
        },
    }


def jobs_of(batch: kubernetes.client.BatchV1Api, name: str) -> list[Any]:
    jobs = batch.list_namespaced_job(NS, label_selector=f"app={name}").items
    return sorted((j for j in jobs if not j.metadata.deletion_timestamp), key=lambda j: j.metadata.name)


def advance_to_next_run(
    clock: Clock,
    controller: CronJobController,
    background_loop: BackgroundLoop,
    name: str,
    minutes: int = 5,
    skipped: int = 0,
) -> dt.datetime:
    """Move the clock, in one step, just past the next multiple of `minutes` (after `skipped` more
    scheduled times) and let the controller look."""
    now = dt.datetime.fromtimestamp(clock(), dt.UTC)
    later = now + dt.timedelta(minutes=minutes * skipped)
    boundary = later.replace(second=0, microsecond=0) + dt.timedelta(minutes=minutes - later.minute % minutes)
    clock.offset += (boundary - now).total_seconds() + 1
    background_loop.loop.call_soon_threadsafe(controller.queue.add, (NS, name))
    return boundary


def finish(batch: kubernetes.client.BatchV1Api, job: Any, condition: str = "Complete") -> None:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status: dict[str, Any] = {
        "startTime": stamp,
        "conditions": [{"type": condition, "status": "True", "lastTransitionTime": stamp}],
    }
    if condition == "Complete":
        status["completionTime"] = stamp
        status["succeeded"] = 1
    else:
        status["failed"] = 1
    batch.patch_namespaced_job_status(job.metadata.name, NS, {"status": status})


def events_of(core: kubernetes.client.CoreV1Api, name: str) -> list[tuple[str, str]]:
    items = core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}").items
    return [(e.reason, e.message) for e in items]


def test_a_run_is_created_at_each_scheduled_time(
    batch: kubernetes.client.BatchV1Api,
    core: kubernetes.client.CoreV1Api,
    clock: Clock,
    controller: CronJobController,
    background_loop: BackgroundLoop,
) -> None:
    batch.create_namespaced_cron_job(NS, cron_job("nightly"))
    created = batch.read_namespaced_cron_job("nightly", NS)
    assert created.spec.concurrency_policy == "Allow" and created.spec.successful_jobs_history_limit == 3
    assert created.spec.failed_jobs_history_limit == 1 and created.spec.suspend is False
    assert jobs_of(batch, "nightly") == []  # nothing is due at creation

    due = advance_to_next_run(clock, controller, background_loop, "nightly")
    [job] = wait_for("the first run", lambda: jobs_of(batch, "nightly") or None)
    assert job.metadata.name == f"nightly-{int(due.timestamp()) // 60}"
    assert job.metadata.annotations[SCHEDULED_TIMESTAMP] == due.strftime("%Y-%m-%dT%H:%M:%SZ")
    [owner] = job.metadata.owner_references
    assert (owner.kind, owner.name, owner.controller) == ("CronJob", "nightly", True)
    status = wait_for(
        "status.active",
        lambda: (
            batch.read_namespaced_cron_job("nightly", NS).status.active
            and batch.read_namespaced_cron_job("nightly", NS).status
        ),
    )
    assert [ref.name for ref in status.active] == [job.metadata.name]
    assert status.last_schedule_time == due
    # events are recorded after the status is written
    wait_for(
        "SuccessfulCreate",
        lambda: (
            ("SuccessfulCreate", f"Created job {job.metadata.name}") in events_of(core, "nightly") or None
        ),
    )

    finish(batch, job)
    status = wait_for(
        "the finished run leaves active",
        lambda: (
            (s := batch.read_namespaced_cron_job("nightly", NS).status).last_successful_time
            and not s.active
            and s
        ),
    )
    assert status.last_successful_time is not None
    wait_for(
        "SawCompletedJob",
        lambda: (
            any(r == "SawCompletedJob" and "condition: Complete" in m for r, m in events_of(core, "nightly"))
            or None
        ),
    )


def test_after_missed_times_only_the_latest_runs(
    batch: kubernetes.client.BatchV1Api,
    clock: Clock,
    controller: CronJobController,
    background_loop: BackgroundLoop,
) -> None:
    batch.create_namespaced_cron_job(NS, cron_job("missed"))
    # three scheduled times pass while the controller does not look
    due = advance_to_next_run(clock, controller, background_loop, "missed", skipped=3)
    [job] = wait_for("one run", lambda: jobs_of(batch, "missed") or None)
    assert job.metadata.name == f"missed-{int(due.timestamp()) // 60}"


def test_forbid_skips_while_a_run_is_active_and_replace_replaces_it(
    batch: kubernetes.client.BatchV1Api,
    core: kubernetes.client.CoreV1Api,
    clock: Clock,
    controller: CronJobController,
    background_loop: BackgroundLoop,
) -> None:
    batch.create_namespaced_cron_job(NS, cron_job("forbid", concurrencyPolicy="Forbid"))
    batch.create_namespaced_cron_job(NS, cron_job("replace", concurrencyPolicy="Replace"))
    for name in ("forbid", "replace"):
        advance_to_next_run(clock, controller, background_loop, name)
    [first_forbid] = wait_for("forbid's first run", lambda: jobs_of(batch, "forbid") or None)
    [first_replace] = wait_for("replace's first run", lambda: jobs_of(batch, "replace") or None)

    advance_to_next_run(clock, controller, background_loop, "forbid")
    background_loop.loop.call_soon_threadsafe(controller.queue.add, (NS, "replace"))
    wait_for(
        "JobAlreadyActive", lambda: any(r == "JobAlreadyActive" for r, _ in events_of(core, "forbid")) or None
    )
    assert [j.metadata.name for j in jobs_of(batch, "forbid")] == [first_forbid.metadata.name]
    [second] = wait_for(
        "the replacement",
        lambda: (
            [j for j in jobs_of(batch, "replace") if j.metadata.name != first_replace.metadata.name] or None
        ),
    )
    wait_for(
        "the replaced run is gone",
        lambda: [j.metadata.name for j in jobs_of(batch, "replace")] == [second.metadata.name] or None,
    )
    wait_for(
        "SuccessfulDelete",
        lambda: (
            ("SuccessfulDelete", f"Deleted job {first_replace.metadata.name}") in events_of(core, "replace")
            or None
        ),
    )


def test_history_limits_suspend_and_cascading_delete(
    batch: kubernetes.client.BatchV1Api,
    clock: Clock,
    controller: CronJobController,
    background_loop: BackgroundLoop,
    kubectl: Kubectl,
) -> None:
    batch.create_namespaced_cron_job(
        NS, cron_job("keep-one", successfulJobsHistoryLimit=1, failedJobsHistoryLimit=0)
    )
    names = []
    for _ in range(3):
        advance_to_next_run(clock, controller, background_loop, "keep-one")
        job = wait_for(
            "a run", lambda: [j for j in jobs_of(batch, "keep-one") if j.metadata.name not in names] or None
        )[0]
        names.append(job.metadata.name)
        finish(batch, job, "Complete" if len(names) < 3 else "Failed")
    # the last successful run stays; the older one and the failed one (limit 0) go
    wait_for(
        "history trimmed", lambda: [j.metadata.name for j in jobs_of(batch, "keep-one")] == [names[1]] or None
    )

    batch.patch_namespaced_cron_job("keep-one", NS, {"spec": {"suspend": True}})
    # the controller acts on what its watch has shown: let the suspension reach it before the clock moves
    wait_for(
        "the controller to see the suspension",
        lambda: ((controller.cron_jobs.get(NS, "keep-one") or {}).get("spec") or {}).get("suspend") or None,
    )
    advance_to_next_run(clock, controller, background_loop, "keep-one")
    table = kubectl("get", "cronjob", "keep-one").stdout
    assert table.split("\n")[0].split() == [
        "NAME",
        "SCHEDULE",
        "TIMEZONE",
        "SUSPEND",
        "ACTIVE",
        "LAST",
        "SCHEDULE",
        "AGE",
    ]
    assert "True" in table.split("\n")[1] or "true" in table.split("\n")[1]
    assert [j.metadata.name for j in jobs_of(batch, "keep-one")] == [names[1]]

    kubectl("delete", "cronjob", "keep-one")  # kubectl deletes in the background: the Jobs follow
    wait_for("the Jobs are collected", lambda: jobs_of(batch, "keep-one") == [] or None)


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_kubectl_creates_and_shows_cronjobs_and_refuses_bad_ones(kubectl: Kubectl, version: str) -> None:
    name = f"cli-{version.replace('.', '')}"
    # kubectl 1.33 sends this create as protobuf
    kubectl(
        "create",
        "cronjob",
        name,
        "--image=busybox",
        "--schedule=0 9 * * 1-5",
        "--",
        "echo",
        "hi",
        version=version,
    )
    wide = kubectl("get", "cj", name, "-o", "wide", version=version).stdout.splitlines()
    assert wide[1].split()[:5] == [name, "0", "9", "*", "*"]
    assert "<none>" in wide[1] and "busybox" in wide[1]
    body = json.loads(kubectl("get", "cronjob", name, "-o", "json", version=version).stdout)
    container = body["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["echo", "hi"]
    assert body["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"

    bad = kubectl(
        "create",
        "cronjob",
        f"{name}-bad",
        "--image=busybox",
        "--schedule=61 * * * *",
        version=version,
        check=False,
    )
    assert bad.returncode == 1 and (
        'spec.schedule: Invalid value: "61 * * * *": end of range (61) above maximum (59): 61' in bad.stderr
    )
    fields = kubectl(
        "create",
        "cronjob",
        f"{name}-four",
        "--image=busybox",
        "--schedule=* * * *",
        version=version,
        check=False,
    )
    assert "expected exactly 5 fields, found 4: [* * * *]" in fields.stderr
    tz = kubectl(
        "create",
        "cronjob",
        f"{name}-tz",
        "--image=busybox",
        "--schedule=TZ=UTC 0 9 * * *",
        version=version,
        check=False,
    )
    assert "cannot use TZ or CRON_TZ in schedule, use timeZone field instead" in tz.stderr

    # a Job made from the CronJob's template runs at once, as kubectl's --from does on a cluster
    kubectl("create", "job", f"{name}-now", f"--from=cronjob/{name}", version=version)
    job = json.loads(kubectl("get", "job", f"{name}-now", "-o", "json", version=version).stdout)
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]


def test_time_zone_and_name_length_are_validated(batch: kubernetes.client.BatchV1Api) -> None:
    with pytest.raises(kubernetes.client.ApiException) as zone:
        batch.create_namespaced_cron_job(NS, cron_job("mars", timeZone="Mars/Base"))
    assert (
        zone.value.status == 422
        and 'spec.timeZone: Invalid value: \\"Mars/Base\\": unknown time zone Mars/Base' in zone.value.body
    )
    with pytest.raises(kubernetes.client.ApiException) as long_name:
        batch.create_namespaced_cron_job(NS, cron_job("n" * 53))
    assert "must be no more than 52 characters" in long_name.value.body
    batch.create_namespaced_cron_job(NS, cron_job("berlin", "0 9 * * *", timeZone="Europe/Berlin"))
