"""`tenantgpu capacity`: the fewest nodes of one shape that place every pod, per policy, and the cost."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from replay_helpers import make_pods
from tenantgpu.cli import main
from tenantgpu.replay.capacity import NodeShape, nodes_needed
from tenantgpu.replay.fragmentation import typical_pods
from tenantgpu.replay.policies import DEFAULT_CAPACITY_POLICIES, make_policy
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


def capacity_pods(path: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["capacity", "--pods", str(path), "-o", str(path.parent / "cap")])
    return result.exit_code, result.stdout, result.stderr


def pod_doc(spec: object) -> dict:
    return {"kind": "Pod", "metadata": {"name": "x"}, "spec": spec}


def gpu_spec(**limits: object) -> dict:
    return {"containers": [{"name": "c", "resources": {"limits": limits}}]}


def deployment(replicas: object, template_spec: dict) -> dict:
    return {"kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": replicas, "template": {"spec": template_spec}}}  # fmt: skip


NEGATIVE = "must be greater than or equal to 0"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (pod_doc({"containers": 5}), "pod x: spec.containers must be a list"),
        (pod_doc({"containers": [5]}), "pod x: spec.containers[0] must be an object"),
        (
            pod_doc({"containers": [{"name": "c", "resources": {"limits": 7}}]}),
            "pod x: container c: resources.limits must be a map of quantities",
        ),
        (
            pod_doc(gpu_spec(**{"nvidia.com/gpu": [1]})),
            "pod x: container c: resources.limits.nvidia.com/gpu: quantities must be strings or numbers, not list",
        ),
        (
            pod_doc(gpu_spec(**{"nvidia.com/gpu": -1})),
            f"pod x: container c: resources.limits.nvidia.com/gpu: invalid value -1: {NEGATIVE}",
        ),
        (
            pod_doc(gpu_spec(**{"nvidia.com/gpu": 1, "nvidia.com/gpucores": -5})),
            f"pod x: container c: resources.limits.nvidia.com/gpucores: invalid value -5: {NEGATIVE}",
        ),
        (
            deployment(2, gpu_spec(**{"nvidia.com/gpumem": -100})),
            "deployment d: pod template: container c: resources.limits.nvidia.com/gpumem: invalid value -100: "
            + NEGATIVE,
        ),
        (
            deployment("many", gpu_spec(**{"nvidia.com/gpu": 1})),
            "deployment d: spec.replicas must be an integer greater than or equal to 0",
        ),
    ],
)
def test_capacity_refuses_malformed_or_negative_manifests(tmp_path: Path, doc: dict, message: str) -> None:
    pods = tmp_path / "weird.yaml"
    pods.write_text(yaml.safe_dump(doc))
    code, out, err = capacity_pods(pods)
    assert (code, out, err) == (2, "", f"error: {pods}: {message}\n")
    assert "Traceback" not in err


def test_capacity_refuses_unreadable_pod_files(tmp_path: Path) -> None:
    folder = tmp_path / "pods.yaml"
    folder.mkdir()
    assert capacity_pods(folder) == (2, "", f"error: cannot read pod manifests {folder}: Is a directory\n")
    binary = tmp_path / "pods.yml"
    binary.write_bytes(b"\xff\xfe\x00kind")
    assert capacity_pods(binary) == (2, "", f"error: cannot read pod manifests {binary}: not a text file\n")


def test_capacity_help_says_what_runs_by_default() -> None:
    # wide, so that click does not break `fgd-strand` at its hyphen
    result = CliRunner().invoke(main, ["capacity", "--help"], terminal_width=300, max_content_width=300)
    assert result.exit_code == 0
    assert f"(repeatable; default: {', '.join(DEFAULT_CAPACITY_POLICIES)})" in result.output
    assert "Pod list CSV, or Kubernetes manifests (.yaml, .yml, .json)" in result.output
