"""topology-aware GPU policy (pkg/device/nvidia/device.go Fit, computeWorstSingleCard, computeBestCombination)."""

import dataclasses
import json

from gpushare_objects import gpu, gpu_pod, node

from tenantgpu.gpushare import ClusterState, SharingConfig

CFG = dataclasses.replace(SharingConfig(), gpu_policy="topology-aware")
# G0-G1 and G2-G3 are NVLink pairs (500, 300); cross pairs are PCIe; G3 has the weakest links overall.
LINKS = {
    ("G0", "G1"): 500,
    ("G2", "G3"): 300,
    ("G0", "G2"): 20,
    ("G0", "G3"): 10,
    ("G1", "G2"): 20,
    ("G1", "G3"): 10,
}


def topology_node() -> dict:
    table: dict[str, dict[str, int]] = {f"G{i}": {} for i in range(4)}
    for (a, b), score in LINKS.items():
        table[a][b] = score
        table[b][a] = score
    scores = json.dumps([{"uuid": u, "score": s} for u, s in table.items()])
    return node("n", *[gpu(f"G{i}", i) for i in range(4)], annotations={"hami.io/node-nvidia-score": scores})


def state() -> ClusterState:
    s = ClusterState(CFG)
    s.upsert_node(topology_node())
    return s


def test_two_cards_take_the_best_connected_pair() -> None:
    d = state().schedule(gpu_pod("x", gpus=2, mem=10, cores=10))
    assert {c.uuid for c in d.devices[0]} == {"G0", "G1"}  # type: ignore[index]


def test_one_card_takes_the_worst_connected_card() -> None:
    """A single-GPU job leaves the well-connected pairs free: G3 sums 320, less than any other card."""
    d = state().schedule(gpu_pod("x", gpus=1, mem=10, cores=10))
    assert d.annotation == "G3,NVIDIA,10,10:;"


def test_exactly_enough_cards_need_no_choice_and_too_few_fail() -> None:
    s = state()
    assert len(s.schedule(gpu_pod("x", gpus=4, mem=10)).devices[0]) == 4  # type: ignore[index]
    d = s.schedule(gpu_pod("x", gpus=3, mem=20000, annotations={"nvidia.com/use-gpuuuid": "G0,G1"}))
    assert d.failed_nodes == {"n": "2/4 AllocatedCardsInsufficientRequest, 2/4 CardUuidMismatch"}


def test_malformed_score_annotation_unregisters_the_node() -> None:
    bad = topology_node()
    bad["metadata"]["annotations"]["hami.io/node-nvidia-score"] = "[{"
    s = ClusterState(CFG)
    s.upsert_node(bad)
    assert s.schedule(gpu_pod("x", mem=10)).failed_nodes == {"n": "node unregistered"}
