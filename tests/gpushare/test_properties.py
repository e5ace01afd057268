"""Invariants over random clusters: nothing is over-committed, and removing a pod gives back what it took."""

from gpushare_objects import gpu, node
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenantgpu.gpushare import ClusterState, SharingConfig, mutate_pod


def gpu_pods(draw: st.DrawFn, n: int) -> list[dict]:
    pods = []
    for i in range(n):
        limits: dict = {"nvidia.com/gpu": draw(st.integers(1, 3))}
        kind = draw(st.sampled_from(["mem", "pct", "bare"]))
        if kind == "mem":
            limits["nvidia.com/gpumem"] = draw(st.integers(1, 40000))
        elif kind == "pct":
            limits["nvidia.com/gpumem-percentage"] = draw(st.integers(1, 100))
        if kind != "bare" or draw(st.booleans()):
            limits["nvidia.com/gpucores"] = draw(st.sampled_from([0, 10, 25, 50, 100, 150]))
        containers = [{"name": "main", "resources": {"limits": limits}}]
        if draw(st.integers(0, 4)) == 0:
            containers.append({"name": "second", "resources": {"limits": dict(limits)}})
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default"},
            "spec": {"containers": containers},
        }
        if draw(st.integers(0, 5)) == 0:
            pod["spec"]["initContainers"] = [{"name": "init", "resources": {"limits": dict(limits)}}]
        pods.append(pod)
    return pods


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[SharingConfig, list[dict], list[dict]]:
    cfg = SharingConfig(
        node_policy=draw(st.sampled_from(["binpack", "spread"])),
        gpu_policy=draw(st.sampled_from(["spread", "binpack", "mutex"])),
    )
    nodes = [
        node(
            f"n{n}",
            *[
                gpu(
                    f"G{n}-{i}",
                    i,
                    mem=draw(st.sampled_from([16000, 23034, 81920])),
                    count=draw(st.integers(1, 6)),
                    numa=draw(st.integers(0, 1)),
                )
                for i in range(draw(st.integers(1, 4)))
            ],
        )
        for n in range(draw(st.integers(1, 4)))
    ]
    return cfg, nodes, gpu_pods(draw, draw(st.integers(1, 25)))


def usage(state: ClusterState) -> dict[str, list[tuple[int, int, int]]]:
    return {n: [(v.used, v.usedmem, v.usedcores) for v in state.node_usage(n)] for n in state.node_names}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_no_device_is_ever_over_committed(case: tuple[SharingConfig, list[dict], list[dict]]) -> None:
    cfg, nodes, pods = case
    state = ClusterState(cfg)
    for n in nodes:
        state.upsert_node(n)
    for p in pods:
        admitted = mutate_pod(p, cfg).pod
        decision = state.schedule(admitted)
        if decision.node is None:
            continue
        admitted["metadata"].setdefault("annotations", {}).update(decision.scheduled_annotations(0))
        state.upsert_pod(admitted)
        for name in state.node_names:
            for v in state.node_usage(name):
                assert v.used <= v.count, (name, v)
                assert v.usedmem <= v.totalmem, (name, v)
                assert v.usedcores <= v.totalcore, (name, v)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.data())
def test_placing_then_removing_restores_usage(
    case: tuple[SharingConfig, list[dict], list[dict]], data: st.DataObject
) -> None:
    cfg, nodes, pods = case
    state = ClusterState(cfg)
    for n in nodes:
        state.upsert_node(n)
    placed = []
    for p in pods:
        admitted = mutate_pod(p, cfg).pod
        decision = state.schedule(admitted)
        if decision.node is not None:
            admitted["metadata"].setdefault("annotations", {}).update(decision.scheduled_annotations(0))
            before = usage(state)
            state.upsert_pod(admitted)
            placed.append((admitted, before))
    # remove a random suffix in reverse order: each removal gives back exactly what that pod took
    keep = data.draw(st.integers(0, len(placed)))
    for admitted, before in reversed(placed[keep:]):
        state.remove_pod("default", admitted["metadata"]["name"])
        assert usage(state) == before
    # and a Succeeded pod holds nothing
    if placed[:keep]:
        admitted, before = placed[keep - 1]
        admitted["status"] = {"phase": "Succeeded"}
        state.upsert_pod(admitted)
        assert usage(state) == before
