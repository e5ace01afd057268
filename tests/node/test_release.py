"""What a kubelet of each release writes differently, read from kubernetes/kubernetes:
- pkg/features/kube_features.go: DisableNodeKubeProxyVersion alpha (off) 1.29, deprecated and off
  1.31, on 1.33; it had been switched on in 1.31.0 (#123845) and back off for 1.31.1 (#126721), so
  a 1.31.0 kubelet leaves kubeProxyVersion empty and 1.31.1 sets it again.
- RecursiveReadOnlyMounts alpha (off) 1.30, beta (on) 1.31: pkg/kubelet/kubelet_pods.go
  (convertToAPIContainerStatuses) then lists each of the container's mounts in its status, a read-only
  one with recursiveReadOnly Disabled or Enabled.
- PodReadyToStartContainersCondition alpha (off) 1.28, beta (on) 1.29; 1.27 had PodHasNetworkCondition
  (alpha, off). PodHostIPs alpha 1.28, beta 1.29. SupplementalGroupsPolicy alpha 1.31, beta 1.33, where
  the kubelet reports `status.features.supplementalGroupsPolicy`.
"""

from __future__ import annotations

import pytest

from tenantgpu.node import podstatus
from tenantgpu.node.release import KubeletRelease


@pytest.mark.parametrize(
    ("git_version", "proxy"),
    [
        ("v1.27.16", "v1.27.16"),
        ("v1.30.2", "v1.30.2"),
        ("v1.31.0", ""),
        ("v1.31.1", "v1.31.1"),
        ("v1.32.5", "v1.32.5"),
        ("v1.33.0", ""),
        ("v1.35.0", ""),
    ],
)
def test_kube_proxy_version_follows_disable_node_kube_proxy_version(git_version: str, proxy: str) -> None:
    assert KubeletRelease.parse(git_version).kube_proxy_version == proxy


def test_a_version_keeps_its_build_suffix_and_gains_its_v() -> None:
    assert KubeletRelease.parse("v1.30.2+k3s1") == KubeletRelease("v1.30.2+k3s1", 30, 2)
    assert KubeletRelease.parse("1.29.3").version == "v1.29.3"


@pytest.mark.parametrize("bad", ["", "latest", "v2.0.1", "v1.x.3"])
def test_a_version_that_is_not_kubernetes_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a Kubernetes version"):
        KubeletRelease.parse(bad)


def _pod() -> dict[str, object]:
    return {"metadata": {"uid": "u"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def test_a_1_28_kubelet_writes_neither_the_ready_to_start_condition_nor_host_ips() -> None:
    status = podstatus.running_status(_pod(), "10.0.0.5", "10.1.0.2", "2026-12-04T10:00:00Z")
    shaped = KubeletRelease.parse("v1.28.9").pod_status(status)
    assert [c["type"] for c in shaped["conditions"]] == [
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    assert "hostIPs" not in shaped and shaped["hostIP"] == "10.0.0.5"
    # the builder's own status is left as it was
    assert status["conditions"][0]["type"] == "PodReadyToStartContainers" and "hostIPs" in status


def test_a_1_31_kubelet_writes_the_newest_shape_unchanged() -> None:
    status = podstatus.creating_status(_pod(), "10.0.0.5")
    assert KubeletRelease.parse("v1.31.4").pod_status(status) is status


MOUNTS = [
    {
        "name": "kube-api-access-x1",
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        "readOnly": True,
    },
    {"name": "data", "mountPath": "/data"},
    {"name": "model", "mountPath": "/model", "readOnly": True, "recursiveReadOnly": "IfPossible"},
    {"name": "weights", "mountPath": "/weights", "readOnly": True, "recursiveReadOnly": "Disabled"},
]


def test_container_statuses_list_the_mounts_from_1_31() -> None:
    """RecursiveReadOnlyMounts (beta, on, 1.31): every mount in spec order; a read-only one says whether
    it is recursively read-only, `IfPossible` resolved by a runtime that can."""
    pod = _pod()
    pod["spec"] = {
        "containers": [{"name": "c", "image": "busybox", "volumeMounts": MOUNTS}],
        "initContainers": [{"name": "init", "image": "busybox", "volumeMounts": MOUNTS[:1]}],
    }
    status = podstatus.running_status(pod, "10.0.0.5", "10.1.0.2", "2026-12-04T10:00:00Z")
    assert status["containerStatuses"][0]["volumeMounts"] == [
        {
            "name": "kube-api-access-x1",
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            "readOnly": True,
            "recursiveReadOnly": "Disabled",
        },
        {"name": "data", "mountPath": "/data"},
        {"name": "model", "mountPath": "/model", "readOnly": True, "recursiveReadOnly": "Enabled"},
        {"name": "weights", "mountPath": "/weights", "readOnly": True, "recursiveReadOnly": "Disabled"},
    ]
    assert status["initContainerStatuses"][0]["volumeMounts"][0]["recursiveReadOnly"] == "Disabled"
    for older in ("v1.30.2", "v1.28.9"):
        shaped = KubeletRelease.parse(older).pod_status(status)
        for key in ("containerStatuses", "initContainerStatuses"):
            assert all("volumeMounts" not in entry for entry in shaped[key]), (older, key)
    assert "PodReadyToStartContainers" in [
        c["type"] for c in KubeletRelease.parse("v1.30.2").pod_status(status)["conditions"]
    ]
    assert "volumeMounts" in status["containerStatuses"][0]  # the builder's entries are not changed


def test_node_features_from_1_33() -> None:
    assert KubeletRelease.parse("v1.32.5").node_features is None
    assert KubeletRelease.parse("v1.33.1").node_features == {"supplementalGroupsPolicy": True}


def test_runtime_handlers_from_1_31() -> None:
    """RecursiveReadOnlyMounts is beta and on from 1.31, and the kubelet's RuntimeHandlers setter reports
    the runtime's handlers while it (or UserNamespacesSupport) is on: the default handler and each
    configured one (runc; nvidia where the container toolkit added it), each with its features, in one
    order so the Node does not churn."""
    assert KubeletRelease.parse("v1.30.8").runtime_handlers(["runc"]) is None
    features = {"recursiveReadOnlyMounts": True, "userNamespaces": True}
    assert KubeletRelease.parse("v1.31.4").runtime_handlers(["runc"]) == [
        {"name": "", "features": features},
        {"name": "runc", "features": features},
    ]
    handlers = KubeletRelease.parse("v1.33.1").runtime_handlers(["runc", "nvidia"])
    assert [h["name"] for h in handlers or ()] == ["", "nvidia", "runc"]
