"""apps/v1 StatefulSets beside a tenant API server, through kubectl and the official client.

Two nodes are registered through the API and no kubelet runs: a stand-in marks each bound pod Running
and Ready (unless the test holds it back), as a kubelet would report it. What is checked is kube's
StatefulSet controller (pkg/controller/statefulset, read for these facts): pods `<set>-<ordinal>` with
the hostname of their name, the subdomain of `serviceName` and the labels
`statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index` and `controller-revision-hash`
(the revision's name); OrderedReady creates one at a time and removes from the top; RollingUpdate
replaces from the top down to the partition; events read `create Pod web-0 in StatefulSet web
successful`; kubectl's `rollout status` reports a partitioned roll out.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from apiserver_harness import Kubectl, RunningAPIServer, StandInKubelet, wait_for
from test_controlplane_e2e import node_body

from tenantgpu.controlplane import ControlPlaneServices

pytestmark = pytest.mark.slow

NS = "default"


@pytest.fixture(scope="module")
def core(
    apiserver: RunningAPIServer, services: ControlPlaneServices
) -> Iterator[kubernetes.client.CoreV1Api]:
    api = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))
    for name in ("s1", "s2"):
        api.create_node(node_body(name, "16", "32Gi"))
    failing: set[str] = set()

    def fails(pod: Any) -> bool:
        if pod.metadata.name in failing:
            failing.discard(pod.metadata.name)  # fails once; its replacement runs
            return True
        return False

    held: set[str] = set()  # pods named here stay Pending, as if their container were still starting
    with StandInKubelet(api, NS, fails=fails, holds=lambda pod: pod.metadata.name in held):
        api.held = held  # type: ignore[attr-defined]
        api.failing = failing  # type: ignore[attr-defined]
        yield api


@pytest.fixture(scope="module")
def apps(core: kubernetes.client.CoreV1Api) -> kubernetes.client.AppsV1Api:
    return kubernetes.client.AppsV1Api(core.api_client)


def stateful_set(name: str, replicas: int = 3, image: str = "db:1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "serviceName": name,
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}]},
            },
            **spec,
        },
    }


def pods_of(core: kubernetes.client.CoreV1Api, app: str) -> dict[str, Any]:
    return {
        p.metadata.name: p
        for p in core.list_namespaced_pod(NS, label_selector=f"app={app}").items
        if not p.metadata.deletion_timestamp
    }


def running(core: kubernetes.client.CoreV1Api, app: str, names: list[str], image: str | None = None) -> Any:
    def probe() -> Any:
        pods = pods_of(core, app)
        if sorted(pods) != sorted(names) or any(p.status.phase != "Running" for p in pods.values()):
            return None
        if image is not None and any(p.spec.containers[0].image != image for p in pods.values()):
            return None
        return pods

    return probe


def test_ordered_ready_creates_one_at_a_time_with_stable_identities(
    core: kubernetes.client.CoreV1Api, apps: kubernetes.client.AppsV1Api, kubectl: Kubectl
) -> None:
    core.held.add("web-0")  # type: ignore[attr-defined]
    apps.create_namespaced_stateful_set(NS, stateful_set("web"))
    wait_for("web-0 created", lambda: "web-0" in pods_of(core, "web") or None)
    time.sleep(0.5)
    assert list(pods_of(core, "web")) == ["web-0"], "web-1 waits for web-0 to be ready"
    core.held.discard("web-0")  # type: ignore[attr-defined]
    pods = wait_for("all three", running(core, "web", ["web-0", "web-1", "web-2"]))
    web1 = pods["web-1"]
    assert (web1.spec.hostname, web1.spec.subdomain) == ("web-1", "web")
    labels = web1.metadata.labels
    assert (
        labels["statefulset.kubernetes.io/pod-name"] == "web-1"
        and labels["apps.kubernetes.io/pod-index"] == "1"
    )
    assert labels["controller-revision-hash"].startswith("web-")
    status = wait_for(
        "the status",
        lambda: (s := apps.read_namespaced_stateful_set("web", NS).status).ready_replicas == 3 and s,
    )
    assert status.current_revision == status.update_revision == labels["controller-revision-hash"]
    assert (status.replicas, status.updated_replicas, status.available_replicas) == (3, 3, 3)
    for version in ("1.27", "1.33"):
        table = kubectl("get", "sts", "web", version=version).stdout.splitlines()
        assert table[0].split() == ["NAME", "READY", "AGE"] and table[1].split()[:2] == ["web", "3/3"]
    events = [
        e.message for e in core.list_namespaced_event(NS, field_selector="involvedObject.name=web").items
    ]
    assert "create Pod web-0 in StatefulSet web successful" in events


def test_scale_down_removes_the_highest_ordinal_first(
    core: kubernetes.client.CoreV1Api, apps: kubernetes.client.AppsV1Api, kubectl: Kubectl
) -> None:
    def deletions() -> list[str]:
        events = [
            e
            for e in core.list_namespaced_event(NS, field_selector="involvedObject.name=web").items
            if e.reason == "SuccessfulDelete"
        ]
        # Events carry whole seconds only; the API server's revision orders them.
        return [e.message for e in sorted(events, key=lambda e: int(e.metadata.resource_version))]

    before = len(deletions())
    kubectl("scale", "sts", "web", "--replicas=1")
    wait_for("only web-0 left", running(core, "web", ["web-0"]))
    # the controller records each deletion after it, so the events may trail the pods' going
    wait_for("both deletions recorded", lambda: len(deletions()) >= before + 2)
    assert deletions()[-2:] == [
        "delete Pod web-2 in StatefulSet web successful",
        "delete Pod web-1 in StatefulSet web successful",
    ]
    kubectl("scale", "sts", "web", "--replicas=3")
    wait_for("three again", running(core, "web", ["web-0", "web-1", "web-2"]))


def test_rolling_update_respects_the_partition(
    core: kubernetes.client.CoreV1Api, apps: kubernetes.client.AppsV1Api, kubectl: Kubectl
) -> None:
    apps.patch_namespaced_stateful_set(
        "web", NS, {"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}}}
    )
    kubectl("set", "image", "sts/web", "main=db:2")

    def only_web2_updated() -> Any:
        pods = pods_of(core, "web")
        images = {n: p.spec.containers[0].image for n, p in pods.items() if p.status.phase == "Running"}
        return images == {"web-0": "db:1", "web-1": "db:1", "web-2": "db:2"} or None

    wait_for("web-2 on the new revision, the others not", only_web2_updated)
    out = kubectl("rollout", "status", "sts/web", "--timeout=30s").stdout
    assert "partitioned roll out complete: 1 new pods have been updated" in out
    # a pod below the partition comes back from the current revision
    core.delete_namespaced_pod("web-0", NS)
    wait_for(
        "web-0 back on db:1",
        lambda: (
            (
                (p := pods_of(core, "web").get("web-0"))
                and p.status.phase == "Running"
                and p.spec.containers[0].image == "db:1"
            )
            or None
        ),
    )

    apps.patch_namespaced_stateful_set(
        "web", NS, {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}
    )
    wait_for("all on db:2", running(core, "web", ["web-0", "web-1", "web-2"], "db:2"))
    status = wait_for(
        "the rollout complete",
        lambda: (
            (s := apps.read_namespaced_stateful_set("web", NS).status).current_revision == s.update_revision
            and s.updated_replicas == 3
            and s
        ),
    )
    assert status.current_replicas == 3
    history = kubectl("rollout", "history", "sts/web").stdout.split()
    assert history[history.index("CHANGE-CAUSE") + 1 :: 2] == ["1", "2"]


def test_parallel_creates_all_at_once_and_a_failed_pod_comes_back(
    core: kubernetes.client.CoreV1Api, apps: kubernetes.client.AppsV1Api
) -> None:
    core.held.update({"cache-0", "cache-1", "cache-2"})  # type: ignore[attr-defined]
    apps.create_namespaced_stateful_set(NS, stateful_set("cache", podManagementPolicy="Parallel"))
    wait_for(
        "all three at once",
        lambda: sorted(pods_of(core, "cache")) == ["cache-0", "cache-1", "cache-2"] or None,
    )
    core.failing.add("cache-1")  # type: ignore[attr-defined]
    core.held.difference_update({"cache-0", "cache-1", "cache-2"})  # type: ignore[attr-defined]
    uid = pods_of(core, "cache")["cache-1"].metadata.uid
    pods = wait_for(
        "cache-1 failed, replaced under its name",
        lambda: (
            (p := running(core, "cache", ["cache-0", "cache-1", "cache-2"])())
            and p["cache-1"].metadata.uid != uid
            and p
        ),
    )
    assert pods["cache-1"].metadata.labels["apps.kubernetes.io/pod-index"] == "1"


def test_validation_and_cascading_delete(
    core: kubernetes.client.CoreV1Api, apps: kubernetes.client.AppsV1Api, kubectl: Kubectl
) -> None:
    # PersistentVolumeClaims are served: claim templates are taken as kube takes them
    claims = stateful_set("claims", replicas=0)
    claims["spec"]["volumeClaimTemplates"] = [
        {
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }
    ]
    created = apps.create_namespaced_stateful_set(NS, claims)
    assert created.spec.volume_claim_templates[0].metadata.name == "data"
    apps.delete_namespaced_stateful_set("claims", NS)
    with pytest.raises(kubernetes.client.ApiException) as renamed:
        apps.patch_namespaced_stateful_set("web", NS, {"spec": {"serviceName": "other"}})
    body = json.loads(renamed.value.body)
    assert (
        "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template'"
        in body["message"]
    )

    kubectl("delete", "sts", "web", "cache")
    wait_for("the pods collected", lambda: (not pods_of(core, "web") and not pods_of(core, "cache")) or None)
    wait_for(
        "the revisions collected", lambda: "web-" not in kubectl("get", "controllerrevisions").stdout or None
    )
