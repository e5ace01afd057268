"""The kubelet's room for a critical pod: kube's CriticalPodAdmissionHandler (pkg/kubelet/preemption).

When the kubelet's predicate check refuses a critical pod (a static or mirror pod, or one whose priority
is at least system-cluster-critical's) only because the node lacks resources, the kubelet does not
reject it: it evicts a set of the pods it runs that frees what is missing, and admits the critical pod.
The set is kube's: as few pods as it can, touching guaranteed pods least, then burstable ones, and among
pods equally close to what is missing, the one that asks less memory, then less cpu. A reason that is no
shortage of resources (node affinity, host ports, taints) still refuses it; so does a shortage no set of
pods can free, as `UnexpectedAdmissionError`.

Pure functions: the kubelet passes the pods it runs and carries the evictions out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tenantgpu.node.admission import Failure, Rejection, whole

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000  # kube's scheduling.SystemCriticalPriority
PREEMPTING = "Preempting"  # the victim's event and status reason (events.PreemptContainer)
PREEMPTED_MESSAGE = "Preempted in order to admit critical pod"
DISRUPTION_REASON = "TerminationByKubelet"
DISRUPTION_MESSAGE = "Pod was preempted by Kubelet to accommodate a critical pod."
UNEXPECTED = "UnexpectedAdmissionError"


@dataclass(frozen=True)
class Running:
    """A pod the kubelet admitted, as a candidate for eviction; `static` for static and mirror pods."""

    pod: Mapping[str, Any]
    static: bool = False


@dataclass(frozen=True)
class Preemption:
    """Admit the critical pod once these candidates (indices into the list given) are evicted, in order."""

    victims: tuple[int, ...]


def _priority(pod: Mapping[str, Any]) -> int | None:
    value = (pod.get("spec") or {}).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def is_critical(pod: Mapping[str, Any], *, static: bool = False) -> bool:
    """kube's IsCriticalPod: static and mirror pods, and pods of priority 2000000000 or more."""
    priority = _priority(pod)
    return static or (priority is not None and priority >= SYSTEM_CRITICAL_PRIORITY)


def preemptable(preemptor: Running, preemptee: Running) -> bool:
    """kube's Preemptable: a critical pod may evict any pod that is not, and a pod of higher priority
    one of lower priority."""
    if is_critical(preemptor.pod, static=preemptor.static) and not is_critical(
        preemptee.pod, static=preemptee.static
    ):
        return True
    mine, theirs = _priority(preemptor.pod), _priority(preemptee.pod)
    return mine is not None and theirs is not None and mine > theirs


def request(pod: Mapping[str, Any], name: str) -> int:
    """kube's GetResourceRequest: the app containers' requests added up, at least each init container's,
    plus the overhead when that is not zero; milli-CPU, other quantities rounded up; one for `pods`."""
    if name == "pods":
        return 1
    spec = pod.get("spec") or {}

    def asked(container: Mapping[str, Any]) -> int:
        value = ((container.get("resources") or {}).get("requests") or {}).get(name)
        return 0 if value is None else whole(name, value)

    total = sum(asked(c) for c in spec.get("containers") or ())
    for container in spec.get("initContainers") or ():
        total = max(total, asked(container))
    overhead = (spec.get("overhead") or {}).get(name)
    if overhead is not None and total:
        total += whole(name, overhead)
    return total


Requirements = list[tuple[str, int]]  # (resource, how much is still missing)


def _subtract(requirements: Requirements, pods: Sequence[Mapping[str, Any]]) -> Requirements:
    left = []
    for name, quantity in requirements:
        for pod in pods:
            quantity -= request(pod, name)
            if quantity <= 0:
                break
        if quantity > 0:
            left.append((name, quantity))
    return left


def _distance(requirements: Requirements, pod: Mapping[str, Any]) -> float:
    """How much of each requirement the pod leaves unmet, as a fraction of it, squared and added up."""
    distance = 0.0
    for name, quantity in requirements:
        remaining = quantity - request(pod, name)
        if remaining > 0:
            distance += math.pow(remaining / quantity, 2)
    return distance


def _smaller(first: Mapping[str, Any], second: Mapping[str, Any]) -> bool:
    """kube's smallerResourceRequest: memory first, then cpu; a tie counts as smaller."""
    for name in ("memory", "cpu"):
        a, b = request(first, name), request(second, name)
        if a != b:
            return a < b
    return True


class _CannotReclaim(Exception):
    def __init__(self, requirements: Requirements) -> None:
        shown = "".join(f"(res: {name}, q: {quantity}), " for name, quantity in requirements)
        super().__init__(f"no set of running pods found to reclaim resources: [{shown}]")


def _by_distance(
    candidates: list[int], pods: Sequence[Mapping[str, Any]], requirements: Requirements
) -> list[int]:
    """getPodsToPreemptByDistance: take the closest pod to what is still missing until nothing is. The
    list is worked on as kube's slice is (the last pod moves into the gap), which decides ties."""
    candidates = list(candidates)
    chosen: list[int] = []
    while requirements:
        if not candidates:
            raise _CannotReclaim(requirements)
        best_distance = float(len(requirements) + 1)
        best = 0
        for i, index in enumerate(candidates):
            distance = _distance(requirements, pods[index])
            if distance < best_distance or (
                distance == best_distance and _smaller(pods[index], pods[candidates[best]])
            ):
                best_distance, best = distance, i
        requirements = _subtract(requirements, [pods[candidates[best]]])
        chosen.append(candidates[best])
        candidates[best] = candidates[-1]
        candidates.pop()
    return chosen


def _qos(pod: Mapping[str, Any]) -> str:
    # kube's GetPodQOS takes the class the API server recorded at creation, as here.
    return (pod.get("status") or {}).get("qosClass") or "BestEffort"


def _pods_to_preempt(admit: Running, running: Sequence[Running], requirements: Requirements) -> list[int]:
    """getPodsToPreempt: the fewest guaranteed pods needed if every lower class went, then the fewest
    burstable ones, then the best-effort ones still needed."""
    classes: dict[str, list[int]] = {"BestEffort": [], "Burstable": [], "Guaranteed": []}
    for index, candidate in enumerate(running):
        if preemptable(admit, candidate):
            classes.setdefault(_qos(candidate.pod), []).append(index)
    pods = [candidate.pod for candidate in running]
    best_effort, burstable, guaranteed = classes["BestEffort"], classes["Burstable"], classes["Guaranteed"]

    def of(indices: list[int]) -> list[Mapping[str, Any]]:
        return [pods[i] for i in indices]

    if _subtract(requirements, of(best_effort + burstable + guaranteed)):
        raise _CannotReclaim(_subtract(requirements, of(best_effort + burstable + guaranteed)))
    guaranteed_out = _by_distance(guaranteed, pods, _subtract(requirements, of(best_effort + burstable)))
    burstable_out = _by_distance(burstable, pods, _subtract(requirements, of(best_effort + guaranteed_out)))
    best_effort_out = _by_distance(
        best_effort, pods, _subtract(requirements, of(burstable_out + guaranteed_out))
    )
    return best_effort_out + burstable_out + guaranteed_out


def handle_failure(
    admit: Running, failures: Sequence[Failure], running: Sequence[Running]
) -> Rejection | Preemption:
    """HandleAdmissionFailure for the predicate check's `failures` (none empty): the rejection that
    stands, or the pods to evict so that a critical pod is admitted."""
    if not is_critical(admit.pod, static=admit.static):
        return failures[0].rejection
    others = [failure for failure in failures if failure.resource is None]
    if others:
        return others[0].rejection
    requirements = [(f.resource, f.missing) for f in failures if f.resource is not None]
    try:
        return Preemption(tuple(_pods_to_preempt(admit, running, requirements)))
    except _CannotReclaim as err:
        return Rejection(
            UNEXPECTED,
            "Unexpected error while attempting to recover from admission failure: "
            f"preemption: error finding a set of pods to preempt: {err}",
        )
