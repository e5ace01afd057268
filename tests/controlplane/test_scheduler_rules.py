"""The default scheduler's pure rules: extended-resource demand and kube-scheduler's failure summary."""

from __future__ import annotations

from collections import Counter

from tenantgpu.controlplane.nodelifecycle import has_unreachable_taints, last_heartbeat
from tenantgpu.controlplane.scheduler import extended_requests, failure_message


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
    message = failure_message(3, Counter({"Insufficient cpu": 2, "node(s) were unschedulable": 1}))
    assert message == "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) were unschedulable."
    assert failure_message(0, Counter()) == "no nodes available to schedule pods"


def test_heartbeat_prefers_the_newest_sign_of_life() -> None:
    node = {"status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}}
    lease = {"spec": {"renewTime": "2026-01-01T00:00:30.000000Z"}}
    assert last_heartbeat(node, lease).second == 30
    assert last_heartbeat(node, None).second == 0
    assert last_heartbeat({}, None) is None
    assert not has_unreachable_taints(node)
