"""Requests defaulted from limits: kube's SetDefaults_Pod gives a Pod's containers and init containers
the requests their limits name, and never a pod template's (pkg/apis/core/v1/defaults.go says it is
done there so that it happens "on a v1.Pod and not a v1.PodTemplate"). A Deployment's stored template
therefore keeps its limits alone, and its pods get the requests when they are created."""

from __future__ import annotations

from typing import Any

import pytest

from tenantgpu.apiserver.defaults import default


def _spec() -> dict[str, Any]:
    return {
        "initContainers": [{"name": "init", "image": "x", "resources": {"limits": {"cpu": "250m"}}}],
        "containers": [
            {
                "name": "app",
                "image": "x",
                "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}, "requests": {"cpu": "500m"}},
            }
        ],
    }


def test_a_pods_containers_get_requests_from_their_limits() -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p"}, "spec": _spec()}
    default("Pod", pod)
    assert pod["spec"]["initContainers"][0]["resources"] == {
        "limits": {"cpu": "250m"},
        "requests": {"cpu": "250m"},
    }
    # a request given stays; the limits fill only what is missing
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "nvidia.com/gpu": "1"}


@pytest.mark.parametrize(
    ("kind", "wrap"),
    [
        ("Deployment", lambda t: {"spec": {"selector": {}, "template": t}}),
        ("ReplicaSet", lambda t: {"spec": {"selector": {}, "template": t}}),
        ("StatefulSet", lambda t: {"spec": {"selector": {}, "template": t}}),
        ("DaemonSet", lambda t: {"spec": {"selector": {}, "template": t}}),
        ("Job", lambda t: {"spec": {"template": t}}),
        ("CronJob", lambda t: {"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": t}}}}),
    ],
)
def test_a_templates_containers_keep_their_limits_alone(kind: str, wrap: Any) -> None:
    obj = wrap({"spec": _spec()})
    default(kind, obj)
    spec = obj["spec"]["jobTemplate"]["spec"] if kind == "CronJob" else obj["spec"]
    template = spec["template"]["spec"]
    assert template["initContainers"][0]["resources"] == {"limits": {"cpu": "250m"}}
    assert template["containers"][0]["resources"]["requests"] == {"cpu": "500m"}
    # the template's other defaults (SetDefaults_PodSpec) are still given
    assert template["containers"][0]["terminationMessagePolicy"] == "File"
