"""`kubectl debug` and the `pods/ephemeralcontainers` subresource, and quantities written back in kube's
canonical form, against one tenant API server through the real kubectl and the official client.

What the kubelet does with an ephemeral container (runs its command, logs, exec) is in
test_running_lab.py, against the running seed lab.
"""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest
from apiserver_harness import Kubectl, RawClient, RunningAPIServer
from kubernetes.client.rest import ApiException

pytestmark = pytest.mark.slow  # drives real kubectl binaries


@pytest.fixture(scope="module")
def core(apiserver: RunningAPIServer) -> kubernetes.client.CoreV1Api:
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(apiserver.kubeconfig), client_configuration=config)
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))


def _pod(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **extra.pop("metadata", {})},
        "spec": {"nodeName": "worker-1", "containers": [{"name": "app", "image": "cuda:12"}], **extra},
    }


def _get(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def _refusal(err: ApiException) -> tuple[int, list[tuple[str, str]]]:
    body = json.loads(err.body)
    return err.status, [(c["field"], c["message"]) for c in body["details"]["causes"]]


@pytest.mark.parametrize("version", ["1.27", "1.30", "1.33"])
def test_kubectl_debug_adds_an_ephemeral_container_to_a_running_pod(kubectl: Kubectl, version: str) -> None:
    name = f"debugged-{version.replace('.', '-')}"
    kubectl("create", "-f", "-", input=json.dumps(_pod(name)))
    kubectl("debug", name, "--image=busybox", "-c", "probe", "--", "hostname", version=version)
    kubectl("debug", name, "--image=busybox:1.36", "-c", "shell", "--target=app", version=version)
    ephemeral = _get(kubectl, "pod", name)["spec"]["ephemeralContainers"]
    assert [c["name"] for c in ephemeral] == ["probe", "shell"]
    probe, shell = ephemeral
    assert probe["command"] == ["hostname"] and probe["image"] == "busybox"
    # kube's container defaults apply to them too
    assert probe["imagePullPolicy"] == "Always" and shell["imagePullPolicy"] == "IfNotPresent"
    assert probe["terminationMessagePolicy"] == "File"
    assert shell["targetContainerName"] == "app"
    # the subresource answers GET with the pod, as kubectl debug reads it
    described = kubectl("describe", "pod", name).stdout
    assert "Ephemeral Containers:" in described and "probe:" in described


def test_ephemeral_containers_are_added_only_through_their_subresource_as_kube_checks_them(
    kubectl: Kubectl, core: kubernetes.client.CoreV1Api
) -> None:
    kubectl("create", "-f", "-", input=json.dumps(_pod("target")))

    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_pod_ephemeralcontainers(
            "target",
            "default",
            {
                "spec": {
                    "ephemeralContainers": [
                        {
                            "name": "app",
                            "image": "busybox",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                            "ports": [{"containerPort": 80}],
                            "targetContainerName": "nope",
                        }
                    ]
                }
            },
        )
    status, causes = _refusal(refused.value)
    assert status == 422
    assert ("spec.ephemeralContainers[0].name", 'Duplicate value: "app"') in causes
    assert ("spec.ephemeralContainers[0].targetContainerName", 'Not found: "nope"') in causes
    forbidden = "Forbidden: cannot be set for an Ephemeral Container"
    assert ("spec.ephemeralContainers[0].resources", forbidden) in causes
    assert ("spec.ephemeralContainers[0].ports", forbidden) in causes

    pod = core.read_namespaced_pod_ephemeralcontainers("target", "default")
    pod.spec.ephemeral_containers = [kubernetes.client.V1EphemeralContainer(name="dbg", image="busybox")]
    pod.spec.containers[0].image = "cuda:13"  # the subresource keeps only the ephemeral containers' change
    pod.metadata.labels = {"changed": "yes"}
    updated = core.replace_namespaced_pod_ephemeralcontainers("target", "default", pod)
    assert [c.name for c in updated.spec.ephemeral_containers] == ["dbg"]
    assert updated.spec.containers[0].image == "cuda:12" and not updated.metadata.labels

    # once added, an ephemeral container can be neither removed nor changed
    current = core.read_namespaced_pod_ephemeralcontainers("target", "default")
    current.spec.ephemeral_containers = []
    with pytest.raises(ApiException) as removed:
        core.replace_namespaced_pod_ephemeralcontainers("target", "default", current)
    assert _refusal(removed.value) == (
        422,
        [("spec.ephemeralContainers", 'Forbidden: existing ephemeral containers "dbg" may not be removed')],
    )
    current = core.read_namespaced_pod_ephemeralcontainers("target", "default")
    current.spec.ephemeral_containers[0].image = "alpine"
    with pytest.raises(ApiException) as changed:
        core.replace_namespaced_pod_ephemeralcontainers("target", "default", current)
    assert "may not be changed" in json.loads(changed.value.body)["message"]

    # not through the pod itself, neither on create nor on update
    created = kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps(_pod("born-with-one", ephemeralContainers=[{"name": "d", "image": "busybox"}])),
        check=False,
    )
    assert created.returncode == 1
    assert "spec.ephemeralContainers: Forbidden: cannot be set on create" in created.stderr
    patched = kubectl(
        "patch", "pod", "target", "-p", '{"spec":{"ephemeralContainers":[{"name":"x","image":"busybox"}]}}',
        check=False,
    )  # fmt: skip
    assert patched.returncode == 1 and "pod updates may not change fields" in patched.stderr


def test_static_pods_do_not_take_ephemeral_containers(kubectl: Kubectl) -> None:
    mirror = _pod("static-web", metadata={"annotations": {"kubernetes.io/config.mirror": "abc"}})
    kubectl("create", "-f", "-", input=json.dumps(mirror))
    refused = kubectl("debug", "static-web", "--image=busybox", check=False)
    assert refused.returncode == 1
    assert (
        'The Pod "static-web" is invalid: []: Forbidden: static pods do not support ephemeral containers'
        in (refused.stderr)
    )


def test_an_unknown_path_answers_with_kube_s_generic_not_found(apiserver: RunningAPIServer) -> None:
    # kubectl debug tells "no such subresource" from "no such pod" by the empty details; without them
    # kubectl 1.27-1.33 crash with a nil pointer instead of saying what is wrong.
    raw = RawClient(apiserver.kubeconfig)
    missing = raw.request("GET", "/api/v1/namespaces/default/pods/target/nosuch")
    assert missing.status == 404
    assert missing.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server could not find the requested resource",
        "reason": "NotFound",
        "details": {},
        "code": 404,
    }


def test_quantities_come_back_in_kube_s_canonical_form(
    kubectl: Kubectl, core: kubernetes.client.CoreV1Api
) -> None:
    # HAMi's examples write `nvidia.com/gpumem: 3000` unquoted. kube-apiserver decodes every quantity and
    # writes it back canonical, so the official client, which wants strings, can read the pod.
    manifest = """
apiVersion: v1
kind: Pod
metadata: {name: unquoted}
spec:
  nodeName: worker-1
  containers:
  - name: cuda
    image: cuda:12
    resources:
      limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 3000, nvidia.com/gpucores: 30, cpu: 0.5, memory: 1024Mi}
      requests: {cpu: 250m, memory: 0.5Gi}
"""
    kubectl("apply", "-f", "-", input=manifest)
    resources = _get(kubectl, "pod", "unquoted")["spec"]["containers"][0]["resources"]
    assert resources["limits"] == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "3k",
        "nvidia.com/gpucores": "30",
        "cpu": "500m",
        "memory": "1Gi",
    }
    # requests the user did not give are the limits', canonical too
    assert resources["requests"] == {
        "cpu": "250m",
        "memory": "512Mi",
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "3k",
        "nvidia.com/gpucores": "30",
    }
    read = core.read_namespaced_pod("unquoted", "default")
    assert read.spec.containers[0].resources.limits["nvidia.com/gpumem"] == "3k"

    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu"},
        "spec": {"hard": {"limits.nvidia.com/gpumem": 30000, "pods": "10"}},
    }
    kubectl("create", "-f", "-", input=json.dumps(quota))
    assert _get(kubectl, "resourcequota", "gpu")["spec"]["hard"] == {
        "limits.nvidia.com/gpumem": "30k",
        "pods": "10",
    }
