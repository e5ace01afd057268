"""kube 1.33's rules for `pods/resize` (ValidatePodResize and the resize strategy), read in
pkg/apis/core/validation/validation.go and pkg/registry/core/pod/strategy.go of a vendored v1.33.13 tree:
what passes through, and each refusal with its field and text. Whole-object refusals use kube's root
path `field.NewPath("")`, which prints as `[]`."""

from __future__ import annotations

import copy
from typing import Any

from tenantgpu.apiserver.podresize import resize_base
from tenantgpu.apiserver.validation import validate


def _stored(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u1", "generation": 1},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "busybox",
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "256Mi"},
                        "limits": {"memory": "512Mi"},
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "Always",
                }
            ],
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "terminationGracePeriodSeconds": 30,
            "schedulerName": "default-scheduler",
            "securityContext": {},
            **spec,
        },
        "status": {
            "phase": "Running",
            "qosClass": "Burstable",
            "containerStatuses": [{"name": "app", "state": {"running": {}}, "resources": {}}],
        },
    }


def _messages(new: dict[str, Any], old: dict[str, Any]) -> list[str]:
    merged = resize_base(new, old)
    return [str(cause) for cause in validate("Pod", merged, old=old, subresource="resize", minor=33)]


def _with(old: dict[str, Any], resources: dict[str, Any], **container: Any) -> dict[str, Any]:
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["resources"] = resources
    new["spec"]["containers"][0].update(container)
    return new


def test_only_the_resources_and_resize_policy_pass_through() -> None:
    old = _stored()
    new = _with(
        old, {"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}, image="nginx"
    )
    new["metadata"]["labels"] = {"x": "y"}
    new["status"]["phase"] = "Failed"
    merged = resize_base(new, old)
    assert merged["spec"]["containers"][0]["image"] == "busybox"
    assert merged["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"
    assert "labels" not in merged["metadata"] and merged["status"]["phase"] == "Running"
    assert _messages(new, old) == []


def test_removing_a_request_or_a_limit_is_refused() -> None:
    old = _stored()
    assert _messages(_with(old, {"requests": {"cpu": "500m"}, "limits": {}}), old) == [
        "spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed",
        "spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed",
    ]


def test_a_memory_limit_may_be_lowered_only_where_the_container_restarts_for_memory() -> None:
    old = _stored()
    lowered = {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"memory": "300Mi"}}
    assert _messages(_with(old, lowered), old) == [
        "spec.containers[0].resources.limits[memory]: Forbidden: "
        "memory limits cannot be decreased unless resizePolicy is RestartContainer"
    ]
    restarting = _stored()
    policy = [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]
    restarting["spec"]["containers"][0]["resizePolicy"] = policy
    assert _messages(_with(restarting, lowered, resizePolicy=policy), restarting) == []


def test_adding_a_memory_limit_counts_as_lowering_it() -> None:
    old = _stored()
    old["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "1"}
    added = {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    assert _messages(_with(old, added), old) == [
        "spec.containers[0].resources.limits[memory]: Forbidden: "
        "memory limits cannot be added unless resizePolicy is RestartContainer"
    ]


def test_a_resize_policy_may_not_change_and_only_cpu_and_memory_may() -> None:
    old = _stored()
    same = old["spec"]["containers"][0]["resources"]
    policy = [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]
    assert _messages(_with(old, same, resizePolicy=policy), old) == [
        "spec: Forbidden: only cpu and memory resources are mutable"
    ]
    grown = copy.deepcopy(same)
    grown["requests"]["nvidia.com/gpu"] = "1"
    grown["limits"]["nvidia.com/gpu"] = "1"
    assert _messages(_with(old, grown), old) == ["spec: Forbidden: only cpu and memory resources are mutable"]


def test_init_containers_are_immutable_and_sidecars_resizable() -> None:
    init = {"name": "setup", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
    sidecar = {**init, "name": "proxy", "restartPolicy": "Always"}
    old = _stored(initContainers=[init, sidecar])
    new = copy.deepcopy(old)
    new["spec"]["initContainers"][0]["resources"] = {"requests": {"cpu": "200m"}}
    assert _messages(new, old) == ["spec: Forbidden: resources for non-sidecar init containers are immutable"]
    new = copy.deepcopy(old)
    new["spec"]["initContainers"][1]["resources"] = {"requests": {"cpu": "200m"}}
    assert _messages(new, old) == []


def test_containers_may_not_be_added_or_renamed() -> None:
    old = _stored()
    new = copy.deepcopy(old)
    new["spec"]["containers"].append({**old["spec"]["containers"][0], "name": "extra"})
    assert "spec.containers: Forbidden: containers may not be added or removed on resize" in _messages(
        new, old
    )
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["name"] = "renamed"
    assert (
        "spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize"
        in _messages(new, old)
    )


def test_the_qos_class_may_not_change() -> None:
    old = _stored()
    guaranteed = {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}
    assert _messages(_with(old, guaranteed), old) == [
        'spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing'
    ]


def test_a_node_without_resize_support_is_refused() -> None:
    old = _stored()
    del old["status"]["containerStatuses"][0]["resources"]
    new = _with(old, {"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"memory": "512Mi"}})
    assert _messages(new, old) == ["spec: Forbidden: Pod running on node without support for resize"]


def test_static_windows_and_pod_level_resources_pods_cannot_be_resized_at_all() -> None:
    bigger = {"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
    static = _stored()
    static["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    assert _messages(_with(static, bigger), static) == ["[]: Forbidden: static pods cannot be resized"]
    windows = _stored(os={"name": "windows"})
    assert _messages(_with(windows, bigger), windows) == ["[]: Forbidden: windows pods cannot be resized"]
    pod_level = _stored(resources={"requests": {"cpu": "1"}})
    assert _messages(_with(pod_level, bigger), pod_level) == [
        "[]: Forbidden: pods with pod-level resources cannot be resized"
    ]
