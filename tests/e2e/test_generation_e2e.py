"""`metadata.generation` as kube-apiserver's strategies keep it, seen with the real kubectl.

Read from kubernetes/kubernetes (pkg/registry/*/strategy.go, staging/.../registry/rest): only some
kinds' strategies set `generation: 1` on create (workloads, PDBs, Ingresses, IngressClasses,
NetworkPolicies, PriorityClasses, EndpointSlices, webhook configurations, custom resources); Nodes,
Services, ConfigMaps, Leases, RBAC objects and the rest have none. Most count a change of `spec`; a
Deployment's strategy also counts its annotations, a PriorityClass's never counts again. A Pod has one
only from 1.33 on (KEP-5067, set without a feature gate); its binding writes `spec.nodeName` without
the update strategy, so it is no new generation. The first mark for deletion (graceful, or held by a
finalizer) adds one where the object has a generation (rest.BeforeDelete, the store's markAsDeleting).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer, release_server


@pytest.fixture(scope="module")
def release_133(background_loop: BackgroundLoop, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A tenant API server of Kubernetes 1.33, beside the module's 1.31 one."""
    with release_server(background_loop, tmp_path_factory.mktemp("release_133"), "v1.33.1") as kubeconfig:
        yield kubeconfig


def _get(kubectl: Kubectl, *what: str, kubeconfig: Path | None = None) -> dict[str, Any]:
    return json.loads(kubectl("get", *what, "-o", "json", kubeconfig=kubeconfig).stdout)


def _pod(name: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "containers": [{"name": "main", "image": "busybox"}],
                "terminationGracePeriodSeconds": 30,
            },
        }
    )


def _bind(apiserver_kubeconfig: Path, kubectl: Kubectl, name: str) -> None:
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    kubectl(
        "create",
        "--raw",
        f"/api/v1/namespaces/default/pods/{name}/binding",
        "-f",
        "-",
        input=json.dumps(binding),
        kubeconfig=apiserver_kubeconfig,
    )


def test_kinds_without_a_generation_in_their_strategy_have_none(kubectl: Kubectl) -> None:
    kubectl("create", "configmap", "plain", "--from-literal=a=b")
    kubectl("create", "service", "clusterip", "plain", "--tcp=80:80")
    kubectl("create", "serviceaccount", "plain")
    kubectl("create", "role", "plain", "--verb=get", "--resource=pods")
    for what in (
        ("configmap", "plain"),
        ("service", "plain"),
        ("serviceaccount", "plain"),
        ("role", "plain"),
    ):
        assert "generation" not in _get(kubectl, *what)["metadata"], what
    assert "generation" not in _get(kubectl, "namespace", "default")["metadata"]
    kubectl("label", "configmap", "plain", "x=y")
    assert "generation" not in _get(kubectl, "configmap", "plain")["metadata"]


def test_a_pod_has_no_generation_before_1_33(kubectl: Kubectl, apiserver: RunningAPIServer) -> None:
    kubectl("create", "-f", "-", input=_pod("old-release"))
    _bind(apiserver.kubeconfig, kubectl, "old-release")
    pod = _get(kubectl, "pod", "old-release")
    assert pod["spec"]["nodeName"] == "node-1"
    assert "generation" not in pod["metadata"]
    kubectl("delete", "pod", "old-release", "--wait=false")
    assert "generation" not in _get(kubectl, "pod", "old-release")["metadata"]


def test_a_pod_of_1_33_counts_spec_changes_but_not_its_binding_or_status(
    kubectl: Kubectl, release_133: Path
) -> None:
    def on_133(*args: str, input: str | None = None) -> None:
        kubectl(*args, input=input, kubeconfig=release_133)

    def pod() -> dict[str, Any]:
        return _get(kubectl, "pod", "counted", kubeconfig=release_133)

    on_133("create", "-f", "-", input=_pod("counted"))
    assert pod()["metadata"]["generation"] == 1
    _bind(release_133, kubectl, "counted")
    assert pod()["spec"]["nodeName"] == "node-1" and pod()["metadata"]["generation"] == 1
    on_133("annotate", "pod", "counted", "note=metadata-only")
    on_133(
        "patch",
        "pod",
        "counted",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"phase":"Running"}}',
    )
    assert pod()["metadata"]["generation"] == 1
    on_133("set", "image", "pod/counted", "main=busybox:2")
    assert pod()["metadata"]["generation"] == 2
    # A client cannot set it: an update keeps the stored one.
    on_133("patch", "pod", "counted", "--type=merge", "-p", '{"metadata":{"generation":9}}')
    assert pod()["metadata"]["generation"] == 2
    # The graceful delete marks it Terminating: one more.
    on_133("delete", "pod", "counted", "--wait=false")
    terminating = pod()["metadata"]
    assert terminating["deletionTimestamp"] and terminating["generation"] == 3


def test_a_deployment_counts_its_annotations_and_a_priority_class_never_counts(kubectl: Kubectl) -> None:
    kubectl("create", "deployment", "counted", "--image=busybox")
    assert _get(kubectl, "deployment", "counted")["metadata"]["generation"] == 1
    kubectl("label", "deployment", "counted", "tier=web")
    assert _get(kubectl, "deployment", "counted")["metadata"]["generation"] == 1
    kubectl("annotate", "deployment", "counted", "owner=team-a")
    assert _get(kubectl, "deployment", "counted")["metadata"]["generation"] == 2
    kubectl("scale", "deployment", "counted", "--replicas=3")
    assert _get(kubectl, "deployment", "counted")["metadata"]["generation"] == 3
    kubectl("create", "priorityclass", "counted", "--value=1000", "--description=first")
    assert _get(kubectl, "priorityclass", "counted")["metadata"]["generation"] == 1
    kubectl(
        "patch",
        "priorityclass",
        "counted",
        "--type=merge",
        "-p",
        '{"description":"second"}',
    )
    changed = _get(kubectl, "priorityclass", "counted")
    assert changed["description"] == "second" and changed["metadata"]["generation"] == 1


def test_a_delete_held_by_a_finalizer_is_a_new_generation(kubectl: Kubectl) -> None:
    kubectl("create", "deployment", "held", "--image=busybox")
    kubectl(
        "patch",
        "deployment",
        "held",
        "--type=merge",
        "-p",
        '{"metadata":{"finalizers":["example.com/hold"]}}',
    )
    kubectl("delete", "deployment", "held", "--wait=false")
    marked = _get(kubectl, "deployment", "held")["metadata"]
    assert marked["deletionTimestamp"] and marked["generation"] == 2
    kubectl("delete", "deployment", "held", "--wait=false")
    assert _get(kubectl, "deployment", "held")["metadata"]["generation"] == 2
    kubectl("patch", "deployment", "held", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    gone = kubectl("get", "deployment", "held", check=False)
    assert gone.returncode == 1 and "NotFound" in gone.stderr


def test_a_deployments_status_may_change_its_annotations_but_not_its_labels_or_generation(
    kubectl: Kubectl,
) -> None:
    """As kube's Deployment status strategy (it keeps spec and labels): the deployment controller
    writes its revision annotation there, so a new Deployment keeps generation 1."""
    kubectl("create", "deployment", "through-status", "--image=busybox")
    patch = (
        '{"metadata":{"annotations":{"note":"status"},"labels":{"tier":"status"}},"status":{"replicas":0}}'
    )
    kubectl("patch", "deployment", "through-status", "--subresource=status", "--type=merge", "-p", patch)
    meta = _get(kubectl, "deployment", "through-status")["metadata"]
    assert meta["annotations"]["note"] == "status"
    assert "tier" not in meta["labels"] and meta["generation"] == 1


def test_a_daemonset_counts_its_template_in_the_annotation_apps_v1_shows(kubectl: Kubectl) -> None:
    """kube keeps a DaemonSet's template generation in its spec and apps/v1 writes it out as the
    annotation `deprecated.daemonset.template.generation`; the DaemonSet controller labels its pods
    with it (`pod-template-generation`). Only a template change counts it, and a client cannot set it."""
    key = "deprecated.daemonset.template.generation"
    daemon_set = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "counted", "annotations": {key: "7"}},
        "spec": {
            "selector": {"matchLabels": {"app": "counted"}},
            "template": {
                "metadata": {"labels": {"app": "counted"}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1"}]},
            },
        },
    }
    kubectl("create", "-f", "-", input=json.dumps(daemon_set))

    def seen() -> tuple[int, str]:
        meta = _get(kubectl, "daemonset", "counted")["metadata"]
        return meta["generation"], meta["annotations"][key]

    assert seen() == (1, "7")  # as kube's conversion reads it on create: a number of at least 1
    strategy = '{"spec":{"updateStrategy":{"type":"OnDelete"}}}'
    kubectl("patch", "daemonset", "counted", "--type=merge", "-p", strategy)
    assert seen() == (2, "7")
    kubectl("set", "image", "daemonset/counted", "main=busybox:2")
    assert seen() == (3, "8")
    kubectl("annotate", "daemonset", "counted", "--overwrite", f"{key}=99")
    assert seen() == (3, "8")
    kubectl("replace", "-f", "-", input=json.dumps(daemon_set))  # the template of busybox:1 again
    assert seen() == (4, "9")


def test_a_status_write_changes_the_metadata_kubes_status_strategy_leaves_to_it(kubectl: Kubectl) -> None:
    """Most built-in kinds' status strategies keep only the spec: labels and annotations sent through
    `/status` are written (a Job's here); a pod's keeps its owner references."""
    kubectl("create", "job", "via-status", "--image=busybox")
    patch = '{"metadata":{"labels":{"tier":"status"},"annotations":{"note":"status"}},"status":{}}'
    kubectl("patch", "job", "via-status", "--subresource=status", "--type=merge", "-p", patch)
    job = _get(kubectl, "job", "via-status")["metadata"]
    assert job["labels"]["tier"] == "status" and job["annotations"]["note"] == "status"
    assert job["generation"] == 1

    kubectl("create", "-f", "-", input=_pod("owned"))
    owner = '[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"00000000-0000-0000-0000-000000000001"}]'
    kubectl(
        "patch",
        "pod",
        "owned",
        "--subresource=status",
        "--type=merge",
        "-p",
        f'{{"metadata":{{"labels":{{"seen":"yes"}},"ownerReferences":{owner}}}}}',
    )
    pod = _get(kubectl, "pod", "owned")["metadata"]
    assert pod["labels"] == {"seen": "yes"} and "ownerReferences" not in pod
