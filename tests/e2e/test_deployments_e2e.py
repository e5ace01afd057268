"""apps/v1 Deployments and ReplicaSets beside a tenant API server, through kubectl and the official client.

No kubelet runs here: a small stand-in marks each new pod Running and Ready, as a kubelet would report
it, so that what is checked is the controllers' rollouts, scaling and status, and the garbage
collector's cascade. The running lab's Deployment of GPU pods is in test_running_lab.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from apiserver_harness import RunningAPIServer, StandInKubelet, wait_for

from tenantgpu.controlplane import ControlPlaneServices

pytestmark = pytest.mark.slow

NS = "default"


@pytest.fixture(scope="module")
def core(
    apiserver: RunningAPIServer, services: ControlPlaneServices
) -> Iterator[kubernetes.client.CoreV1Api]:
    """The official client, with a stand-in kubelet marking pods Running and Ready meanwhile."""
    api = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))
    paused: set[str] = set()
    with StandInKubelet(
        api, NS, holds=lambda pod: (pod.metadata.labels or {}).get("app") in paused, bound_only=False
    ):
        api.paused_apps = paused  # type: ignore[attr-defined]
        yield api


@pytest.fixture(scope="module")
def apps(core: kubernetes.client.CoreV1Api) -> kubernetes.client.AppsV1Api:
    return kubernetes.client.AppsV1Api(core.api_client)


def pods_of(core: kubernetes.client.CoreV1Api, app: str) -> list[Any]:
    return [
        p
        for p in core.list_namespaced_pod(NS, label_selector=f"app={app}").items
        if not p.metadata.deletion_timestamp
    ]


def deployment(name: str, replicas: int = 2, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "main", "image": "busybox:1", "command": ["sleep", "3600"]}]
                },
            },
            **spec,
        },
    }


def test_kubectl_create_deployment_rolls_out_through_a_replica_set(
    core: kubernetes.client.CoreV1Api, apps: Any, kubectl: Any
) -> None:
    kubectl("create", "deployment", "web", "--image=busybox:1", "--replicas=3")
    out = kubectl("rollout", "status", "deployment/web", "--timeout=30s").stdout
    assert 'deployment "web" successfully rolled out' in out
    rs = apps.list_namespaced_replica_set(NS, label_selector="app=web").items
    assert len(rs) == 1
    digest = rs[0].metadata.labels["pod-template-hash"]
    assert rs[0].metadata.name == f"web-{digest}"
    assert rs[0].metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    assert rs[0].spec.selector.match_labels == {"app": "web", "pod-template-hash": digest}
    owner = rs[0].metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller) == ("Deployment", "web", True)
    pods = pods_of(core, "web")
    assert len(pods) == 3 and all(p.metadata.name.startswith(f"web-{digest}-") for p in pods)
    assert all(p.metadata.owner_references[0].name == rs[0].metadata.name for p in pods)
    table = kubectl("get", "deployment", "web").stdout.splitlines()
    assert table[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert table[1].split()[:4] == ["web", "3/3", "3", "3"]
    rs_table = kubectl("get", "rs", "-l", "app=web").stdout.splitlines()
    assert rs_table[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    assert rs_table[1].split()[1:4] == ["3", "3", "3"]
    status = apps.read_namespaced_deployment("web", NS).status
    conditions = {c.type: c for c in status.conditions}
    assert conditions["Available"].reason == "MinimumReplicasAvailable"
    assert conditions["Progressing"].reason == "NewReplicaSetAvailable"
    assert status.observed_generation == 1 and status.updated_replicas == 3


def test_scaling_through_kubectl_and_the_scale_subresource(
    core: kubernetes.client.CoreV1Api, apps: Any, kubectl: Any
) -> None:
    apps.create_namespaced_deployment(NS, deployment("scaled", 2))
    wait_for("two pods", lambda: len(pods_of(core, "scaled")) == 2)
    kubectl("scale", "deployment", "scaled", "--replicas=5")
    wait_for("five pods", lambda: len(pods_of(core, "scaled")) == 5)
    scale = apps.read_namespaced_deployment_scale("scaled", NS)
    assert scale.spec.replicas == 5 and scale.status.selector == "app=scaled"
    apps.patch_namespaced_deployment_scale("scaled", NS, {"spec": {"replicas": 1}})
    wait_for("one pod", lambda: len(pods_of(core, "scaled")) == 1)
    kubectl("rollout", "status", "deployment/scaled", "--timeout=30s")


def test_a_new_image_rolls_out_and_undo_brings_the_old_template_back(
    core: kubernetes.client.CoreV1Api, apps: Any, kubectl: Any
) -> None:
    apps.create_namespaced_deployment(NS, deployment("roll", 4))
    kubectl("rollout", "status", "deployment/roll", "--timeout=30s")
    first = {p.metadata.name for p in pods_of(core, "roll")}
    kubectl("set", "image", "deployment/roll", "main=busybox:2")
    out = kubectl("rollout", "status", "deployment/roll", "--timeout=30s").stdout
    assert 'deployment "roll" successfully rolled out' in out
    pods = pods_of(core, "roll")
    assert len(pods) == 4 and not first & {p.metadata.name for p in pods}
    assert {p.spec.containers[0].image for p in pods} == {"busybox:2"}
    sets = {
        rs.metadata.annotations["deployment.kubernetes.io/revision"]: rs
        for rs in apps.list_namespaced_replica_set(NS, label_selector="app=roll").items
    }
    assert sets["1"].spec.replicas == 0 and sets["2"].spec.replicas == 4
    history = kubectl("rollout", "history", "deployment/roll").stdout
    assert "1 " in history and "2 " in history
    events = kubectl("get", "events", "--field-selector", "involvedObject.name=roll").stdout
    assert "ScalingReplicaSet" in events and "Scaled down replica set" in events
    kubectl("rollout", "undo", "deployment/roll")
    kubectl("rollout", "status", "deployment/roll", "--timeout=30s")
    wait_for(
        "the old image back",
        lambda: {p.spec.containers[0].image for p in pods_of(core, "roll")} == {"busybox:1"},
    )
    back = apps.read_namespaced_replica_set(sets["1"].metadata.name, NS)
    assert back.spec.replicas == 4 and back.metadata.annotations["deployment.kubernetes.io/revision"] == "3"


def test_a_rolling_update_keeps_availability_within_max_unavailable(
    core: kubernetes.client.CoreV1Api, apps: Any
) -> None:
    spec = {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}
    apps.create_namespaced_deployment(NS, deployment("careful", 3, **spec))
    wait_for(
        "available",
        lambda: (apps.read_namespaced_deployment("careful", NS).status.available_replicas or 0) == 3,
    )
    core.paused_apps.add("careful")  # new pods stay Pending: never ready
    try:
        apps.patch_namespaced_deployment(
            "careful", NS, {"spec": {"template": {"metadata": {"annotations": {"v": "2"}}}}}
        )
        wait_for("the surge pod", lambda: len(pods_of(core, "careful")) == 4)
        time.sleep(1)
        pods = pods_of(core, "careful")
        assert len(pods) == 4, "one surge pod only, since none of the new ones is ready"
        assert sum(1 for p in pods if p.status.phase == "Running") == 3, "no old pod was taken down"
    finally:
        core.paused_apps.discard("careful")
    wait_for(
        "the rollout",
        lambda: (
            (s := apps.read_namespaced_deployment("careful", NS).status).updated_replicas == 3
            and s.replicas == 3
            and s.available_replicas == 3
        ),
    )


def test_recreate_takes_the_old_pods_down_before_starting_new_ones(
    core: kubernetes.client.CoreV1Api, apps: Any, kubectl: Any
) -> None:
    apps.create_namespaced_deployment(NS, deployment("recreate", 2, strategy={"type": "Recreate"}))
    kubectl("rollout", "status", "deployment/recreate", "--timeout=30s")
    old = {p.metadata.name for p in pods_of(core, "recreate")}
    kubectl("set", "image", "deployment/recreate", "main=busybox:2")
    kubectl("rollout", "status", "deployment/recreate", "--timeout=30s")
    pods = pods_of(core, "recreate")
    assert len(pods) == 2 and not old & {p.metadata.name for p in pods}
    assert {p.spec.containers[0].image for p in pods} == {"busybox:2"}


def test_a_replica_set_replaces_a_deleted_pod_at_once(core: kubernetes.client.CoreV1Api, apps: Any) -> None:
    apps.create_namespaced_deployment(NS, deployment("heal", 2))
    names = wait_for(
        "two pods",
        lambda: [p.metadata.name for p in pods_of(core, "heal")] if len(pods_of(core, "heal")) == 2 else [],
    )
    core.delete_namespaced_pod(names[0], NS)
    wait_for(
        "a replacement",
        lambda: (
            len(pods_of(core, "heal")) == 2
            and names[0] not in [p.metadata.name for p in pods_of(core, "heal")]
        ),
    )


def test_deleting_a_deployment_collects_its_replica_sets_and_pods(
    core: kubernetes.client.CoreV1Api, apps: Any, kubectl: Any
) -> None:
    apps.create_namespaced_deployment(NS, deployment("gone", 2))
    wait_for("two pods", lambda: len(pods_of(core, "gone")) == 2)
    kubectl("delete", "deployment", "gone")
    wait_for(
        "the replica sets to go",
        lambda: not apps.list_namespaced_replica_set(NS, label_selector="app=gone").items,
    )
    wait_for("the pods to go", lambda: not pods_of(core, "gone"))


def test_a_deployment_defaults_and_refusals_follow_apps_v1(apps: Any) -> None:
    created = apps.create_namespaced_deployment(NS, deployment("defaults", 1))
    spec = created.spec
    assert (
        spec.strategy.type,
        spec.strategy.rolling_update.max_surge,
        spec.strategy.rolling_update.max_unavailable,
    ) == ("RollingUpdate", "25%", "25%")
    assert (spec.revision_history_limit, spec.progress_deadline_seconds) == (10, 600)
    assert spec.template.spec.restart_policy == "Always"
    bad = deployment("bad")
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    with pytest.raises(kubernetes.client.ApiException) as err:
        apps.create_namespaced_deployment(NS, bad)
    body = json.loads(err.value.body)
    assert (err.value.status, body["reason"], body["details"]["group"]) == (422, "Invalid", "apps")
    assert (
        'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"'
        in body["message"]
    )
    mismatch = deployment("mismatch")
    mismatch["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    with pytest.raises(kubernetes.client.ApiException) as err:
        apps.create_namespaced_deployment(NS, mismatch)
    assert "`selector` does not match template `labels`" in json.loads(err.value.body)["message"]


@pytest.mark.parametrize("version", ["1.27", "1.31", "1.33"])
def test_every_kubectl_creates_and_reads_deployments(apps: Any, kubectl: Any, version: str) -> None:
    name = f"v{version.replace('.', '')}"
    kubectl("create", "deployment", name, "--image=busybox:1", "--port=8080", version=version)
    created = apps.read_namespaced_deployment(name, NS)
    assert created.spec.template.spec.containers[0].ports[0].container_port == 8080
    kubectl("rollout", "status", f"deployment/{name}", "--timeout=30s", version=version)
    assert kubectl("get", "deploy", name, "--no-headers", version=version).stdout.split()[1] == "1/1"
    kubectl("delete", "deployment", name, version=version)


@pytest.mark.parametrize(
    ("rolling", "message"),
    [
        ({"maxSurge": "lots"}, "a valid percent string must be a numeric string followed by an ending '%'"),
        ({"maxUnavailable": -1}, "must be greater than or equal to 0"),
        ({"maxUnavailable": "150%"}, "must not be greater than 100%"),
        ({"maxSurge": 0, "maxUnavailable": 0}, "may not be 0 when `maxSurge` is 0"),
    ],
)
def test_a_rolling_update_that_could_not_move_or_parse_is_refused(
    apps: Any, rolling: dict, message: str
) -> None:
    body = deployment("refused", strategy={"type": "RollingUpdate", "rollingUpdate": rolling})
    with pytest.raises(kubernetes.client.ApiException) as err:
        apps.create_namespaced_deployment(NS, body)
    assert err.value.status == 422 and message in json.loads(err.value.body)["message"]
