"""A Job's defaults as kube-apiserver writes them, per release, seen with the real kubectl.

From kubernetes/kubernetes' `SetDefaults_Job` (pkg/apis/batch/v1/defaults.go): a Job without labels
takes its template's. Defaults run on every decode, also of the stored Job, which the batch strategy
wrote with its generated labels in the template: so `kubectl create job` (a template without labels)
gives a Job carrying the four generated labels, while a template with labels of its own gives the Job
just those. From 1.29 (PR #120206, and JobPodReplacementPolicy beta) `manualSelector: false` and
`podReplacementPolicy: TerminatingOrFailed` are defaulted; 1.28 has neither.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from apiserver_harness import BackgroundLoop, Kubectl, release_server


@pytest.fixture(scope="module")
def release_128(background_loop: BackgroundLoop, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with release_server(background_loop, tmp_path_factory.mktemp("release_128"), "v1.28.9") as kubeconfig:
        yield kubeconfig


def _job(kubectl: Kubectl, name: str, kubeconfig: Path | None = None) -> dict[str, Any]:
    return json.loads(kubectl("get", "job", name, "-o", "json", kubeconfig=kubeconfig).stdout)


def test_a_job_without_labels_carries_the_generated_ones(kubectl: Kubectl) -> None:
    kubectl("create", "job", "pi", "--image=busybox")
    job = _job(kubectl, "pi")
    uid = job["metadata"]["uid"]
    assert job["metadata"]["labels"] == {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "pi",
        "controller-uid": uid,
        "job-name": "pi",
    }
    assert job["spec"]["manualSelector"] is False
    assert job["spec"]["podReplacementPolicy"] == "TerminatingOrFailed"
    shown = kubectl("get", "jobs", "-l", "job-name=pi", "-o", "name").stdout.split()
    assert shown == ["job.batch/pi"]


def test_a_job_takes_its_templates_labels_as_written(kubectl: Kubectl) -> None:
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "team-job"},
        "spec": {
            "template": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
            }
        },
    }
    kubectl("create", "-f", "-", input=json.dumps(body))
    job = _job(kubectl, "team-job")
    assert job["metadata"]["labels"] == {"team": "a"}
    template_labels = job["spec"]["template"]["metadata"]["labels"]
    assert template_labels["team"] == "a" and template_labels["job-name"] == "team-job"
    body["metadata"]["name"] = "labelled"
    body["metadata"]["labels"] = {"own": "yes"}
    kubectl("create", "-f", "-", input=json.dumps(body))
    assert _job(kubectl, "labelled")["metadata"]["labels"] == {"own": "yes"}


def test_a_job_of_1_28_has_neither_default_of_1_29(kubectl: Kubectl, release_128: Path) -> None:
    kubectl("create", "job", "pi", "--image=busybox", kubeconfig=release_128)
    spec = _job(kubectl, "pi", release_128)["spec"]
    assert "manualSelector" not in spec and "podReplacementPolicy" not in spec
    assert spec["backoffLimit"] == 6 and spec["completionMode"] == "NonIndexed"


def test_kubectl_get_job_shows_status_from_1_30(kubectl: Kubectl, release_128: Path) -> None:
    """kube's Job printer gained its STATUS column in 1.30 (kubernetes/kubernetes#123226); the table
    is the server's, so a 1.28 tenant prints the four columns of its release, also when watching."""
    kubectl("create", "job", "shown", "--image=busybox")
    assert kubectl("get", "job", "shown").stdout.split()[:5] == [
        "NAME",
        "STATUS",
        "COMPLETIONS",
        "DURATION",
        "AGE",
    ]
    kubectl("create", "job", "shown", "--image=busybox", kubeconfig=release_128)
    header = kubectl("get", "job", "shown", kubeconfig=release_128, version="1.28").stdout.splitlines()[0]
    assert header.split() == ["NAME", "COMPLETIONS", "DURATION", "AGE"]
    watched = kubectl(
        "get",
        "job",
        "shown",
        "--watch",
        "--request-timeout=2s",
        kubeconfig=release_128,
        version="1.28",
        check=False,
    ).stdout.splitlines()
    assert watched[0].split() == ["NAME", "COMPLETIONS", "DURATION", "AGE"]


def test_cronjob_and_priorityclass_columns_follow_the_tenant_s_release(
    kubectl: Kubectl, release_128: Path, background_loop: BackgroundLoop, tmp_path: Path
) -> None:
    """kube's CronJob printer gained TIMEZONE in 1.30 (kubernetes/kubernetes#122231, milestone v1.30)
    and its PriorityClass printer PREEMPTIONPOLICY in 1.32 (#126529, merged after 1.31 was out): the
    v1.31 tenant shows the first, not the second; a 1.28 tenant neither, a 1.33 tenant both."""
    for kubeconfig in (None, release_128):
        kubectl(
            "create", "cronjob", "nightly", "--image=busybox", "--schedule=0 2 * * *", kubeconfig=kubeconfig
        )
        kubectl("create", "priorityclass", "batch-low", "--value=10", kubeconfig=kubeconfig)
    assert kubectl("get", "cronjob", "nightly").stdout.split()[:7] == [
        "NAME",
        "SCHEDULE",
        "TIMEZONE",
        "SUSPEND",
        "ACTIVE",
        "LAST",
        "SCHEDULE",
    ]
    old = kubectl("get", "cronjob", "nightly", kubeconfig=release_128, version="1.28").stdout
    assert old.splitlines()[0].split() == ["NAME", "SCHEDULE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"]
    assert old.splitlines()[1].split()[:5] == ["nightly", "0", "2", "*", "*"]
    assert kubectl("get", "priorityclass", "batch-low").stdout.splitlines()[0].split() == [
        "NAME",
        "VALUE",
        "GLOBAL-DEFAULT",
        "AGE",
    ]
    with release_server(background_loop, tmp_path / "v133", "v1.33.1") as newer:
        kubectl("create", "priorityclass", "batch-low", "--value=10", kubeconfig=newer, version="1.33")
        shown = kubectl("get", "priorityclass", "batch-low", kubeconfig=newer, version="1.33").stdout
        assert shown.splitlines()[0].split() == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
        assert shown.splitlines()[1].split()[-1] == "PreemptLowerPriority"
    for kubeconfig in (None, release_128):
        kubectl("delete", "cronjob", "nightly", kubeconfig=kubeconfig)
        kubectl("delete", "priorityclass", "batch-low", kubeconfig=kubeconfig)
