"""The paper's tuning: inflate or thin to tune × capacity, shuffle, all reproducible from the seed."""

import numpy as np

from replay_helpers import make_pods
from tenantgpu.replay.tuning import tune_indices, tuned_workload

PODS = make_pods(*[(2, 4, 1, 500)] * 4, (4, 8, 1, 1000), (8, 16, 2, 1000), (1, 1, 0, 0))


def test_same_seed_same_list_other_seed_other_order() -> None:
    a, _ = tuned_workload(PODS, gpu_capacity=10, ratio=1.3, seed=42)
    b, _ = tuned_workload(PODS, gpu_capacity=10, ratio=1.3, seed=42)
    c, _ = tuned_workload(PODS, gpu_capacity=10, ratio=1.3, seed=43)
    assert a.names == b.names
    assert a.names != c.names


def test_inflation_stops_before_the_target_and_keeps_every_trace_pod() -> None:
    """pkg/simulator/simulator.go tuneUpPods (hkust-adsl/kubernetes-scheduler-simulator): draw trace pods
    uniformly with replacement and append them while the request stays within ratio × capacity; the
    first draw whose per-GPU milli would overshoot ends the loop."""
    index = tune_indices(PODS, gpu_capacity=10, ratio=1.3, rng=np.random.default_rng(7))
    assert list(index[: len(PODS)]) == list(range(len(PODS)))
    total = int(PODS.total_milli[index].sum())
    assert total <= 13_000
    assert total > 13_000 - 2_000  # never stops with a whole pod's worth of room left


def test_thinning_removes_random_pods_until_within_target() -> None:
    """pkg/simulator/simulator.go tuneDownPods: remove a random pod while the request exceeds the target."""
    index = tune_indices(PODS, gpu_capacity=10, ratio=0.3, rng=np.random.default_rng(1))
    assert int(PODS.total_milli[index].sum()) <= 3_000
    assert len(set(index.tolist())) == len(index)


def test_ratio_zero_keeps_the_trace() -> None:
    assert list(tune_indices(PODS, 10, 0, np.random.default_rng(0))) == list(range(len(PODS)))


def test_a_workload_without_gpu_requests_cannot_be_tuned() -> None:
    import pytest

    from tenantgpu.replay.trace import TraceError

    with pytest.raises(TraceError, match="asks for no GPU"):
        tune_indices(make_pods((1, 1, 0, 0)), 10, 1.3, np.random.default_rng(0))
