"""The kubelet's room for a critical pod: which pods it evicts, and when it refuses all the same.

Facts from kubernetes v1.33 (vendored in openshift/microshift, deps/github.com/openshift/kubernetes):
- pkg/kubelet/preemption/preemption.go: HandleAdmissionFailure passes a pod that is not critical on as
  it was refused; for a critical one, any reason that is no InsufficientResourceError stands (the
  first of them), otherwise getPodsToPreempt chooses the victims: guaranteed pods only as far as
  evicting every burstable and best-effort pod would not do, then burstable, then best-effort ones,
  each class by the smallest "distance" (the squared unmet fraction of each requirement), a tie going
  to the pod with the smaller memory, then cpu, request (a full tie to the later pod).
  The error text is "no set of running pods found to reclaim resources: [(res: cpu, q: 1000), ]".
- pkg/kubelet/types/pod_update.go: IsCriticalPod (static, mirror, priority >= 2000000000) and
  Preemptable (critical over non-critical, or a strictly higher priority).
- pkg/api/v1/resource/helpers.go GetResourceRequest: containers summed, at least the largest init
  container, overhead only on a non-zero total, `pods` always 1.
- pkg/kubelet/lifecycle/predicate.go: the predicate check reports every reason, resources first.
"""

from __future__ import annotations

from typing import Any

from tenantgpu.node.admission import Rejection, failures
from tenantgpu.node.criticalpods import (
    Preemption,
    Running,
    handle_failure,
    is_critical,
    preemptable,
    request,
)

NODE: dict[str, Any] = {
    "metadata": {"name": "w1", "labels": {"kubernetes.io/os": "linux"}},
    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
}


def _pod(
    name: str,
    cpu: str | None = None,
    memory: str | None = None,
    *,
    qos: str = "Burstable",
    priority: int | None = None,
    **spec: Any,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    pod: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}], **spec},
        "status": {"qosClass": qos},
    }
    if priority is not None:
        pod["spec"]["priority"] = priority
    return pod


CRITICAL = Running(
    _pod("critical", cpu="2", priority=2_000_001_000, priorityClassName="system-node-critical")
)


def _admitted(*pods: dict[str, Any]) -> list[dict[str, int]]:
    from tenantgpu.node.admission import pod_requests

    return [pod_requests(p) for p in pods]


def _handle(admit: Running, *running: dict[str, Any]) -> Rejection | Preemption:
    found = failures(admit.pod, NODE, _admitted(*running))
    assert found, "the node had room: nothing to handle"
    return handle_failure(admit, found, [Running(p) for p in running])


def test_what_counts_as_critical() -> None:
    assert is_critical(_pod("p", priority=2_000_000_000))
    assert is_critical(_pod("p", priority=2_000_001_000))
    assert not is_critical(_pod("p", priority=1_999_999_999))
    assert not is_critical(_pod("p"))
    assert is_critical(_pod("p"), static=True)  # static and mirror pods, whatever their priority


def test_preemptable_critical_over_the_rest_or_strictly_higher_priority() -> None:
    assert preemptable(CRITICAL, Running(_pod("v", priority=100)))
    assert preemptable(CRITICAL, Running(_pod("v")))  # no priority at all
    assert not preemptable(CRITICAL, Running(_pod("v"), static=True))  # critical too, no priority
    assert preemptable(
        CRITICAL, Running(_pod("v", priority=2_000_000_000))
    )  # both critical: priority decides
    assert not preemptable(Running(_pod("a", priority=10)), Running(_pod("b", priority=10)))
    assert preemptable(Running(_pod("a", priority=11)), Running(_pod("b", priority=10)))


def test_request_sums_containers_takes_the_largest_init_container_and_overhead_only_on_a_total() -> None:
    pod = {
        "spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "1Mi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "250m"}}},
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1"}}}],
            "overhead": {"cpu": "100m", "ephemeral-storage": "1Gi"},
        }
    }
    assert request(pod, "cpu") == 1100
    assert request(pod, "memory") == 1024**2
    assert request(pod, "ephemeral-storage") == 0  # no request: the overhead does not count
    assert request(pod, "pods") == 1


def test_a_pod_that_is_not_critical_keeps_its_first_reason() -> None:
    plain = Running(_pod("plain", cpu="2"))
    assert _handle(plain, _pod("a", cpu="3")) == Rejection(
        "OutOfcpu", "Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000"
    )


def test_a_critical_pod_is_admitted_by_evicting_the_one_pod_that_frees_enough() -> None:
    # 1 cpu is missing: the 1-cpu pod frees it exactly (distance 0), the small ones would not alone
    running = [_pod("small", cpu="500m"), _pod("exact", cpu="1"), _pod("big", cpu="1500m")]
    assert _handle(CRITICAL, *running) == Preemption((1,))


def test_best_effort_pods_go_before_burstable_and_guaranteed_ones() -> None:
    running = [
        _pod("guaranteed", cpu="1", qos="Guaranteed"),
        _pod("burstable", cpu="1", qos="Burstable"),
        _pod("best-effort", cpu="1", qos="BestEffort"),
        _pod("not-preemptable", cpu="1", qos="BestEffort", priority=2_000_001_000),  # critical, same priority
    ]
    one_cpu = Running(_pod("critical", cpu="1", priority=2_000_001_000))
    assert _handle(one_cpu, *running) == Preemption((2,))
    # two missing: the burstable pod too, still no guaranteed one; best-effort victims come first
    assert _handle(CRITICAL, *running) == Preemption((2, 1))


def test_guaranteed_pods_are_touched_only_as_far_as_all_the_other_pods_would_not_do() -> None:
    # 1.5 cpu missing; the burstable and best-effort pods hold 1 of it in all, so 0.5 must come from a
    # guaranteed pod: the small one covers it (a tie at distance 0 goes to the smaller cpu request). The
    # 0.5 + 0.5 then still missing come from the burstable and best-effort pods, although evicting the
    # big guaranteed pod alone would have been fewer pods: kube spares the guaranteed class first.
    running = [
        _pod("g-small", cpu="500m", qos="Guaranteed"),
        _pod("g-big", cpu="1500m", qos="Guaranteed"),
        _pod("burstable", cpu="500m", qos="Burstable"),
        _pod("best-effort", cpu="500m", qos="BestEffort"),
        _pod("critical-other", cpu="500m", qos="Guaranteed", priority=2_000_001_000),
    ]
    assert _handle(CRITICAL, *running) == Preemption((3, 2, 0))


def test_a_tie_in_distance_goes_to_the_smaller_memory_request_then_to_the_later_pod() -> None:
    running = [
        _pod("more-memory", cpu="1", memory="2Gi"),
        _pod("less-memory", cpu="1", memory="1Gi"),
        _pod("also-less", cpu="1", memory="1Gi"),
    ]
    # one cpu is missing and each pod frees it exactly
    assert _handle(CRITICAL, *running) == Preemption((2,))
    filler = _pod("filler", cpu="1", priority=2_000_001_000)  # critical, same priority: stays
    assert _handle(CRITICAL, *running[:2], filler) == Preemption((1,))


def test_several_missing_resources_are_freed_together() -> None:
    running = [_pod("cpu-heavy", cpu="3", memory="1Gi"), _pod("memory-heavy", cpu="500m", memory="6Gi")]
    critical = Running(_pod("critical", cpu="1", memory="4Gi", priority=2_000_001_000))
    found = failures(critical.pod, NODE, _admitted(*running))
    assert [(f.resource, f.missing) for f in found] == [("cpu", 500), ("memory", 3 * 1024**3)]
    # memory-heavy frees both (distance 0); cpu-heavy leaves memory mostly unmet
    assert handle_failure(critical, found, [Running(p) for p in running]) == Preemption((1,))


def test_a_full_pod_count_is_freed_by_one_pod() -> None:
    node = {"metadata": {"name": "w1"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "2"}}}
    running = [_pod("a", cpu="1", memory="1Gi"), _pod("b", cpu="1", memory="512Mi")]
    critical = Running(_pod("critical", cpu="1", priority=2_000_001_000))
    found = failures(critical.pod, node, _admitted(*running))
    assert [(f.resource, f.missing) for f in found] == [("pods", 1)]
    # both are as close; b asks less memory
    assert handle_failure(critical, found, [Running(p) for p in running]) == Preemption((1,))


def test_a_reason_that_is_no_shortage_stands_for_a_critical_pod_too() -> None:
    critical = Running(_pod("critical", cpu="2", priority=2_000_001_000, nodeSelector={"disktype": "ssd"}))
    outcome = _handle(critical, _pod("a", cpu="3"))
    assert outcome == Rejection(
        "NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
    )


def test_a_shortage_no_set_of_pods_can_free_is_an_unexpected_admission_error() -> None:
    # the pod that could make room is critical, of the same priority: only 0.5 of the 1.5 cpu is freeable
    outcome = _handle(
        CRITICAL, _pod("other-critical", cpu="3", priority=2_000_001_000), _pod("small", cpu="500m")
    )
    assert outcome == Rejection(
        "UnexpectedAdmissionError",
        "Unexpected error while attempting to recover from admission failure: preemption: error finding a "
        "set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, q: 1000), ]",
    )
