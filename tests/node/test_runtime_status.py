"""What the kubelet of 1.33 copies from the container runtime into a container's status, read from
kubernetes/kubernetes:
- pkg/kubelet/kubelet_pods.go, convertToAPIContainerStatuses: with InPlacePodVerticalScaling (beta, on,
  1.33) `status.resources` is set for every container the runtime knows (`convertContainerStatusResources`):
  the allocated resources as they are when the container is not running; when it runs, the CPU limit,
  the CPU request and the memory limit as the runtime reads them back (a CPU request at or below
  cm.MinShares keeps the allocated value). A container still waiting to be created has none. With
  SupplementalGroupsPolicy (beta, on, 1.33) `status.user` is the runtime's `ContainerUser`.
- pkg/kubelet/kuberuntime/helpers_linux.go: milliCPUToShares floors, sharesToMilliCPU rounds up, so a CPU
  request survives the round trip; the memory limit comes back as a binary-SI quantity of bytes, which
  apimachinery prints with the largest power of 1024 that divides it, or as a bare number.
- pkg/kubelet/kuberuntime/kuberuntime_container_linux.go / security_context.go: the runtime gets the pod's
  fsGroup and supplementalGroups as supplemental groups; runAsUser and runAsGroup, the container's over
  the pod's.
"""

from __future__ import annotations

from tenantgpu.node import podstatus
from tenantgpu.node.release import KubeletRelease
from tenantgpu.node.runtimestatus import binary_bytes, container_user, status_resources, with_runtime_fields

GPU_RESOURCES = {
    "limits": {"cpu": "1500m", "memory": "1G", "nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000"},
    "requests": {"cpu": "100m", "memory": "512Mi", "nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000"},
}


def _pod() -> dict:
    return {
        "metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
        "spec": {
            "securityContext": {"runAsUser": 1000, "fsGroup": 2000, "supplementalGroups": [4000, 2000]},
            "initContainers": [{"name": "fetch", "image": "busybox"}],
            "containers": [
                {"name": "train", "image": "cuda", "resources": GPU_RESOURCES},
                {"name": "side", "image": "busybox", "securityContext": {"runAsUser": 0, "runAsGroup": 5}},
            ],
        },
    }


def test_a_running_container_reports_its_cgroup_values() -> None:
    """Memory read back in bytes: `1G` is not a whole number of KiB, so it prints as a bare number; the
    CPU values, the memory request and the GPU's extended resources are what was allocated."""
    assert status_resources(GPU_RESOURCES, running=True) == {
        "limits": {
            "cpu": "1500m",
            "memory": "1000000000",
            "nvidia.com/gpu": "1",
            "nvidia.com/gpumem": "8000",
        },
        "requests": {"cpu": "100m", "memory": "512Mi", "nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000"},
    }
    assert status_resources({"limits": {"memory": "1536Mi"}}, running=True) == {
        "limits": {"memory": "1536Mi"}
    }
    assert status_resources({"limits": {"memory": "2Gi", "cpu": "2"}}, running=True)["limits"] == {
        "memory": "2Gi",
        "cpu": "2",
    }


def test_a_container_that_is_not_running_reports_its_allocation_as_written() -> None:
    assert status_resources(GPU_RESOURCES, running=False) == GPU_RESOURCES
    assert status_resources({}, running=True) == {}
    assert status_resources({}, running=False) == {}


def test_cpu_requests_survive_the_shares_round_trip() -> None:
    for milli in (3, 7, 99, 100, 101, 333, 999, 1001, 12345):
        request = f"{milli}m"
        assert status_resources({"requests": {"cpu": request}}, running=True) == {
            "requests": {"cpu": request}
        }
    # at or below MinShares the allocated value is kept; no CPU appears where none was requested
    assert status_resources({"requests": {"cpu": "1m"}}, running=True) == {"requests": {"cpu": "1m"}}
    assert status_resources({"requests": {"memory": "1Gi"}}, running=True) == {"requests": {"memory": "1Gi"}}


def test_binary_bytes_prints_as_apimachinery_does() -> None:
    assert binary_bytes(134217728) == "128Mi"
    assert binary_bytes(1000000000) == "1000000000"
    assert binary_bytes(1023) == "1023"
    assert binary_bytes(1024) == "1Ki"
    assert binary_bytes(3 * 2**60) == "3Ei"
    assert binary_bytes(2**70) == "1024Ei"


def test_the_user_is_the_security_contexts_or_root() -> None:
    spec = _pod()["spec"]
    train, side = spec["containers"]
    assert container_user(spec, train) == {
        "linux": {"uid": 1000, "gid": 0, "supplementalGroups": [0, 2000, 4000]}
    }
    assert container_user(spec, side) == {
        "linux": {"uid": 0, "gid": 5, "supplementalGroups": [5, 2000, 4000]}
    }
    bare = {"containers": [{"name": "c"}]}
    assert container_user(bare, bare["containers"][0]) == {
        "linux": {"uid": 0, "gid": 0, "supplementalGroups": [0]}
    }


def test_created_containers_get_both_fields_and_waiting_ones_neither() -> None:
    pod = _pod()
    creating = podstatus.creating_status(pod, "10.0.0.5")
    assert with_runtime_fields(creating, pod["spec"])["containerStatuses"] == creating["containerStatuses"]
    running = podstatus.running_status(pod, "10.0.0.5", "10.244.0.7", "2026-12-06T08:00:00Z")
    shaped = with_runtime_fields(running, pod["spec"])
    train, side = shaped["containerStatuses"]
    assert train["resources"]["limits"]["memory"] == "1000000000"
    assert train["user"]["linux"]["uid"] == 1000
    assert side["resources"] == {}  # no resources: `{}`, as the kubelet writes an empty allocation
    (init,) = shaped["initContainerStatuses"]
    assert init["resources"] == {} and init["user"]["linux"]["supplementalGroups"] == [0, 2000, 4000]
    assert "resources" not in running["containerStatuses"][0]  # the given entries are not changed
    ended = podstatus.terminated_status(
        pod, "10.0.0.5", "10.244.0.7", "2026-12-06T08:00:00Z", "2026-12-06T08:00:01Z", {"train": 0, "side": 0}
    )
    # a container that ended reports its allocation unchanged: `1G` as written
    assert with_runtime_fields(ended, pod["spec"])["containerStatuses"][0]["resources"] == GPU_RESOURCES


def test_only_a_1_33_kubelet_reports_them() -> None:
    assert KubeletRelease.parse("v1.33.1").reports_container_runtime
    assert not KubeletRelease.parse("v1.32.5").reports_container_runtime
    assert not KubeletRelease.parse("v1.27.16").reports_container_runtime
