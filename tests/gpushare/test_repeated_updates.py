"""The watch repeats objects many times (status updates, node-lock patches): the state follows every change."""

from gpushare_objects import gpu, gpu_pod, node, placed

from tenantgpu.gpushare import ClusterState, SharingConfig, encode_node_register


def _used(state: ClusterState, name: str) -> list[tuple[str, int, int, int]]:
    return [(d.uuid, d.used, d.usedmem, d.usedcores) for d in state.node_usage(name)]


def test_a_changed_registration_is_decoded_again_and_a_bad_one_keeps_failing() -> None:
    state = ClusterState(SharingConfig())
    first = node("n1", gpu("G-0"))
    state.upsert_node(first)
    state.upsert_node(node("n1", gpu("G-0"), annotations={"hami.io/mutex.lock": "x"}))
    assert [d.uuid for d in state.node_usage("n1")] == ["G-0"]
    grown = node("n1", gpu("G-0"), gpu("G-1", 1, mem=81920))
    state.upsert_node(grown)
    assert [(d.uuid, d.totalmem) for d in state.node_usage("n1")] == [("G-0", 23034), ("G-1", 81920)]
    broken = node("n1", annotations={"hami.io/node-nvidia-register": "[{"})
    for _ in range(2):  # the second time the memoised refusal must fail the node just the same
        state.upsert_node(broken)
        assert state.registration_error("n1") is not None
        assert state.schedule(gpu_pod("p", mem=1000)).node is None
    state.upsert_node(node("n1", annotations={"hami.io/node-nvidia-register": encode_node_register([])}))
    assert state.node_usage("n1") == []


def test_status_updates_of_a_placed_pod_keep_its_charge_and_changes_are_recharged() -> None:
    state = ClusterState(SharingConfig())
    state.upsert_node(node("n1", gpu("G-0"), gpu("G-1", 1)))
    pod = placed("p", "n1", "G-0,NVIDIA,1000,10:;")
    for phase in ("Pending", "Running", "Running"):
        state.upsert_pod({**pod, "status": {"phase": phase}})
        assert _used(state, "n1") == [("G-0", 1, 1000, 10), ("G-1", 0, 0, 0)]
    moved = placed("p", "n1", "G-1,NVIDIA,2000,20:;")
    state.upsert_pod(moved)
    assert _used(state, "n1") == [("G-0", 0, 0, 0), ("G-1", 1, 2000, 20)]
    state.upsert_pod(placed("q", "n1", "G-1,NVIDIA,2000,20:;"))  # the same annotation on another pod
    assert _used(state, "n1") == [("G-0", 0, 0, 0), ("G-1", 2, 4000, 40)]
    state.upsert_pod({**moved, "status": {"phase": "Succeeded"}})
    assert _used(state, "n1") == [("G-0", 0, 0, 0), ("G-1", 1, 2000, 20)]
    state.upsert_pod(placed("q", "n1", "G-1,NVIDIA,2000,x:;"))  # malformed now: holds nothing
    assert _used(state, "n1") == [("G-0", 0, 0, 0), ("G-1", 0, 0, 0)]


def test_node_scores_alone_match_the_full_details() -> None:
    pod = gpu_pod("new", mem=1000, cores=10)
    views = []
    for scores_first in (True, False):
        state = ClusterState(SharingConfig())
        for name in ("n1", "n2", "n3"):
            state.upsert_node(node(name, gpu(f"{name}-G0"), gpu(f"{name}-G1", 1)))
        state.upsert_node(node("n4", gpu("n4-G0"), taints=[{"key": "k", "effect": "NoSchedule"}]))
        state.upsert_pod(placed("old", "n2", "n2-G0,NVIDIA,20000,50:;"))
        decision = state.schedule(pod)
        if scores_first:
            scores = dict(decision.node_scores)
            failed = dict(decision.failed_nodes)
        else:
            failed = dict(decision.failed_nodes)
            scores = dict(decision.node_scores)
        views.append((scores, failed))
    assert views[0] == views[1]
    assert set(views[0][0]) == {"n1", "n2", "n3"}
    assert list(views[0][1]) == ["n4"]
