"""policy/v1 PodDisruptionBudgets: the disruption controller's status and the eviction subresource that
honours it, through kubectl and the official client, against a tenant API server with its controllers.

A stand-in marks new pods Running and Ready, as a kubelet would report them. `kubectl drain` of a lab
node with a budget is in test_running_lab.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from apiserver_harness import Kubectl, RawClient, RunningAPIServer, StandInKubelet, wait_for

from tenantgpu.controlplane import ControlPlaneServices

pytestmark = pytest.mark.slow

NS = "default"


@pytest.fixture(scope="module")
def core(
    apiserver: RunningAPIServer, services: ControlPlaneServices
) -> Iterator[kubernetes.client.CoreV1Api]:
    api = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))
    with StandInKubelet(
        api, NS, holds=lambda pod: (pod.metadata.labels or {}).get("held") == "yes", bound_only=False
    ):
        yield api


@pytest.fixture(scope="module")
def raw(apiserver: RunningAPIServer) -> RawClient:
    return RawClient(apiserver.kubeconfig)


def _budget(kubectl: Kubectl, name: str) -> dict[str, Any]:
    return json.loads(kubectl("get", "pdb", name, "-o", "json").stdout)


def _settled(kubectl: Kubectl, name: str, **expected: Any) -> dict[str, Any]:
    """The budget once its status shows `expected` (the disruption controller works asynchronously)."""

    def probe() -> dict[str, Any] | None:
        status = _budget(kubectl, name).get("status") or {}
        return status if all(status.get(k) == v for k, v in expected.items()) else None

    return wait_for(f"budget {name} at {expected}", probe)


def _evict(raw: RawClient, pod: str) -> Any:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": NS}}
    return raw.request("POST", f"/api/v1/namespaces/{NS}/pods/{pod}/eviction", body)


def _bare_pods(kubectl: Kubectl, app: str, count: int, **labels: str) -> list[str]:
    names = [f"{app}-{i}" for i in range(count)]
    items = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": app, **labels}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        for name in names
    ]
    kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return names


def _running(core: kubernetes.client.CoreV1Api, app: str, count: int) -> None:
    def probe() -> bool:
        pods = core.list_namespaced_pod(NS, label_selector=f"app={app}").items
        live = [p for p in pods if not p.metadata.deletion_timestamp and p.status.phase == "Running"]
        return len(live) == count

    wait_for(f"{count} {app} pods running", probe)


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_a_budget_over_a_deployment_counts_its_pods_and_shows_as_kubectl_prints_it(
    kubectl: Kubectl, core: kubernetes.client.CoreV1Api, version: str
) -> None:
    app = f"web{version.replace('.', '')}"
    kubectl("create", "deployment", app, "--image=nginx", "--replicas=3")
    _running(core, app, 3)
    kubectl("create", "pdb", f"{app}-min", f"--selector=app={app}", "--min-available=2", version=version)
    status = _settled(kubectl, f"{app}-min", currentHealthy=3, disruptionsAllowed=1)
    assert (status["desiredHealthy"], status["expectedPods"], status["observedGeneration"]) == (2, 3, 1)
    [condition] = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed",
        "True",
        "SufficientPods",
    )
    table = kubectl("get", "pdb", f"{app}-min", version=version).stdout.splitlines()
    assert table[0].split() == [
        "NAME",
        "MIN",
        "AVAILABLE",
        "MAX",
        "UNAVAILABLE",
        "ALLOWED",
        "DISRUPTIONS",
        "AGE",
    ]
    assert table[1].split()[:4] == [f"{app}-min", "2", "N/A", "1"]

    # maxUnavailable and percentages are taken of the Deployment's replicas, rounding up
    kubectl("delete", "pdb", f"{app}-min")
    kubectl("create", "pdb", f"{app}-pct", f"--selector=app={app}", "--max-unavailable=50%", version=version)
    status = _settled(kubectl, f"{app}-pct", expectedPods=3, currentHealthy=3)
    assert (status["desiredHealthy"], status["disruptionsAllowed"]) == (1, 2)  # 50 % of 3 is 2 unavailable
    kubectl("delete", "pdb", f"{app}-pct")
    kubectl("delete", "deployment", app)


def test_an_eviction_spends_the_budget_and_a_spent_budget_refuses_the_next(
    kubectl: Kubectl, core: kubernetes.client.CoreV1Api, raw: RawClient
) -> None:
    # bare pods, so that no controller replaces the evicted one meanwhile
    _bare_pods(kubectl, "api", 3)
    _running(core, "api", 3)
    kubectl("create", "pdb", "api", "--selector=app=api", "--min-available=2")
    _settled(kubectl, "api", currentHealthy=3, disruptionsAllowed=1)
    first = _evict(raw, "api-0")
    assert first.status == 201, first.body
    assert first.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    # the eviction took the one allowed disruption: whether the controller has seen api-0 go or not
    assert _budget(kubectl, "api")["status"]["disruptionsAllowed"] == 0

    refused = _evict(raw, "api-1")
    assert refused.status == 429
    body = refused.json()
    assert (body["reason"], body["message"]) == (
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
    )
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert "The disruption budget api needs 2 healthy pods and has" in body["details"]["causes"][0]["message"]
    assert core.read_namespaced_pod("api-1", NS).metadata.deletion_timestamp is None

    # once the evicted pod is gone it no longer counts as disrupted
    settled = _settled(kubectl, "api", currentHealthy=2, disruptionsAllowed=0)
    assert "disruptedPods" not in settled and settled["conditions"][0]["reason"] == "InsufficientPods"
    assert _evict(raw, "api-1").status == 429


def test_pods_a_budget_cannot_protect_and_budgets_it_cannot_decide_on(
    kubectl: Kubectl, core: kubernetes.client.CoreV1Api, raw: RawClient
) -> None:
    # bare pods: a fixed minAvailable counts them; a percentage needs a controller's scale
    _bare_pods(kubectl, "solo", 2)
    _running(core, "solo", 2)
    kubectl("create", "pdb", "solo-all", "--selector=app=solo", "--min-available=2")
    _settled(kubectl, "solo-all", currentHealthy=2, desiredHealthy=2, disruptionsAllowed=0)
    assert _evict(raw, "solo-0").status == 429

    # two budgets over one pod: kube's eviction does not choose between them
    kubectl("create", "pdb", "solo-pct", "--selector=app=solo", "--min-available=50%")
    both = _evict(raw, "solo-1")
    assert both.status == 500
    assert both.json()["message"] == (
        "Internal error occurred: This pod has more than one PodDisruptionBudget, "
        "which the eviction subresource does not support."
    )
    failed = _settled(kubectl, "solo-pct", disruptionsAllowed=0)
    assert failed["conditions"][0]["reason"] == "SyncFailed"
    assert 'found no controllers for pod "solo-' in failed["conditions"][0]["message"]
    events = core.list_namespaced_event(NS, field_selector="involvedObject.name=solo-pct").items
    assert any(e.reason == "CalculateExpectedPodCountFailed" and e.type == "Warning" for e in events)

    # a pod that has not started is evicted whatever the budget says
    _bare_pods(kubectl, "waiting", 1, held="yes")
    kubectl("create", "pdb", "waiting", "--selector=app=waiting", "--min-available=1")
    _settled(kubectl, "waiting", disruptionsAllowed=0, desiredHealthy=1)
    assert _evict(raw, "waiting-0").status == 201


def test_a_budget_is_checked_as_kube_checks_it(kubectl: Kubectl) -> None:
    both = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "both"},
        "spec": {"minAvailable": 1, "maxUnavailable": "150%", "selector": {"matchLabels": {"app": "x"}}},
    }
    refused = kubectl("create", "-f", "-", input=json.dumps(both), check=False)
    assert refused.returncode == 1
    assert "minAvailable and maxUnavailable cannot be both set" in refused.stderr
    assert 'spec.maxUnavailable: Invalid value: "150%": must not be greater than 100%' in refused.stderr
    both["metadata"]["name"], both["spec"] = (
        "neg",
        {"minAvailable": -1, "unhealthyPodEvictionPolicy": "Never"},
    )
    negative = kubectl("create", "-f", "-", input=json.dumps(both), check=False)
    assert negative.returncode == 1
    assert "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0" in negative.stderr
    assert 'spec.unhealthyPodEvictionPolicy: Unsupported value: "Never"' in negative.stderr
