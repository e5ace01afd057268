"""A container's resizePolicy is refused as kube-apiserver refuses it (validation.go's
validateResizePolicy, called for every container since kubernetes#116857, 1.27; the check against a pod
restartPolicy of Never is kubernetes#118768, 1.28). kube reports each error but a repeat under the list's
path without an index. The field is stored only where InPlacePodVerticalScaling is on (1.33 tenants;
tests/e2e/test_feature_gates_e2e.py), and kube does not default it."""

from __future__ import annotations

from typing import Any

from tenantgpu.apiserver.defaults import default
from tenantgpu.apiserver.validation import validate


def pod(policies: list[dict[str, Any]], restart_policy: str = "Always") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {
            "restartPolicy": restart_policy,
            "containers": [{"name": "main", "image": "cuda", "resizePolicy": policies}],
        },
    }


def errors(obj: dict[str, Any]) -> list[str]:
    default("Pod", obj)
    return [str(c) for c in validate("Pod", obj)]


def test_the_policies_users_write_are_valid() -> None:
    both = [
        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
        {"resourceName": "memory", "restartPolicy": "RestartContainer"},
    ]
    assert errors(pod(both)) == []
    assert errors(pod(both[:1], "Never")) == []


def test_one_known_policy_per_resource() -> None:
    policies = [
        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
        {"resourceName": "cpu", "restartPolicy": "RestartContainer"},
        {"resourceName": "nvidia.com/gpu", "restartPolicy": "Sometimes"},
        {"resourceName": "", "restartPolicy": ""},
    ]
    assert errors(pod(policies)) == [
        'spec.containers[0].resizePolicy[1]: Duplicate value: "cpu"',
        'spec.containers[0].resizePolicy: Unsupported value: "nvidia.com/gpu": supported values: "cpu", '
        '"memory"',
        'spec.containers[0].resizePolicy: Unsupported value: "Sometimes": supported values: "NotRequired", '
        '"RestartContainer"',
        "spec.containers[0].resizePolicy: Required value",
        "spec.containers[0].resizePolicy: Required value",
    ]


def test_a_pod_that_never_restarts_takes_only_not_required() -> None:
    restart = [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]
    assert errors(pod(restart, "Never")) == [
        "spec.containers[0].resizePolicy: Invalid value: \"RestartContainer\": must be 'NotRequired' when "
        "`restartPolicy` is 'Never'"
    ]
    assert errors(pod(restart, "OnFailure")) == []
