"""batch/v1 Jobs and the garbage collector beside a tenant API server, through kubectl and the
official client.

No kubelet runs here: the test ends each pod by writing its status, as a kubelet would, so that
what is checked is the Job controller's counting and conditions and what a delete does to the pods.
The running lab's Jobs (GPU pods whose command ends) are in test_hami_e2e.py.
"""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest
from apiserver_harness import RunningAPIServer, wait_for

from tenantgpu.controlplane import ControlPlaneServices

pytestmark = pytest.mark.slow

NS = "default"


@pytest.fixture(scope="module")
def api(apiserver: RunningAPIServer, services: ControlPlaneServices) -> kubernetes.client.ApiClient:
    return kubernetes.config.new_client_from_config(str(apiserver.kubeconfig))


@pytest.fixture(scope="module")
def core(api: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api)


@pytest.fixture(scope="module")
def batch(api: kubernetes.client.ApiClient) -> kubernetes.client.BatchV1Api:
    return kubernetes.client.BatchV1Api(api)


def job_body(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
                }
            },
            **spec,
        },
    }


def job_pods(core: kubernetes.client.CoreV1Api, job: str) -> list[Any]:
    return core.list_namespaced_pod(NS, label_selector=f"batch.kubernetes.io/job-name={job}").items


def end_pod(core: kubernetes.client.CoreV1Api, name: str, phase: str) -> None:
    """What the kubelet writes when the pod's container exits."""
    code = 0 if phase == "Succeeded" else 1
    core.patch_namespaced_pod_status(
        name,
        NS,
        {
            "status": {
                "phase": phase,
                "containerStatuses": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {
                            "terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}
                        },
                    }
                ],
            }
        },
    )


def live(pods: list[Any]) -> list[Any]:
    return [
        p for p in pods if p.status.phase not in ("Succeeded", "Failed") and not p.metadata.deletion_timestamp
    ]


def test_a_job_gets_kube_defaults_a_generated_selector_and_its_table_columns(
    batch: kubernetes.client.BatchV1Api, kubectl: Any
) -> None:
    created = batch.create_namespaced_job(NS, job_body("defaults"))
    spec = created.spec
    assert (spec.completions, spec.parallelism, spec.backoff_limit) == (1, 1, 6)
    assert (spec.completion_mode, spec.suspend, spec.pod_replacement_policy) == (
        "NonIndexed",
        False,
        "TerminatingOrFailed",
    )
    assert created.status is not None and created.status.active is None  # `status: {}`, as kube returns it
    template = created.spec.template.spec
    # SetDefaults_PodSpec reaches the template; the admission plugins' defaults are for pods only.
    assert (template.dns_policy, template.termination_grace_period_seconds) == ("ClusterFirst", 30)
    assert template.tolerations is None and template.service_account_name is None
    assert template.priority is None
    uid = created.metadata.uid
    assert spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    labels = spec.template.metadata.labels
    assert labels["batch.kubernetes.io/job-name"] == "defaults" and labels["controller-uid"] == uid
    table = kubectl("get", "jobs", "defaults").stdout.splitlines()
    assert table[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert table[1].split()[:3] == ["defaults", "Running", "0/1"]
    wide = kubectl("get", "job", "defaults", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-3:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert f"batch.kubernetes.io/controller-uid={uid}" in wide[1]


def test_kubectl_create_job_runs_a_pod_that_completes_the_job(
    core: kubernetes.client.CoreV1Api, kubectl: Any
) -> None:
    kubectl("create", "job", "once", "--image=busybox", "--", "nvidia-smi")
    pods = wait_for("the job's pod", lambda: job_pods(core, "once"))
    pod = pods[0]
    assert pod.metadata.name.startswith("once-")
    assert pod.metadata.finalizers == ["batch.kubernetes.io/job-tracking"]
    owner = pod.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller, owner.block_owner_deletion) == (
        "Job",
        "once",
        True,
        True,
    )
    end_pod(core, pod.metadata.name, "Succeeded")
    kubectl("wait", "--for=condition=complete", "job/once", "--timeout=20s")
    job = json.loads(kubectl("get", "job", "once", "-o", "json").stdout)
    # kube's JobStatus leaves zero counts out (int32, omitempty); ready and terminating are pointers
    assert job["status"]["succeeded"] == 1 and "active" not in job["status"] and "failed" not in job["status"]
    assert (job["status"]["ready"], job["status"]["terminating"]) == (0, 0)
    assert job["status"]["completionTime"] and job["status"]["startTime"]
    kinds = {c["type"]: c for c in job["status"]["conditions"]}
    assert kinds["Complete"]["reason"] == "CompletionsReached"
    assert kinds["SuccessCriteriaMet"]["status"] == "True"
    # The counted pod lets go of the finalizer, so deleting it later is not held up.
    assert wait_for(
        "the finalizer to go",
        lambda: core.read_namespaced_pod(pod.metadata.name, NS).metadata.finalizers is None,
    )
    assert kubectl("get", "job", "once").stdout.split()[5:8] == ["once", "Complete", "1/1"]
    events = kubectl("get", "events", "--field-selector", "involvedObject.name=once").stdout
    assert "SuccessfulCreate" in events and "Completed" in events


def test_parallel_completions_are_counted_once_each(core: kubernetes.client.CoreV1Api, batch: Any) -> None:
    batch.create_namespaced_job(NS, job_body("par", completions=4, parallelism=2))
    done: set[str] = set()
    while len(done) < 4:
        running = wait_for(
            "two running pods",
            lambda: [p for p in live(job_pods(core, "par")) if p.metadata.name not in done],
        )
        assert len(live(job_pods(core, "par"))) <= 2, "more pods than parallelism"
        end_pod(core, running[0].metadata.name, "Succeeded")
        done.add(running[0].metadata.name)
        wait_for(
            "the success to be counted",
            lambda: (batch.read_namespaced_job("par", NS).status.succeeded or 0) >= len(done),
        )
    job = wait_for(
        "completion", lambda: (j := batch.read_namespaced_job("par", NS)).status.completion_time and j
    )
    assert job.status.succeeded == 4 and (job.status.failed or 0) == 0
    assert len(job_pods(core, "par")) == 4


def test_a_failing_job_stops_at_its_backoff_limit(
    core: kubernetes.client.CoreV1Api, batch: Any, kubectl: Any
) -> None:
    batch.create_namespaced_job(NS, job_body("fails", backoffLimit=0))
    pod = wait_for("the pod", lambda: job_pods(core, "fails"))[0]
    end_pod(core, pod.metadata.name, "Failed")
    kubectl("wait", "--for=condition=failed", "job/fails", "--timeout=20s")
    job = batch.read_namespaced_job("fails", NS)
    failed = {c.type: c for c in job.status.conditions}["Failed"]
    assert (failed.reason, failed.message) == (
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    )
    assert job.status.failed == 1 and job.status.completion_time is None
    assert len(job_pods(core, "fails")) == 1, "no replacement after the limit"
    assert kubectl("get", "job", "fails", "--no-headers").stdout.split()[1] == "Failed"


def test_a_deleted_running_pod_is_counted_as_failed_and_replaced(
    core: kubernetes.client.CoreV1Api, batch: Any
) -> None:
    batch.create_namespaced_job(NS, job_body("replaced"))
    first = wait_for("the pod", lambda: job_pods(core, "replaced"))[0].metadata.name
    core.delete_namespaced_pod(first, NS)
    second = wait_for(
        "a replacement",
        lambda: [p.metadata.name for p in live(job_pods(core, "replaced")) if p.metadata.name != first],
    )
    job = batch.read_namespaced_job("replaced", NS)
    assert job.status.failed == 1
    wait_for(
        "the deleted pod to go", lambda: first not in [p.metadata.name for p in job_pods(core, "replaced")]
    )
    end_pod(core, second[0], "Succeeded")
    wait_for("completion", lambda: batch.read_namespaced_job("replaced", NS).status.completion_time)


def test_an_active_deadline_fails_the_job_and_deletes_its_pods(
    core: kubernetes.client.CoreV1Api, batch: Any
) -> None:
    batch.create_namespaced_job(NS, job_body("deadline", activeDeadlineSeconds=1))
    wait_for("the pod", lambda: job_pods(core, "deadline"))
    wait_for(
        "Failed",
        lambda: any(
            c.type == "Failed" for c in batch.read_namespaced_job("deadline", NS).status.conditions or []
        ),
    )
    job = batch.read_namespaced_job("deadline", NS)
    assert {c.type: c.reason for c in job.status.conditions}["Failed"] == "DeadlineExceeded"
    wait_for("its pod to be deleted", lambda: not job_pods(core, "deadline"))


def test_kubectl_delete_job_deletes_its_pods_in_the_background(
    core: kubernetes.client.CoreV1Api, kubectl: Any
) -> None:
    kubectl("create", "job", "gone", "--image=busybox", "--", "sleep", "3600")
    wait_for("the pod", lambda: job_pods(core, "gone"))
    kubectl("delete", "job", "gone")
    wait_for("the job's pods to be collected", lambda: not job_pods(core, "gone"))


def test_the_python_clients_default_delete_orphans_the_pods_as_batch_v1_does(
    core: kubernetes.client.CoreV1Api, batch: Any
) -> None:
    batch.create_namespaced_job(NS, job_body("orphans"))
    pod = wait_for("the pod", lambda: job_pods(core, "orphans"))[0].metadata.name
    batch.delete_namespaced_job("orphans", NS)  # no propagationPolicy: the Job kind's default, Orphan
    wait_for(
        "the job to go",
        lambda: "orphans" not in [j.metadata.name for j in batch.list_namespaced_job(NS).items],
    )
    kept = wait_for(
        "the pod to lose its owner",
        lambda: not (p := core.read_namespaced_pod(pod, NS)).metadata.owner_references and p,
    )
    assert kept.metadata.deletion_timestamp is None
    assert kept.metadata.finalizers is None, "an orphaned pod must not keep the job's finalizer"
    core.delete_namespaced_pod(pod, NS)


def test_foreground_deletion_keeps_the_job_until_its_pods_are_gone(
    core: kubernetes.client.CoreV1Api, batch: Any
) -> None:
    batch.create_namespaced_job(NS, job_body("fg", parallelism=2, completions=2))
    wait_for("two pods", lambda: len(job_pods(core, "fg")) == 2)
    # The answer to the delete is the Job as marked: the pods may all be gone before a later read.
    answer = batch.delete_namespaced_job("fg", NS, propagation_policy="Foreground", _preload_content=False)
    marked = json.loads(answer.data)["metadata"]
    assert marked["deletionTimestamp"] is not None
    assert "foregroundDeletion" in marked["finalizers"]
    wait_for("the pods to go", lambda: not job_pods(core, "fg"))
    wait_for(
        "the job to go", lambda: "fg" not in [j.metadata.name for j in batch.list_namespaced_job(NS).items]
    )


def test_ttl_after_finished_deletes_the_job_and_its_pods(
    core: kubernetes.client.CoreV1Api, batch: Any
) -> None:
    batch.create_namespaced_job(NS, job_body("ttl", ttlSecondsAfterFinished=1))
    pod = wait_for("the pod", lambda: job_pods(core, "ttl"))[0]
    end_pod(core, pod.metadata.name, "Succeeded")
    wait_for(
        "the job to be collected",
        lambda: "ttl" not in [j.metadata.name for j in batch.list_namespaced_job(NS).items],
    )
    wait_for("its pod to be collected", lambda: not job_pods(core, "ttl"))


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"restartPolicy": "Always"}, "spec.template.spec.restartPolicy", 'Unsupported value: "Always"'),
        ({"restartPolicy": None}, "spec.template.spec.restartPolicy", "Required value"),
    ],
)
def test_a_job_whose_pods_would_restart_is_refused(
    batch: Any, change: dict, field: str, message: str
) -> None:
    body = job_body("bad")
    body["spec"]["template"]["spec"].update(change)
    if change.get("restartPolicy") is None:
        del body["spec"]["template"]["spec"]["restartPolicy"]
    with pytest.raises(kubernetes.client.ApiException) as err:
        batch.create_namespaced_job(NS, body)
    status = json.loads(err.value.body)
    assert (err.value.status, status["reason"]) == (422, "Invalid")
    assert status["details"]["kind"] == "Job" and status["details"]["group"] == "batch"
    assert any(c["field"] == field and message in c["message"] for c in status["details"]["causes"])


def test_an_indexed_job_is_refused_with_a_plain_reason(batch: Any) -> None:
    with pytest.raises(kubernetes.client.ApiException) as err:
        batch.create_namespaced_job(NS, job_body("indexed", completionMode="Indexed", completions=2))
    assert err.value.status == 422 and "not simulated" in json.loads(err.value.body)["message"]


def test_a_selector_that_does_not_match_the_template_is_refused(batch: Any) -> None:
    body = job_body("manual", manualSelector=True, selector={"matchLabels": {"app": "x"}})
    body["spec"]["template"]["metadata"] = {"labels": {"app": "y"}}
    with pytest.raises(kubernetes.client.ApiException) as err:
        batch.create_namespaced_job(NS, body)
    assert "`selector` does not match template `labels`" in json.loads(err.value.body)["message"]


@pytest.mark.parametrize("version", ["1.27", "1.29", "1.31", "1.33"])
def test_every_kubectl_creates_jobs_from_the_generator_and_from_a_manifest(
    batch: Any, kubectl: Any, version: str
) -> None:
    tag = version.replace(".", "")
    kubectl("create", "job", f"gen-{tag}", "--image=busybox", "--", "sh", "-c", "echo hi", version=version)
    generated = batch.read_namespaced_job(f"gen-{tag}", NS).spec.template.spec
    assert generated.containers[0].command == ["sh", "-c", "echo hi"]
    assert generated.restart_policy == "Never"
    manifest = job_body(f"man-{tag}", backoffLimit=0)
    kubectl("create", "-f", "-", input=json.dumps(manifest), version=version)
    assert batch.read_namespaced_job(f"man-{tag}", NS).spec.backoff_limit == 0
    listed = kubectl("get", "jobs", f"gen-{tag}", f"man-{tag}", "--no-headers", version=version).stdout
    assert len(listed.splitlines()) == 2
    kubectl("delete", "job", f"gen-{tag}", f"man-{tag}", version=version)


def test_deleting_a_namespace_with_a_running_job_leaves_nothing_behind(
    core: kubernetes.client.CoreV1Api, batch: Any
) -> None:
    core.create_namespace({"metadata": {"name": "batchwork"}})
    batch.create_namespaced_job("batchwork", job_body("work", parallelism=2, completions=4))
    wait_for("its pods", lambda: len(core.list_namespaced_pod("batchwork").items) == 2)
    core.delete_namespace("batchwork")
    wait_for(
        "the namespace to go",
        lambda: "batchwork" not in [n.metadata.name for n in core.list_namespace().items],
        timeout=30,
    )
    assert not core.list_namespaced_pod("batchwork").items


def test_with_restart_policy_on_failure_container_restarts_count_against_the_backoff_limit(
    core: kubernetes.client.CoreV1Api, batch: Any
) -> None:
    body = job_body("restarts", backoffLimit=1)
    body["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    batch.create_namespaced_job(NS, body)
    pod = wait_for("the pod", lambda: job_pods(core, "restarts"))[0].metadata.name
    restarted = {"name": "main", "image": "busybox", "imageID": "", "ready": True, "restartCount": 1,
                 "state": {"running": {"startedAt": "2026-11-30T10:00:00Z"}}}  # fmt: skip
    core.patch_namespaced_pod_status(
        pod, NS, {"status": {"phase": "Running", "containerStatuses": [restarted]}}
    )
    wait_for(
        "Failed",
        lambda: any(
            c.type == "Failed" for c in batch.read_namespaced_job("restarts", NS).status.conditions or []
        ),
    )
    job = batch.read_namespaced_job("restarts", NS)
    assert {c.type: c.reason for c in job.status.conditions}["Failed"] == "BackoffLimitExceeded"
    wait_for("its pod to be deleted", lambda: not job_pods(core, "restarts"))
