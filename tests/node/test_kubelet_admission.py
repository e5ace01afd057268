"""The kubelet's own admission (kube's predicate admit handler): the reasons and texts a real kubelet
gives a pod it refuses. Facts from kubernetes' pkg/kubelet/lifecycle/predicate.go (the OS checks, the
`OutOf<resource>` reasons, `Node didn't have enough resource: …`, `Predicate <plugin> failed: …`, only
the first failure reported), pkg/scheduler's AdmissionCheck (NodeResourcesFit, then NodeAffinity,
NodeName, NodePorts) and noderesources' fitsRequest (pods first, then cpu, memory, ephemeral storage,
scalar resources; an extended resource the node does not advertise is left out)."""

from __future__ import annotations

from typing import Any

from tenantgpu.node.admission import Rejection, admit, host_ports, pod_requests

NODE: dict[str, Any] = {
    "metadata": {"name": "w1", "labels": {"kubernetes.io/os": "linux", "gpu": "on"}},
    "status": {
        "allocatable": {
            "cpu": "2",
            "memory": "4Gi",
            "pods": "3",
            "ephemeral-storage": "10Gi",
            "nvidia.com/gpu": "10",
        }
    },
}


def _pod(requests: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if requests is not None:
        container["resources"] = {"requests": requests}
    return {
        "metadata": {"name": "p", "labels": {}},
        "spec": {"nodeName": "w1", "containers": [container], **spec},
    }


def test_a_pod_that_fits_is_admitted() -> None:
    assert admit(_pod({"cpu": "500m", "memory": "1Gi"}), NODE, [{"cpu": 1000}]) is None


def test_too_little_cpu_left_is_out_of_cpu_with_milli_cpu_figures() -> None:
    rejection = admit(_pod({"cpu": "1500m"}), NODE, [{"cpu": 1000}])
    assert rejection == Rejection(
        "OutOfcpu", "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"
    )


def test_memory_is_counted_in_bytes() -> None:
    rejection = admit(_pod({"memory": "3Gi"}), NODE, [{"memory": 2 * 1024**3}])
    assert rejection is not None and rejection.reason == "OutOfmemory"
    assert rejection.message == (
        "Node didn't have enough resource: memory, requested: 3221225472, used: 2147483648, capacity: 4294967296"
    )


def test_the_pod_count_is_checked_first_even_for_a_pod_that_requests_nothing() -> None:
    rejection = admit(_pod({"cpu": "100"}), NODE, [{}, {}, {}])
    assert rejection == Rejection(
        "OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"
    )


def test_cpu_is_reported_before_memory() -> None:
    rejection = admit(_pod({"cpu": "3", "memory": "8Gi"}), NODE, [])
    assert rejection is not None and rejection.reason == "OutOfcpu"


def test_an_extended_resource_the_node_advertises_is_counted() -> None:
    rejection = admit(_pod({"nvidia.com/gpu": "4"}), NODE, [{"nvidia.com/gpu": 7}])
    assert rejection == Rejection(
        "OutOfnvidia.com/gpu",
        "Node didn't have enough resource: nvidia.com/gpu, requested: 4, used: 7, capacity: 10",
    )


def test_an_extended_resource_the_node_does_not_advertise_is_left_out() -> None:
    assert admit(_pod({"example.com/dongle": "1"}), NODE, []) is None


def test_hugepages_the_node_does_not_have_are_insufficient() -> None:
    rejection = admit(_pod({"hugepages-2Mi": "4Mi", "memory": "4Mi"}), NODE, [])
    assert rejection is not None and rejection.reason == "OutOfhugepages-2Mi"
    assert rejection.message.endswith("requested: 4194304, used: 0, capacity: 0")


def test_limits_stand_for_missing_requests_and_the_overhead_is_added() -> None:
    pod = _pod(overhead={"cpu": "250m"})
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    assert pod_requests(pod) == {"cpu": 1250}


def test_init_containers_need_their_own_peak_and_sidecars_add_up() -> None:
    pod = _pod({"cpu": "500m"})
    pod["spec"]["initContainers"] = [
        {"name": "setup", "resources": {"requests": {"cpu": "1500m"}}},
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
    ]
    assert pod_requests(pod) == {"cpu": 1500}
    pod["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] = "200m"
    assert pod_requests(pod) == {"cpu": 600}


def test_the_os_label_must_match_the_node() -> None:
    pod = _pod()
    pod["metadata"]["labels"]["kubernetes.io/os"] = "windows"
    assert admit(pod, NODE, []) == Rejection(
        "PodOSSelectorNodeLabelDoesNotMatch",
        "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
    )


def test_a_windows_pod_is_refused_on_a_linux_node() -> None:
    assert admit(_pod(os={"name": "windows"}), NODE, []) == Rejection(
        "PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS"
    )


def test_a_node_selector_that_does_not_match_fails_node_affinity() -> None:
    assert admit(_pod(nodeSelector={"gpu": "off"}), NODE, []) == Rejection(
        "NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
    )


def test_a_host_port_in_use_fails_node_ports() -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    expected = Rejection(
        "NodePorts", "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
    )
    assert admit(pod, NODE, [{}], ports_in_use=[("0.0.0.0", "TCP", 8080)]) == expected
    assert admit(pod, NODE, [{}], ports_in_use=[("10.0.0.1", "TCP", 8080)]) == expected
    assert admit(pod, NODE, [{}], ports_in_use=[("0.0.0.0", "UDP", 8080)]) is None
    assert host_ports(pod) == [("0.0.0.0", "TCP", 8080)]


def test_only_no_execute_taints_count_and_not_for_static_pods() -> None:
    node = {**NODE, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}
    assert admit(_pod(), node, []) is None
    node = {**NODE, "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]}}
    assert admit(_pod(), node, []) == Rejection(
        "TaintToleration", "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
    )
    assert admit(_pod(), node, [], static=True) is None
    assert admit(_pod(tolerations=[{"key": "k", "operator": "Exists"}]), node, []) is None


def test_resources_are_checked_before_affinity() -> None:
    rejection = admit(_pod({"cpu": "3"}, nodeSelector={"gpu": "off"}), NODE, [])
    assert rejection is not None and rejection.reason == "OutOfcpu"
