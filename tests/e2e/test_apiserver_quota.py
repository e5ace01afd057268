"""ResourceQuota: creates beyond the quota are refused, and status.used follows the namespace's pods."""

from __future__ import annotations

import time

from apiserver_harness import RawClient, RunningAPIServer


def _pod(name: str, cpu: str | None = "1", gpu: str | None = None) -> dict:
    limits = {}
    if cpu:
        limits["cpu"] = cpu
        limits["memory"] = "64Mi"
    if gpu:
        limits["nvidia.com/gpu"] = gpu
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}]},
    }


def _used(raw: RawClient, name: str, key: str, want: str) -> str:
    deadline = time.monotonic() + 5
    value = ""
    while time.monotonic() < deadline:
        status = (
            raw.request("GET", f"/api/v1/namespaces/quota/resourcequotas/{name}").json().get("status") or {}
        )
        value = (status.get("used") or {}).get(key, "")
        if value == want:
            break
        time.sleep(0.05)
    return value


def test_quota_refuses_the_pod_that_would_exceed_it(apiserver: RunningAPIServer) -> None:
    raw = RawClient(apiserver.kubeconfig)
    raw.request("POST", "/api/v1/namespaces", {"metadata": {"name": "quota"}})
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "compute"},
        "spec": {"hard": {"requests.cpu": "2", "pods": "5", "requests.nvidia.com/gpu": "1"}},
    }
    assert raw.request("POST", "/api/v1/namespaces/quota/resourcequotas", quota).status == 201
    assert raw.request("POST", "/api/v1/namespaces/quota/pods", _pod("a")).status == 201
    assert raw.request("POST", "/api/v1/namespaces/quota/pods", _pod("b", gpu="1")).status == 201
    assert _used(raw, "compute", "requests.cpu", "2") == "2"
    refused = raw.request("POST", "/api/v1/namespaces/quota/pods", _pod("c", cpu="500m"))
    assert refused.status == 403 and refused.json()["reason"] == "Forbidden"
    assert refused.json()["message"] == (
        'pods "c" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, '
        "used: requests.cpu=2, limited: requests.cpu=2"
    )
    unspecified = raw.request("POST", "/api/v1/namespaces/quota/pods", _pod("d", cpu=None))
    assert unspecified.status == 403
    assert "failed quota: compute: must specify requests.cpu for: main" in unspecified.json()["message"]
    raw.request("DELETE", "/api/v1/namespaces/quota/pods/a")
    assert _used(raw, "compute", "requests.cpu", "1") == "1"
    assert raw.request("POST", "/api/v1/namespaces/quota/pods", _pod("c", cpu="500m")).status == 201
    assert _used(raw, "compute", "pods", "2") == "2"
    status = raw.request("GET", "/api/v1/namespaces/quota/resourcequotas/compute").json()["status"]
    assert status["hard"] == quota["spec"]["hard"]
    assert status["used"]["requests.nvidia.com/gpu"] == "1"
