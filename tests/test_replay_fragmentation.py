"""The FGD paper's fragmentation measure and its typical-pod distribution."""

import numpy as np
import pytest

from replay_helpers import make_nodes, make_pods, request, state_for, typical
from tenantgpu.replay.cluster import Placement
from tenantgpu.replay.fragmentation import typical_pods


def test_typical_pods_cover_95_percent_by_count_cpu_pods_included() -> None:
    """pkg/utils/frag.go GetTypicalPods with the experiments' podPopularityThreshold=95, step 1,
    isInvolvedCpuPods=true: most frequent shapes until their count reaches 95 %, then renormalised."""
    pods = make_pods(
        *[(1, 1, 1, 500)] * 60, *[(2, 1, 0, 0)] * 30, *[(4, 1, 1, 1000)] * 6, *[(8, 1, 8, 1000)] * 4
    )
    t = typical_pods(pods, models=("T4",))
    assert list(t.gpu_milli) == [500, 0, 1000]
    assert t.probability == pytest.approx([60 / 96, 30 / 96, 6 / 96])


def test_node_fragment_is_free_share_the_typical_pod_cannot_use() -> None:
    """pkg/utils/frag.go NodeGpuShareFragAmount: if the typical pod fits (Q3) only the GPUs with less free
    share than it asks count as fragment; otherwise (lack GPU, lack CPU, no access) all free share does."""
    t = typical((2000, 500, 1, 0.5), (1000, 1000, 1, 0.5))
    state = state_for(make_nodes((4, 64, 2, "T4")), t)
    assert state.frag[0] == pytest.approx(0.0)  # both fit on an empty node
    state.place(Placement(0, (0,)), request(1, 1, 1, 700))
    # 0.5-share pod fits on GPU 1: GPU 0's 300 is fragment; whole-GPU pod fits on GPU 1: 300 again
    assert state.frag[0] == pytest.approx(300.0)
    state.place(Placement(0, (1,)), request(2, 1, 1, 200))
    # cpu left 1 vCPU: the 2-vCPU pod lacks cpu (all 1100 free counts); the whole-GPU pod lacks a GPU
    assert state.frag[0] == pytest.approx(1100.0)


def test_cpu_only_typical_pods_count_all_free_gpu_as_fragment() -> None:
    t = typical((1000, 0, 0, 1.0))
    state = state_for(make_nodes((8, 16, 2, "T4")), t)
    assert state.frag[0] == pytest.approx(2000.0)


def test_cached_fragmentation_matches_a_fresh_computation() -> None:
    t = typical((1000, 500, 1, 0.4), (2000, 250, 1, 0.3), (4000, 1000, 2, 0.3))
    nodes = make_nodes((16, 64, 4, "T4"), (8, 64, 2, "T4"))
    state = state_for(nodes, t)
    state.place(Placement(0, (2,)), request(3, 1, 1, 600))
    state.place(Placement(1, (0, 1)), request(2, 1, 2, 1000))
    fresh = state.frag_model.node_fragmentation(np.arange(2), state.gpu_free, state.cpu_free)
    assert state.frag == pytest.approx(fresh)


def test_incremental_fgd_candidates_match_recomputing_each_placement() -> None:
    """The FGD fast path updates one GPU's counts per candidate; the reference recomputes the node."""
    from tenantgpu.replay.policies.fgd import fragmentation_after_exclusive, fragmentation_after_shared

    t = typical(
        (1000, 500, 1, 0.3), (3000, 250, 1, 0.2), (2000, 1000, 1, 0.3), (8000, 1000, 2, 0.1), (500, 0, 0, 0.1)
    )
    nodes = make_nodes((16, 64, 4, "T4"), (8, 64, 2, "T4"), (32, 64, 8, "G2"))
    state = state_for(nodes, t)
    state.place(Placement(0, (1,)), request(2, 1, 1, 350))
    state.place(Placement(2, (3, 5)), request(6, 1, 2, 1000))
    state.place(Placement(1, (0,)), request(5, 1, 1, 800))
    candidates = np.arange(3)
    pod = request(2, 1, 1, 150)
    fast, valid = fragmentation_after_shared(state, pod, candidates)
    for n in candidates:
        for g in range(state.gpu_free.shape[1]):
            if not valid[n, g]:
                continue
            row = state.gpu_free[[n]].copy()
            row[0, g] -= 150
            ref = state.frag_model.node_fragmentation(np.array([n]), row, state.cpu_free[[n]] - 2000)
            assert fast[n, g] == pytest.approx(ref[0])
    whole = request(4, 1, 2, 1000)
    fast_whole = fragmentation_after_exclusive(state, whole, candidates)
    for n in candidates:
        row = state.gpu_free[[n]].copy()
        for g in state.exclusive_gpus(n, 2):
            row[0, g] = 0
        ref = state.frag_model.node_fragmentation(np.array([n]), row, state.cpu_free[[n]] - 4000)
        assert fast_whole[n] == pytest.approx(ref[0])
