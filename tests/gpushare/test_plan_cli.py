"""`tenantgpu plan` places pods like HAMi, prints one JSON object, and refuses bad input with exit 2."""

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tenantgpu.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plan"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["plan", *args])
    return result.exit_code, result.stdout, result.stderr


def test_example_json_output() -> None:
    code, out, _ = run(
        "--nodes", str(EXAMPLES / "nodes.yaml"), "--pods", str(EXAMPLES / "pods.yaml"), "-o", "json"
    )
    assert code == 0
    doc = json.loads(out)
    assert list(doc) == ["placements"]
    by_pod = {p["pod"]: p for p in doc["placements"]}
    assert "team-a/notebook" not in by_pod  # already placed: it is the cluster, not the plan
    assert list(by_pod) == [
        "team-a/inference-small",
        "team-b/half-card",
        "team-b/two-l4",
        "team-b/whole-card",
        "team-a/oversize",
    ]
    # binpack: the L4 node already holds the notebook; spread GPU policy takes its idle GPU1
    assert by_pod["team-a/inference-small"] == {
        "pod": "team-a/inference-small",
        "node": "gpu-l4",
        "devices": "GPU-l4-0001,NVIDIA,5000,20:;",
        "reason": None,
    }
    assert by_pod["team-b/half-card"]["devices"] == "GPU-l4-0001,NVIDIA,11517,50:;"  # 50% of 23034
    assert by_pod["team-a/oversize"]["node"] is None
    assert "CardInsufficientMemory" in by_pod["team-a/oversize"]["reason"]


def test_policies_change_the_plan() -> None:
    code, out, _ = run("--nodes", str(EXAMPLES / "nodes.yaml"), "--pods", str(EXAMPLES / "pods.yaml"),
                       "-o", "json", "--node-policy", "spread")  # fmt: skip
    assert code == 0
    first = json.loads(out)["placements"][0]
    assert first["node"] == "gpu-a100"


def test_table_and_yaml_outputs() -> None:
    code, out, _ = run("--nodes", str(EXAMPLES / "nodes.yaml"), "--pods", str(EXAMPLES / "pods.yaml"))
    assert code == 0 and "team-a/oversize" in out and "3/5 pods placed" in out
    code, out, _ = run(
        "--nodes", str(EXAMPLES / "nodes.yaml"), "--pods", str(EXAMPLES / "pods.yaml"), "-o", "yaml"
    )
    assert code == 0 and len(yaml.safe_load(out)["placements"]) == 5


def test_webhook_denial_is_the_reason(tmp_path: Path) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "priv"},
        "spec": {"containers": [{"name": "c", "securityContext": {"privileged": True},
                                 "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}))  # fmt: skip
    code, out, _ = run("--nodes", str(EXAMPLES / "nodes.yaml"), "--pods", str(pods), "-o", "json")
    assert code == 0
    assert json.loads(out)["placements"] == [
        {"pod": "default/priv", "node": None, "devices": None, "reason": "container c is privileged"}
    ]


def test_json_input_and_quota(tmp_path: Path) -> None:
    pods = tmp_path / "pods.json"
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "t"},
             "spec": {"hard": {"limits.nvidia.com/gpumem": "6000"}}}  # fmt: skip
    items = [quota] + [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "t"},
         "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1,
                                                                       "nvidia.com/gpumem": 4000}}}]}}
        for i in range(2)
    ]  # fmt: skip
    pods.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    code, out, _ = run("--nodes", str(EXAMPLES / "nodes.yaml"), "--pods", str(pods), "-o", "json")
    assert code == 0
    first, second = json.loads(out)["placements"]
    assert first["node"] is not None
    assert second["reason"] == "exceeding resource quota"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("key: [unclosed", "not valid YAML or JSON"),
        ("- 1\n- 2\n", "expected Kubernetes objects"),
        ("apiVersion: v1\nmetadata: {name: x}\n", "has no kind"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n  - name: c\n"
         "    resources: {limits: {nvidia.com/gpumem: 12 GB}}\n", "nvidia.com/gpumem"),
    ],
)  # fmt: skip
def test_bad_pod_files_exit_2_with_one_line(tmp_path: Path, content: str, message: str) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(content)
    code, out, err = run("--nodes", str(EXAMPLES / "nodes.yaml"), "--pods", str(pods))
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_malformed_register_annotation_exits_2(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: n\n  annotations:\n"
                     "    hami.io/node-nvidia-register: '[{\"id\": 5'\n")  # fmt: skip
    code, _, err = run("--nodes", str(nodes), "--pods", str(EXAMPLES / "pods.yaml"))
    assert code == 2 and "hami.io/node-nvidia-register" in err


def test_malformed_allocation_annotation_exits_2(tmp_path: Path) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text((EXAMPLES / "pods.yaml").read_text().replace("10000,50:;", "ten,50:;"))
    code, _, err = run("--nodes", str(EXAMPLES / "nodes.yaml"), "--pods", str(pods))
    assert code == 2 and "hami.io/vgpu-devices-allocated" in err


def test_unreadable_file_exits_2(tmp_path: Path) -> None:
    code, _, err = run("--nodes", str(tmp_path / "missing.yaml"), "--pods", str(EXAMPLES / "pods.yaml"))
    assert code == 2 and "cannot read" in err


def test_device_split_count_limits_sharing(tmp_path: Path) -> None:
    pods = tmp_path / "pods.yaml"
    docs = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
             "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1,
                      "nvidia.com/gpumem": 100, "nvidia.com/gpucores": 1}}}]}} for i in range(4)]  # fmt: skip
    pods.write_text(yaml.safe_dump_all(docs))
    code, out, _ = run("--nodes", str(EXAMPLES / "nodes.yaml"), "--pods", str(pods), "-o", "json",
                       "--device-split-count", "1")  # fmt: skip
    assert code == 0
    nodes = [p["node"] for p in json.loads(out)["placements"]]
    assert nodes.count(None) == 1  # three GPUs, one slot each


LAB = """\
apiVersion: tenantgpu.io/v1alpha1
kind: Lab
metadata: {name: t}
spec:
  hami: {nodeSchedulerPolicy: spread, deviceSplitCount: 4}
  tenants:
    - name: tenant-a
      workers:
        - name: worker-a1
          gpus: [{type: NVIDIA A100-SXM4-80GB, memory: 81920}]
    - name: tenant-b
      workers:
        - name: worker-b1
          gpus: [{type: NVIDIA L4, memory: 23034, count: 2}]
"""


def test_lab_stands_in_for_nodes(tmp_path: Path) -> None:
    lab = tmp_path / "lab.yaml"
    lab.write_text(LAB)
    code, out, _ = run("--lab", str(lab), "--pods", str(EXAMPLES / "pods.yaml"), "-o", "json")
    assert code == 0
    placements = json.loads(out)["placements"]
    # the lab's nodeSchedulerPolicy spread sends the first pod to the emptiest node, in lab order
    assert placements[0]["node"] == "worker-a1"
    assert {p["node"] for p in placements} <= {"worker-a1", "worker-b1", None}
    lab.write_text("kind: Lab\n")
    code, _, err = run("--lab", str(lab), "--pods", str(EXAMPLES / "pods.yaml"))
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_one_cluster_dump_can_be_both_inputs(tmp_path: Path) -> None:
    """`kubectl get nodes,pods -A -o yaml > cluster.yaml`, then --nodes cluster.yaml --pods cluster.yaml."""
    nodes = yaml.safe_load((EXAMPLES / "nodes.yaml").read_text())["items"]
    pods = list(yaml.safe_load_all((EXAMPLES / "pods.yaml").read_text()))
    dump = tmp_path / "cluster.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes + pods}))
    code, out, _ = run("--nodes", str(dump), "--pods", str(dump), "-o", "json")
    assert code == 0
    assert len(json.loads(out)["placements"]) == 5


@pytest.mark.parametrize(
    "content",
    ["", "apiVersion: v1\nkind: List\nitems: []\n", (EXAMPLES / "pods.yaml").read_text()],
    ids=["empty", "empty-list", "pods-only"],
)
def test_nodes_file_without_a_node_exits_2(tmp_path: Path, content: str) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(content)
    code, out, err = run("--nodes", str(nodes), "--pods", str(EXAMPLES / "pods.yaml"))
    assert (code, out, err) == (2, "", f"error: {nodes}: no Node in this file\n")


def pod_with_spec(spec: str) -> str:
    return f"apiVersion: v1\nkind: Pod\nmetadata: {{name: x}}\nspec: {spec}\n"


MALFORMED_PODS = [
    ("{containers: 5}", "pod x: spec.containers must be a list"),
    ("{containers: [5]}", "pod x: spec.containers[0] must be an object"),
    ("{containers: [{name: c, resources: 7}]}", "pod x: container c: resources must be an object"),
    (
        "{containers: [{name: c, resources: {limits: 7}}]}",
        "pod x: container c: resources.limits must be a map of quantities",
    ),
    (
        "{containers: [{name: c, resources: {limits: {nvidia.com/gpu: [1]}}}]}",
        "pod x: container c: resources.limits.nvidia.com/gpu: quantities must be strings or numbers, not list",
    ),
    ("{initContainers: 5, containers: [{name: c}]}", "pod x: spec.initContainers must be a list"),
]
# the API server refuses negative quantities; HAMi's resources are no exception
NEGATIVE_PODS = [
    (
        f"{{containers: [{{name: c, resources: {{limits: {{{resource}: {value}}}}}}}]}}",
        f"pod x: container c: resources.limits.{resource}: invalid value {value}: "
        "must be greater than or equal to 0",
    )
    for resource, value in (("nvidia.com/gpu", -1), ("nvidia.com/gpumem", -100), ("nvidia.com/gpucores", -5))
]


@pytest.mark.parametrize(("spec", "message"), MALFORMED_PODS + NEGATIVE_PODS)
def test_malformed_or_negative_pod_exits_2_naming_the_field(tmp_path: Path, spec: str, message: str) -> None:
    pods = tmp_path / "weird.yaml"
    pods.write_text(pod_with_spec(spec))
    code, out, err = run("--nodes", str(EXAMPLES / "nodes.yaml"), "--pods", str(pods))
    assert (code, out, err) == (2, "", f"error: {pods}: {message}\n")
    assert "Traceback" not in err
