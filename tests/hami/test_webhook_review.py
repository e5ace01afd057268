"""AdmissionReview in and out: v1beta1 and v1, base64 JSONPatch, HAMi's denials."""

from __future__ import annotations

import base64
import json

import pytest

from tenantgpu.gpushare import SharingConfig
from tenantgpu.gpushare.jsonpatch import apply
from tenantgpu.hami.webhook import review_response
from tenantgpu.klog import ComponentLog

CFG = SharingConfig()


def _review(api_version: str, pod: dict) -> dict:
    return {
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {
            "uid": "4b5f-uid",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "team-a",
            "operation": "CREATE",
            "object": pod,
        },
    }


def _gpu_pod(**limits: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]},
    }


@pytest.mark.parametrize("version", ["admission.k8s.io/v1beta1", "admission.k8s.io/v1"])
def test_gpu_pod_gets_hami_scheduler_via_base64_jsonpatch(version: str) -> None:
    out = review_response(_review(version, _gpu_pod(**{"nvidia.com/gpumem": "3000"})), CFG)
    assert out["apiVersion"] == version and out["kind"] == "AdmissionReview"
    response = out["response"]
    assert response["uid"] == "4b5f-uid" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    pod = _gpu_pod(**{"nvidia.com/gpumem": "3000"})
    mutated = apply(pod, patch)
    assert mutated["spec"]["schedulerName"] == "hami-scheduler"
    # webhook defaulting: gpumem without a GPU count gets nvidia.com/gpu = defaultGPUNum (1)
    assert str(mutated["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]) == "1"


def test_pod_without_gpu_is_allowed_untouched() -> None:
    pod = _gpu_pod(cpu="1")
    response = review_response(_review("admission.k8s.io/v1", pod), CFG)["response"]
    assert response["allowed"] is True and "patch" not in response


def test_privileged_gpu_pod_is_denied_with_hamis_message() -> None:
    pod = _gpu_pod(**{"nvidia.com/gpu": "1"})
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    response = review_response(_review("admission.k8s.io/v1beta1", pod), CFG)["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert "container c is privileged" in response["status"]["message"]


def test_pod_with_node_name_is_denied() -> None:
    pod = _gpu_pod(**{"nvidia.com/gpu": "1"})
    pod["spec"]["nodeName"] = "w1"
    response = review_response(_review("admission.k8s.io/v1", pod), CFG)["response"]
    assert response["allowed"] is False and "pod has node assigned" in response["status"]["message"]


def _logged(pod: dict) -> list[str]:
    """What HAMi's webhook writes to its container's log while it answers a review of `pod`."""
    klog = ComponentLog()
    review_response(_review("admission.k8s.io/v1", pod), CFG, klog=klog)
    return [line.split(None, 3)[3] for line in klog.lines()]  # without the date, time and pid


def test_the_webhook_logs_only_its_refusals_as_hami_does_at_its_default_verbosity() -> None:
    assert _logged(_gpu_pod(**{"nvidia.com/gpumem": "3000"})) == []
    privileged = _gpu_pod(**{"nvidia.com/gpu": "1"})
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    assert _logged(privileged) == [
        "webhook.go:100] Processing admission hook for pod team-a/p, UID:  - Denying admission as container"
        " c is privileged"
    ]
    placed = _gpu_pod(**{"nvidia.com/gpu": "1"})
    placed["spec"]["nodeName"] = "w1"
    assert _logged(placed) == [
        "webhook.go:110] Processing admission hook for pod team-a/p, UID:  - Pod already has node assigned"
    ]
    empty = _gpu_pod()
    empty["spec"]["containers"] = []
    klog = ComponentLog()
    review_response(_review("admission.k8s.io/v1", empty), CFG, klog=klog)
    [line] = klog.lines()
    assert line.startswith("W") and line.endswith("- Denying admission as pod has no containers")
