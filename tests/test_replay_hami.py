"""HAMi's node × GPU policies in replay, decided by gpushare (one semantics for HAMi fit and score)."""

import numpy as np

from replay_helpers import make_nodes, request, state_for
from tenantgpu.replay.hami_policy import HamiPolicy, node_object, pod_object
from tenantgpu.replay.policies import make_policy

RNG = np.random.default_rng(0)


def place_all(policy: HamiPolicy, state, pods):  # type: ignore[no-untyped-def]
    out = []
    for pod in pods:
        choice = policy.choose(state, pod, RNG)
        if choice is not None:
            state.place(choice, pod)
        out.append(choice)
    return out


def test_binpack_stacks_shares_on_one_gpu_and_spread_fans_them_out() -> None:
    """HAMi §3.3: binpack picks the fullest node and GPU, spread the emptiest."""
    pods = [request(1, 1, 1, 300)] * 3
    packed = place_all(
        make_policy("hami-binpack"), state_for(make_nodes((16, 64, 2, "T4"), (16, 64, 2, "T4"))), pods
    )
    assert len({(c.node, c.gpus) for c in packed}) == 1
    spread = place_all(
        make_policy("hami-spread"), state_for(make_nodes((16, 64, 2, "T4"), (16, 64, 2, "T4"))), pods
    )
    assert len({c.node for c in spread}) == 2


def test_device_split_count_caps_pods_per_gpu() -> None:
    """deviceSplitCount = slots per GPU: with 2, a third 10 % pod cannot join (CardTimeSlicingExhausted)."""
    state = state_for(make_nodes((16, 64, 1, "T4")))
    choices = place_all(
        HamiPolicy("binpack", "binpack", device_split_count=2), state, [request(1, 1, 1, 100)] * 3
    )
    assert choices[2] is None and choices[0] is not None and choices[1] is not None


def test_whole_gpu_pod_is_exclusive_and_cpu_is_checked() -> None:
    state = state_for(make_nodes((4, 64, 2, "T4")))
    choices = place_all(
        make_policy("hami-binpack"),
        state,
        [request(1, 1, 1, 1000), request(1, 1, 1, 200), request(8, 1, 1, 200)],
    )
    assert choices[0] is not None and choices[1] is not None and choices[2] is None
    assert choices[0].gpus != choices[1].gpus


def test_objects_carry_hami_resources_and_register_annotation() -> None:
    nodes = make_nodes((96, 384, 8, "G2"))
    node = node_object(nodes, 0, split=10)
    assert '"type":"NVIDIA G2"' in node["metadata"]["annotations"]["hami.io/node-nvidia-register"]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "80"
    limits = pod_object("p", request(4, 8, 1, 470), nodes.models)["spec"]["containers"][0]["resources"][
        "limits"
    ]
    assert limits == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpucores": "47",
        "nvidia.com/gpumem-percentage": "47",
    }
