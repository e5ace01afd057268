"""Property: whatever the cluster and workload, no policy over-commits GPU share, cpu or memory."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from replay_helpers import make_nodes, make_pods
from tenantgpu.replay.fragmentation import typical_pods
from tenantgpu.replay.policies import make_policy, policy_names
from tenantgpu.replay.simulate import replay
from tenantgpu.replay.tuning import tuned_workload

node_shape = st.tuples(
    st.integers(4, 64), st.integers(8, 256), st.sampled_from([1, 2, 4, 8]), st.sampled_from(["A", "B"])
)
pod_shape = st.one_of(
    st.tuples(st.integers(1, 16), st.integers(1, 32), st.just(1), st.integers(50, 1000)),
    st.tuples(st.integers(1, 16), st.integers(1, 32), st.sampled_from([1, 2, 4, 8]), st.just(1000)),
    st.tuples(st.integers(1, 8), st.integers(0, 16), st.just(0), st.just(0)),
    st.tuples(
        st.integers(1, 8),
        st.integers(0, 16),
        st.just(1),
        st.integers(50, 1000),
        st.sampled_from(["A", "B|A"]),
    ),
)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(node_shape, min_size=1, max_size=6),
    st.lists(pod_shape, min_size=1, max_size=30),
    st.integers(0, 99),
)
def test_no_policy_over_commits(nodes_spec: list, pods_spec: list, seed: int) -> None:
    nodes = make_nodes(*nodes_spec)
    pods = make_pods(*pods_spec, (1, 1, 1, 500))  # at least one GPU request, or tuning has no target
    typical = typical_pods(pods, nodes.models)
    for name in policy_names():
        if name.startswith("hami"):
            continue
        tuned, rng = tuned_workload(pods, nodes.gpu_capacity, 1.3, seed)
        result = replay(nodes, tuned, typical, make_policy(name), rng, seed)
        # replay() raises on any over-commit inside ClusterState.place; the curves must stay in range
        assert all(0.0 <= u <= 100.0 + 1e-9 for u in result.unallocated_pct), name
        assert result.placed + result.failed == len(tuned), name
        assert result.failed_pods[-1] <= result.failed
        assert np.all(np.diff(result.failed_pods) >= 0)
