"""`tenantgpu capacity`: the fewest nodes of one shape that place every pod, per policy, and the cost."""

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from replay_helpers import make_pods
from tenantgpu.cli import main
from tenantgpu.replay.capacity import NodeShape, nodes_needed
from tenantgpu.replay.fragmentation import typical_pods
from tenantgpu.replay.policies import make_policy
from tenantgpu.replay.simulate import replay
from tenantgpu.replay.trace import TraceError

PODS = make_pods(*[(2, 4, 1, 250)] * 16, *[(4, 8, 1, 1000)] * 6, *[(8, 8, 2, 1000)] * 2)


def test_shape_parsing() -> None:
    shape = NodeShape.parse("8x NVIDIA A100-SXM4-80GB", 128, 1024)
    assert (shape.gpus, shape.model, shape.cpu_milli, shape.memory_mib) == (
        8,
        "NVIDIA A100-SXM4-80GB",
        128000,
        1 << 20,
    )
    with pytest.raises(TraceError, match="bad node shape"):
        NodeShape.parse("A100", 128, 1024)


@pytest.mark.parametrize("policy", ["bestfit", "fgd", "whole-gpu"])
def test_answer_is_the_fewest_nodes_that_place_everything(policy: str) -> None:
    shape = NodeShape.parse("4x T4", 32, 128)
    count, _ = nodes_needed(PODS, shape, policy, seed=1)
    order = np.random.default_rng(1).permutation(len(PODS))
    arriving = PODS.take(order)
    typical = typical_pods(arriving, (shape.model,))

    def failed(n: int) -> int:
        run = replay(shape.cluster(n), arriving, typical, make_policy(policy), np.random.default_rng(1))
        return run.failed_pods[-1]

    assert failed(count) == 0
    assert failed(count - 1) > 0


def test_sharing_needs_fewer_gpus_than_whole_gpus() -> None:
    shape = NodeShape.parse("4x T4", 32, 128)
    shared, _ = nodes_needed(PODS, shape, "bestfit")
    whole, _ = nodes_needed(PODS, shape, "whole-gpu")
    # 16 quarter-GPU pods need 4 GPUs shared, 16 whole: at least 3 nodes' difference
    assert whole - shared >= 3


def test_capacity_command_prices_and_plots(tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
        + "".join(f"p{i},2000,4096,1,{(250, 500, 1000)[i % 3]}\n" for i in range(24))
        + "huge,999000,1,1,1000\n"
    )
    out = tmp_path / "cap"
    args = ["--pods", str(pods), "--node", "4x T4", "--node-cpu", "32", "--node-memory-gib", "128"]
    result = CliRunner().invoke(main, ["capacity", *args, "--price", "1.0", "-o", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "capacity.json").read_text())
    whole, fgd = doc["policies"]["whole-gpu"], doc["policies"]["fgd"]
    assert fgd["gpus"] < whole["gpus"]
    assert whole["monthly_cost"] == pytest.approx(whole["gpus"] * 730)
    assert doc["pods_too_big_for_node"] == 1
    assert (out / "capacity.png").stat().st_size > 0
    bad = CliRunner().invoke(main, ["capacity", "--pods", str(pods), "--node", "lots of GPUs"])
    assert bad.exit_code == 2 and "bad node shape" in bad.output
