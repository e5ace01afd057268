"""LimitRanges and the LimitRanger admission plugin, through kubectl and the official client.

Facts from kube (plugin/pkg/admission/limitranger, pkg/apis/core/v1/defaults.go, core validation):
- a Container item's `default` falls back to its `max`, its `defaultRequest` to `default`, then to `min`;
- on a pod's create, containers get the defaults they lack and the pod the annotation
  `kubernetes.io/limit-ranger: LimitRanger plugin set: <names> request for container <c>; ...`;
- then min / max / maxLimitRequestRatio are checked per container (type Container) and on the pod's sums
  (type Pod); a violation is 403 Forbidden `pods "<name>" is forbidden: <message>`, several in brackets;
- pod updates are not checked again; an invalid LimitRange is 422 with kube's field messages.
The GPU defaults reaching HAMi's webhook are in test_running_lab.py.
"""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest
from apiserver_harness import Kubectl, RunningAPIServer

pytestmark = pytest.mark.slow

NS = "limits"


@pytest.fixture(scope="module")
def core(apiserver: RunningAPIServer, kubectl: Kubectl) -> kubernetes.client.CoreV1Api:
    kubectl("create", "namespace", NS)
    return kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))


def _limit_range(name: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": name},
        "spec": {"limits": list(items)},
    }


def _pod(name: str, **resources: dict[str, str]) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    if resources:
        container["resources"] = resources
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container]},
    }


def _create(kubectl: Kubectl, obj: dict[str, Any], check: bool = True) -> Any:
    return kubectl("create", "-n", NS, "-f", "-", input=json.dumps(obj), check=check)


def test_container_defaults_and_bounds(kubectl: Kubectl, core: kubernetes.client.CoreV1Api) -> None:
    item = {
        "type": "Container",
        "max": {"cpu": "2", "memory": "1Gi"},
        "min": {"cpu": "100m"},
        "default": {"cpu": "500m"},
    }
    _create(kubectl, _limit_range("bounds", item))
    stored = core.read_namespaced_limit_range("bounds", NS).spec.limits[0]
    # the default limit falls back to max, the default request to the default limit, then to min
    assert stored.default == {"cpu": "500m", "memory": "1Gi"}
    assert stored.default_request == {"cpu": "500m", "memory": "1Gi"}
    rows = kubectl("get", "limits", "-n", NS).stdout.splitlines()
    assert rows[0].split() == ["NAME", "CREATED", "AT"] and rows[1].startswith("bounds ")

    _create(kubectl, _pod("plain"))
    pod = core.read_namespaced_pod("plain", NS)
    resources = pod.spec.containers[0].resources
    assert resources.limits == {"cpu": "500m", "memory": "1Gi"}
    assert resources.requests == {"cpu": "500m", "memory": "1Gi"}
    assert pod.metadata.annotations["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu, memory request for container main; cpu, memory limit for container main"
    )

    # a container's own values are kept; only what it lacks is filled in
    _create(kubectl, _pod("own", limits={"cpu": "1"}))
    own = core.read_namespaced_pod("own", NS)
    assert own.spec.containers[0].resources.limits == {"cpu": "1", "memory": "1Gi"}
    assert own.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}
    assert own.metadata.annotations["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: memory request for container main; memory limit for container main"
    )

    big = _create(kubectl, _pod("big", limits={"cpu": "3"}), check=False)
    assert big.returncode != 0
    assert 'pods "big" is forbidden: maximum cpu usage per Container is 2, but limit is 3' in big.stderr
    tiny = _create(
        kubectl, _pod("tiny", requests={"cpu": "50m"}, limits={"cpu": "3", "memory": "2Gi"}), check=False
    )
    assert (
        'pods "tiny" is forbidden: [minimum cpu usage per Container is 100m, but request is 50m, '
        "maximum cpu usage per Container is 2, but limit is 3, maximum memory usage per Container is 1Gi, "
        "but limit is 2Gi]"
    ) in tiny.stderr.replace("\n", " ")
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core.create_namespaced_pod(NS, _pod("py", limits={"cpu": "3"}))
    status = json.loads(refused.value.body)
    assert (refused.value.status, status["reason"]) == (403, "Forbidden")

    # a pod already admitted is not checked again when it is updated
    kubectl("label", "pod", "plain", "-n", NS, "checked=again")
    kubectl("delete", "limitrange", "bounds", "-n", NS)
    _create(kubectl, _pod("free", limits={"cpu": "3"}))


def test_pod_sums_and_ratios(kubectl: Kubectl, core: kubernetes.client.CoreV1Api) -> None:
    _create(
        kubectl,
        _limit_range(
            "sums",
            {"type": "Pod", "max": {"cpu": "1"}},
            {"type": "Container", "maxLimitRequestRatio": {"memory": "2"}},
        ),
    )
    two = _pod("two", requests={"cpu": "600m", "memory": "100Mi"}, limits={"cpu": "600m", "memory": "200Mi"})
    two["spec"]["containers"].append({**two["spec"]["containers"][0], "name": "side"})
    refused = _create(kubectl, two, check=False)
    assert 'pods "two" is forbidden: maximum cpu usage per Pod is 1, but limit is 1200m' in refused.stderr
    greedy = _pod("greedy", requests={"memory": "100Mi"}, limits={"memory": "300Mi", "cpu": "100m"})
    refused = _create(kubectl, greedy, check=False)
    assert (
        "memory max limit to request ratio per Container is 2, but provided ratio is 3.000000"
        in refused.stderr
    )
    _create(kubectl, _pod("fair", requests={"memory": "100Mi"}, limits={"memory": "200Mi", "cpu": "100m"}))
    kubectl("delete", "limitrange", "sums", "-n", NS)


def test_invalid_limit_ranges_are_refused(kubectl: Kubectl, core: kubernetes.client.CoreV1Api) -> None:
    bad = _limit_range(
        "bad",
        {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}},
        {"type": "Pod", "default": {"cpu": "1"}},
        {"type": "Sometimes"},
        {"type": "Container", "default": {"nvidia.com/gpu": "1"}, "defaultRequest": {"nvidia.com/gpu": "0"}},
    )
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core.create_namespaced_limit_range(NS, bad)
    status = json.loads(refused.value.body)
    assert (refused.value.status, status["reason"]) == (422, "Invalid")
    causes = {(c["field"], c["message"]) for c in status["details"]["causes"]}
    assert (
        "spec.limits[0].min[cpu]",
        'Invalid value: "2": min value 2 is greater than max value 1',
    ) in causes
    assert ("spec.limits[1].default", "Forbidden: may not be specified when `type` is 'Pod'") in causes
    assert (
        "spec.limits[2].type",
        'Invalid value: "Sometimes": must be a standard limit type or fully qualified',
    ) in causes
    assert (
        "spec.limits[3].defaultRequest[nvidia.com/gpu]",
        'Invalid value: "0": default value 1 must equal to defaultRequest value 0 in nvidia.com/gpu',
    ) in causes
