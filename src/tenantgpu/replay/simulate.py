"""One replay run: pods arrive one at a time, no departures; metrics are taken at each integer arrived %."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from tenantgpu.replay.cluster import ClusterState, PodRequest
from tenantgpu.replay.fragmentation import FragmentationModel, TypicalPods
from tenantgpu.replay.policies.base import Policy
from tenantgpu.replay.trace import NodeList, PodList

MAX_ARRIVED_PCT = 130


@dataclass(frozen=True)
class RunResult:
    """Curves indexed by arrived % (0..130): unallocated GPU %, fragmentation % and failed pods so far."""

    policy: str
    seed: int
    unallocated_pct: list[float]
    fragmentation_pct: list[float]
    failed_pods: list[int]
    pods: int
    placed: int
    failed: int  # every pod that found no node, also those arriving after the last mark
    seconds: float


def pod_requests(pods: PodList, models: tuple[str, ...]) -> list[PodRequest]:
    masks = pods.spec_masks(models)
    return [
        PodRequest(int(c), int(m), int(n), int(g), int(s), int(n) * int(g))
        for c, m, n, g, s in zip(
            pods.cpu_milli, pods.memory_mib, pods.num_gpu, pods.gpu_milli, masks, strict=True
        )
    ]


def replay(
    nodes: NodeList,
    pods: PodList,
    typical: TypicalPods,
    policy: Policy,
    rng: np.random.Generator,
    seed: int = 0,
    max_arrived_pct: int = MAX_ARRIVED_PCT,
) -> RunResult:
    """Place `pods` in order with `policy`; a pod that fits nowhere fails and the next one arrives."""
    started = time.perf_counter()
    state = ClusterState(nodes, FragmentationModel(typical, nodes.model_bit), rng.permutation(len(nodes)))
    capacity = state.capacity_milli
    rounds_up = bool(getattr(policy, "rounds_up", False))
    unallocated: list[float] = []
    fragmentation: list[float] = []
    failed_curve: list[int] = []
    arrived = 0
    failed = 0
    placed = 0

    def record_until(arrived_milli: int) -> None:
        while len(unallocated) <= max_arrived_pct and arrived_milli * 100 >= len(unallocated) * capacity:
            unallocated.append(100.0 - 100.0 * state.allocated_milli / capacity)
            fragmentation.append(100.0 * state.fragmentation_milli / capacity)
            failed_curve.append(failed)

    record_until(0)
    for request in pod_requests(pods, nodes.models):
        pod = request.rounded_up() if rounds_up else request
        arrived += request.request_milli
        choice = policy.choose(state, pod, rng)
        if choice is None:
            failed += 1
        else:
            state.place(choice, pod)
            placed += 1
        record_until(arrived)
    # The last marks past the final arrival keep the final state, so every run has all 131 points.
    while len(unallocated) <= max_arrived_pct:
        unallocated.append(100.0 - 100.0 * state.allocated_milli / capacity)
        fragmentation.append(100.0 * state.fragmentation_milli / capacity)
        failed_curve.append(failed)
    return RunResult(
        policy=policy.name,
        seed=seed,
        unallocated_pct=unallocated,
        fragmentation_pct=fragmentation,
        failed_pods=failed_curve,
        pods=len(pods),
        placed=placed,
        failed=failed,
        seconds=time.perf_counter() - started,
    )
