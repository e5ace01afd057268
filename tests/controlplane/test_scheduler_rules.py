"""The default scheduler's pure rules: extended-resource demand and kube-scheduler's failure summary."""

from __future__ import annotations

from collections import Counter

from tenantgpu.controlplane.nodelifecycle import has_unreachable_taints, last_heartbeat
from tenantgpu.controlplane.scheduler import extended_requests, failure_message
from tenantgpu.gpushare.basics import PodDemand, pod_demand


def test_extended_requests_sum_app_containers_and_take_the_largest_init_container() -> None:
    pod = {
        "spec": {
            "initContainers": [{"resources": {"limits": {"nvidia.com/gpu": "3"}}}],
            "containers": [
                {"resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "1"}}},
                {"resources": {"requests": {"nvidia.com/gpumem": "4000"}, "limits": {"nvidia.com/gpu": "1"}}},
            ],
        }
    }
    assert extended_requests(pod) == Counter({"nvidia.com/gpu": 3, "nvidia.com/gpumem": 4000})


def test_failure_message_in_kube_schedulers_words() -> None:
    """FitError.Error(): the histogram's entries sorted as strings (`1 …` before `2 …`), then
    DefaultPreemption's own FitError after the same ` %v.` separator, hence the closing `..`. A cordoned
    node is UnschedulableAndUnresolvable, so preemption is not helpful there; where cpu is short it
    looks for victims, and with every pod at the default priority finds none."""
    reasons = {"a": "Insufficient cpu", "b": "Insufficient cpu", "c": "node(s) were unschedulable"}
    assert failure_message(3, reasons) == (
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu. preemption: 0/3 nodes are"
        " available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.."
    )
    assert failure_message(1, {"a": "Insufficient cpu"}, "Never") == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.."
    )
    assert failure_message(0, {}) == "no nodes available to schedule pods"


def test_heartbeat_prefers_the_newest_sign_of_life() -> None:
    node = {"status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}}
    lease = {"spec": {"renewTime": "2026-01-01T00:00:30.000000Z"}}
    assert last_heartbeat(node, lease).second == 30
    assert last_heartbeat(node, None).second == 0
    assert last_heartbeat({}, None) is None
    assert not has_unreachable_taints(node)


def _cpu(amount: str, **fields: str) -> dict:
    return {"resources": {"requests": {"cpu": amount, "nvidia.com/gpu": amount}}, **fields}


def test_sidecars_run_beside_the_containers_and_every_init_container_started_after_them() -> None:
    """kube's PodRequests, which NodeResourcesFit charges: an init container with restartPolicy Always
    keeps running, so it adds to the app containers and to each later init container."""
    sidecar = _cpu("1", restartPolicy="Always")
    cases = [
        # app 2 + sidecar 1 = 3; the init container after the sidecar runs beside it: 5 + 1 = 6
        ([_cpu("2")], [sidecar, _cpu("5")], 6),
        # an init container before the sidecar runs alone: max(2 + 1, 5) = 5, not 6
        ([_cpu("2")], [_cpu("5"), sidecar], 5),
        # a large app side wins over the init sequence: 4 + 1 = 5 against 3 + 1 = 4
        ([_cpu("4")], [sidecar, _cpu("3")], 5),
        # two sidecars add up on both sides: 1 + 1 + 1 = 3, and 2 + 1 + 1 = 4 for the last init container
        ([_cpu("1")], [sidecar, sidecar, _cpu("2")], 4),
    ]
    for containers, inits, expected in cases:
        pod = {"spec": {"containers": containers, "initContainers": inits}}
        assert pod_demand(pod).cpu_milli == expected * 1000, (containers, inits)
        assert extended_requests(pod) == Counter({"nvidia.com/gpu": expected}), (containers, inits)


def test_pod_overhead_is_charged_on_top_of_the_containers() -> None:
    pod = {"spec": {"containers": [_cpu("2")], "overhead": {"cpu": "250m", "memory": "64Mi"}}}
    assert pod_demand(pod) == PodDemand(cpu_milli=2250, memory=64 * 2**20)
