"""RuntimeClasses as a tenant serves them to real kubectl and the official Python client, and the
RuntimeClass admission plugin a Kamaji tenant runs (it is in Kamaji's default plugin list).

Facts (kubernetes/kubernetes v1.33: pkg/printers/internalversion/printers.go, pkg/apis/node/validation,
pkg/registry/node/runtimeclass/strategy.go, pkg/api/node/util.go, plugin/pkg/admission/runtimeclass):
`kubectl get runtimeclass` shows NAME, HANDLER, AGE; a pod naming a class that does not exist is
forbidden (`pod rejected: RuntimeClass "x" not found`); a class's overhead becomes the pod's
`spec.overhead` and its scheduling joins the pod's; an overhead without a class that defines one is
refused, `overhead: {}` included; deprecated node labels in the class's node selector draw a warning;
a PUT must carry the resourceVersion it replaces.
"""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes
import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer, release_server

pytestmark = pytest.mark.slow  # drives real kubectl binaries

CLASS = """\
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: nvidia}
handler: nvidia
overhead:
  podFixed: {cpu: 250m, memory: 128Mi}
scheduling:
  nodeSelector: {nvidia.com/gpu.present: "true"}
  tolerations:
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
"""


def _pod(name: str, **spec: object) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "app", "image": "busybox"}], **spec},
        }
    )


@pytest.fixture(scope="module")
def applied(kubectl: Kubectl) -> None:
    out = kubectl("apply", "-f", "-", input=CLASS).stdout
    assert "runtimeclass.node.k8s.io/nvidia created" in out


def test_the_kind_is_discovered_and_explained(kubectl: Kubectl) -> None:
    rows = {line.split()[0]: line.split() for line in kubectl("api-resources").stdout.splitlines()[1:]}
    # no short names: the SHORTNAMES column is empty
    assert rows["runtimeclasses"][1:] == ["node.k8s.io/v1", "false", "RuntimeClass"]
    explained = kubectl("explain", "runtimeclass.handler").stdout
    assert "GROUP:      node.k8s.io" in explained and "KIND:       RuntimeClass" in explained
    assert "FIELD: handler <string>" in explained
    overhead = kubectl("explain", "runtimeclass.overhead").stdout
    assert "podFixed\t<map[string]Quantity>" in overhead


@pytest.mark.parametrize("version", ["1.33", "1.28"])
def test_kubectl_get_shows_the_handler(kubectl: Kubectl, applied: None, version: str) -> None:
    lines = kubectl("get", "runtimeclass", version=version).stdout.splitlines()
    assert lines[0].split() == ["NAME", "HANDLER", "AGE"]
    assert lines[1].split()[:2] == ["nvidia", "nvidia"]


def test_the_stored_class_reads_back_as_written(kubectl: Kubectl, applied: None) -> None:
    stored = json.loads(kubectl("get", "runtimeclass", "nvidia", "-o", "json").stdout)
    assert {k for k in stored if k != "metadata"} == {
        "apiVersion",
        "kind",
        "handler",
        "overhead",
        "scheduling",
    }
    assert stored["overhead"] == {"podFixed": {"cpu": "250m", "memory": "128Mi"}}
    assert "generation" not in stored["metadata"]
    again = kubectl("apply", "-f", "-", input=CLASS).stdout
    assert "runtimeclass.node.k8s.io/nvidia unchanged" in again
    bare = json.loads(
        kubectl(
            "create", "-f", "-", "-o", "json", input=CLASS.replace("nvidia", "runc").split("overhead:")[0]
        ).stdout
    )
    assert {k for k in bare if k != "metadata"} == {"apiVersion", "kind", "handler"}
    # server-side apply creates one as well, and an empty scheduling stays as written (a pointer)
    kata = "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: kata-ssa}\nhandler: kata\nscheduling: {}\n"
    assert (
        "runtimeclass.node.k8s.io/kata-ssa serverside-applied"
        in kubectl("apply", "--server-side", "-f", "-", input=kata).stdout
    )
    assert json.loads(kubectl("get", "runtimeclass", "kata-ssa", "-o", "json").stdout)["scheduling"] == {}


def test_refused_writes_show_kube_s_messages(kubectl: Kubectl, applied: None) -> None:
    typo = kubectl("apply", "-f", "-", input=CLASS.replace("handler:", "handlr:"), check=False)
    assert typo.returncode == 1
    assert 'strict decoding error: unknown field "handlr"' in typo.stderr
    changed = kubectl("patch", "runtimeclass", "nvidia", "-p", '{"handler":"kata"}', check=False)
    assert changed.returncode == 1
    assert 'The RuntimeClass "nvidia" is invalid: handler: Invalid value: "kata": field is immutable' in (
        changed.stderr
    )
    negative = kubectl(
        "apply", "-f", "-", input=CLASS.replace("nvidia", "bad").replace("cpu: 250m", "cpu: -1"), check=False
    )
    assert negative.returncode == 1
    assert 'overhead.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0' in negative.stderr
    # `kubectl replace` fills in the stored resourceVersion itself (its Helper.Replace overwrites); a
    # PUT without one is refused (the Python client's, below)
    assert "runtimeclass.node.k8s.io/nvidia replaced" in kubectl("replace", "-f", "-", input=CLASS).stdout


def test_deprecated_node_labels_draw_a_warning(kubectl: Kubectl) -> None:
    legacy = CLASS.replace("nvidia.com/gpu.present", "beta.kubernetes.io/arch").replace("nvidia", "legacy")
    out = kubectl("apply", "-f", "-", input=legacy)
    assert (
        'Warning: scheduling.nodeSelector: deprecated since v1.14; use "kubernetes.io/arch" instead'
        in out.stderr
    )


def test_a_pod_naming_a_missing_class_is_forbidden(kubectl: Kubectl) -> None:
    refused = kubectl("apply", "-f", "-", input=_pod("x", runtimeClassName="missing"), check=False)
    assert refused.returncode == 1
    assert (
        'Error from server (Forbidden): error when creating "STDIN": pods "x" is forbidden: '
        'pod rejected: RuntimeClass "missing" not found'
    ) in refused.stderr
    assert kubectl("get", "pod", "x", "--ignore-not-found").stdout == ""


def test_a_pod_gets_its_class_s_overhead_and_scheduling(kubectl: Kubectl, applied: None) -> None:
    kubectl("apply", "-f", "-", input=_pod("gpu-job", runtimeClassName="nvidia"))
    overhead = kubectl("get", "pod", "gpu-job", "-o", "jsonpath={.spec.overhead}").stdout
    assert json.loads(overhead) == {"cpu": "250m", "memory": "128Mi"}
    spec = json.loads(kubectl("get", "pod", "gpu-job", "-o", "json").stdout)["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_an_overhead_without_a_class_is_refused_even_an_empty_one(kubectl: Kubectl) -> None:
    """kube decodes `overhead: {}` into an empty map that is not nil, and the plugin refuses it."""
    for name, overhead in (("own", {"cpu": "100m"}), ("empty", {})):
        refused = kubectl("create", "-f", "-", input=_pod(name, overhead=overhead), check=False)
        assert refused.returncode == 1
        assert (
            f'pods "{name}" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass '
            "defined Overhead"
        ) in refused.stderr


def test_a_1_28_tenant_serves_and_enforces_it(
    kubectl: Kubectl, background_loop: BackgroundLoop, tmp_path: Path
) -> None:
    with release_server(background_loop, tmp_path / "v128", "v1.28.15") as kubeconfig:
        kubectl("apply", "-f", "-", input=CLASS, kubeconfig=kubeconfig, version="1.28")
        header = kubectl("get", "runtimeclass", kubeconfig=kubeconfig, version="1.28").stdout.splitlines()[0]
        assert header.split() == ["NAME", "HANDLER", "AGE"]
        refused = kubectl(
            "apply", "-f", "-", input=_pod("x", runtimeClassName="runc"), kubeconfig=kubeconfig, check=False
        )
        assert 'pods "x" is forbidden: pod rejected: RuntimeClass "runc" not found' in refused.stderr


def test_the_python_client_lists_creates_and_is_refused_as_kubectl_is(
    apiserver: RunningAPIServer, applied: None
) -> None:
    api_client = kubernetes.config.new_client_from_config(str(apiserver.kubeconfig))
    node = kubernetes.client.NodeV1Api(api_client)
    core = kubernetes.client.CoreV1Api(api_client)
    created = node.create_runtime_class(
        kubernetes.client.V1RuntimeClass(
            metadata=kubernetes.client.V1ObjectMeta(name="kata"),
            handler="kata",
            overhead=kubernetes.client.V1Overhead(pod_fixed={"memory": "160Mi"}),
        )
    )
    assert created.handler == "kata" and created.overhead.pod_fixed == {"memory": "160Mi"}
    names = [item.metadata.name for item in node.list_runtime_class().items]
    assert {"nvidia", "kata"} <= set(names)
    assert node.read_runtime_class("nvidia").scheduling.node_selector == {"nvidia.com/gpu.present": "true"}

    pod = core.create_namespaced_pod("default", json.loads(_pod("sandboxed", runtimeClassName="kata")))
    assert pod.spec.overhead == {"memory": "160Mi"}
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core.create_namespaced_pod(
            "default", json.loads(_pod("mismatch", runtimeClassName="kata", overhead={"memory": "1Gi"}))
        )
    assert refused.value.status == 403
    assert json.loads(refused.value.body)["message"] == (
        "pods \"mismatch\" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
    )
    with pytest.raises(kubernetes.client.ApiException) as replaced:
        node.replace_runtime_class("kata", {"metadata": {"name": "kata"}, "handler": "kata"})
    assert replaced.value.status == 422
    assert json.loads(replaced.value.body)["message"] == (
        'runtimeclasses.node.k8s.io "kata" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
        "must be specified for an update"
    )
