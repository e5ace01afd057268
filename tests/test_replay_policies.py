"""Each policy on a small hand-made cluster where the right choice is plain to see."""

import numpy as np
import pytest

from replay_helpers import make_nodes, request, state_for, typical
from tenantgpu.replay.cluster import Placement
from tenantgpu.replay.policies import make_policy, policy_names
from tenantgpu.replay.policies.base import normalize_scores, pick_highest

RNG = np.random.default_rng(0)


def test_every_policy_refuses_a_pod_that_fits_nowhere() -> None:
    state = state_for(make_nodes((8, 16, 1, "T4")))
    for name in policy_names():
        assert make_policy(name).choose(state, request(16, 1, 1, 1000), RNG) is None, name


def test_gpu_spec_limits_nodes() -> None:
    nodes = make_nodes((8, 16, 1, "T4"), (8, 16, 1, "A10"))
    state = state_for(nodes)
    a10_only = int(nodes.model_bit[1])
    for name in ("random", "bestfit", "fgd", "packing"):
        choice = make_policy(name).choose(state, request(1, 1, 1, 500, a10_only), RNG)
        assert choice is not None and choice.node == 1, name


def test_bestfit_prefers_the_node_left_fullest() -> None:
    state = state_for(make_nodes((32, 64, 4, "T4"), (32, 64, 4, "T4")))
    state.place(Placement(1, (0, 1, 2)), request(24, 8, 3, 1000))
    assert make_policy("bestfit").choose(state, request(4, 4, 1, 1000), RNG) == Placement(1, (3,))


def test_packing_puts_a_shared_pod_on_a_shared_gpu_first() -> None:
    """gpu_packing_score.go: shared GPU (score ≥ 50) > free GPU on a used node (< 50) > idle node (≤ 33)."""
    state = state_for(make_nodes((32, 64, 2, "T4"), (32, 64, 2, "T4"), (32, 64, 2, "T4")))
    state.place(Placement(1, (1,)), request(1, 1, 1, 300))
    state.place(Placement(2, (0,)), request(1, 1, 1, 1000))
    assert make_policy("packing").choose(state, request(1, 1, 1, 500), RNG) == Placement(1, (1,))
    # a whole GPU goes to the used node's free GPU, not the idle node
    assert make_policy("packing").choose(state, request(1, 1, 1, 1000), RNG).node in (1, 2)


def test_clustering_keeps_pods_of_one_kind_together() -> None:
    """gpu_clustering_score.go: a node holding only the pod's kind scores in (75, 100]."""
    state = state_for(make_nodes((32, 64, 4, "T4"), (32, 64, 4, "T4"), (32, 64, 4, "T4")))
    state.place(Placement(0, (0,)), request(1, 1, 1, 1000))
    state.place(Placement(2, (0,)), request(1, 1, 1, 300))
    assert make_policy("clustering").choose(state, request(1, 1, 1, 200), RNG).node == 2
    assert make_policy("clustering").choose(state, request(1, 1, 1, 1000), RNG).node == 0


def test_dotprod_prefers_the_smaller_alignment_with_free_resources() -> None:
    """dot_product_score.go with merge/max: score = 1 − <free, request>/2 over (cpu/128, gpu/8)."""
    state = state_for(make_nodes((96, 256, 8, "G2"), (16, 64, 2, "P100")))
    assert make_policy("dotprod").choose(state, request(4, 4, 1, 1000), RNG).node == 1


def test_fgd_completes_a_half_used_gpu_rather_than_opening_a_fresh_one() -> None:
    """fgd_score.go: with typical pods of half a GPU, a 0.5 share on the half-free GPU leaves no fragment."""
    t = typical((1000, 500, 1, 1.0))
    state = state_for(make_nodes((32, 64, 2, "T4"), (32, 64, 2, "T4")), t)
    state.place(Placement(1, (1,)), request(1, 1, 1, 700))
    # node 1 GPU 1 has 300 free: a fragment for a 500 pod; node 0 is fresh
    assert state.frag[1] == pytest.approx(300)
    choice = make_policy("fgd").choose(state, request(1, 1, 1, 300), RNG)
    assert choice == Placement(1, (1,))


def test_random_only_picks_feasible_nodes_and_covers_them() -> None:
    state = state_for(make_nodes((4, 8, 1, "T4"), (32, 64, 1, "T4"), (32, 64, 1, "T4")))
    rng = np.random.default_rng(3)
    picks = {make_policy("random").choose(state, request(8, 8, 1, 500), rng).node for _ in range(50)}
    assert picks == {1, 2}


def test_whole_gpu_rounds_shares_up() -> None:
    from tenantgpu.replay.simulate import replay
    from tenantgpu.replay.trace import PodList

    nodes = make_nodes((32, 64, 1, "T4"))
    pods = PodList(
        names=("a", "b"),
        cpu_milli=np.array([1000, 1000]),
        memory_mib=np.array([1024, 1024]),
        num_gpu=np.array([1, 1]),
        gpu_milli=np.array([300, 300]),
        gpu_spec=("", ""),
    )
    shared = replay(
        nodes, pods, typical((1000, 300, 1, 1.0)), make_policy("bestfit"), np.random.default_rng(0)
    )
    whole = replay(
        nodes, pods, typical((1000, 300, 1, 1.0)), make_policy("whole-gpu"), np.random.default_rng(0)
    )
    assert shared.placed == 2 and whole.placed == 1
    assert whole.unallocated_pct[-1] == pytest.approx(70.0)


def test_ties_go_to_the_first_node_in_the_run_order() -> None:
    """vendor/k8s.io/kubernetes/pkg/scheduler/core/generic_scheduler.go selectHost (the simulator's fork):
    equal scores go to the smallest node name, and syncClusterResourceList prefixes names with rand.Perm."""
    candidates = np.array([4, 7, 9])
    assert (
        pick_highest(candidates, np.array([5, 5, 1]), tie_rank=np.array([0, 0, 0, 0, 3, 0, 0, 1, 0, 2])) == 7
    )


def test_normalize_matches_integer_min_max() -> None:
    assert list(normalize_scores(np.array([10, 20, 30]))) == [0, 50, 100]
    assert list(normalize_scores(np.array([7, 7]))) == [0, 0]


def test_fgd_pack_settles_ties_on_a_node_in_use_and_the_tightest_gpu() -> None:
    t = typical((1000, 0, 0, 1.0))
    nodes = make_nodes((32, 64, 2, "T4"), (32, 64, 2, "T4"), (32, 64, 2, "T4"))
    state = state_for(nodes, t)
    state.tie_rank = np.array([0, 1, 2])
    state.place(Placement(2, (0,)), request(1, 1, 1, 400))
    state.place(Placement(2, (1,)), request(1, 1, 1, 200))
    # with CPU-only typical pods all free GPU share is fragment, so a 0.3 share lowers it by 300 on
    # every GPU: a tie. FGD takes node 0 (first in order), fgd-pack the used node 2, on its tightest
    # GPU (0.6 free)
    assert make_policy("fgd").choose(state, request(1, 1, 1, 300), RNG).node == 0
    assert make_policy("fgd-pack").choose(state, request(1, 1, 1, 300), RNG) == Placement(2, (0,))
