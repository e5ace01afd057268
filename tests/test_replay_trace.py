"""Trace CSVs load into arrays, and bad input is refused with one clear message."""

from pathlib import Path

import pytest

from tenantgpu.replay.trace import ANY_MODEL, TraceError, default_trace_dir, load_nodes, load_pods

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,393216,8,G2\nn1,64000,262144,2,P100\nn2,32000,65536,0,\n"
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"
    "p0,4000,8192,1,500,,LS\np1,8000,16384,2,1000,P100,BE\np2,1000,1024,0,0,,LS\n"
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_nodes_and_pods_load_with_models_and_specs(tmp_path: Path) -> None:
    nodes = load_nodes(write(tmp_path, "n.csv", NODES))
    pods = load_pods(write(tmp_path, "p.csv", PODS))
    assert nodes.gpu_capacity == 10 and nodes.models == ("G2", "P100")
    assert list(nodes.model_bit) == [1, 2, 0]
    assert list(pods.total_milli) == [500, 2000, 0]
    masks = pods.spec_masks(nodes.models)
    assert masks[0] == ANY_MODEL and masks[1] == 2


def test_missing_column_is_named(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="gpu_milli"):
        load_pods(write(tmp_path, "p.csv", "name,cpu_milli,memory_mib,num_gpu\np,1,1,1\n"))


def test_node_list_without_gpus_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no GPUs"):
        load_nodes(write(tmp_path, "n.csv", "sn,cpu_milli,memory_mib,gpu,model\nn,1000,1024,0,\n"))


def test_fractional_multi_gpu_pod_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="whole GPUs"):
        load_pods(write(tmp_path, "p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,2,500\n"))


def test_default_trace_has_the_readme_figures() -> None:
    """README of the shared trace: 1,213 GPU nodes, 6,212 GPUs, 8,152 pods, 3,078 of them below one GPU."""
    nodes = load_nodes(default_trace_dir() / "openb_node_list_gpu_node.csv")
    pods = load_pods(default_trace_dir() / "openb_pod_list_default.csv")
    assert (len(nodes), nodes.gpu_capacity, len(pods)) == (1213, 6212, 8152)
    assert int(((pods.num_gpu == 1) & (pods.gpu_milli < 1000)).sum()) == 3078


MANIFESTS = """
apiVersion: v1
kind: Pod
metadata: {name: notebook, annotations: {nvidia.com/use-gputype: "A100,H100"}}
spec:
  containers:
  - name: main
    resources:
      requests: {cpu: "2", memory: 8Gi}
      limits: {nvidia.com/gpu: 1, nvidia.com/gpucores: 30, nvidia.com/gpumem-percentage: 30}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer}
spec:
  replicas: 3
  template:
    spec:
      containers:
      - name: main
        resources:
          requests: {cpu: 500m, memory: 1024Mi}
          limits: {nvidia.com/gpu: 2}
"""


def test_pod_manifests_become_trace_rows(tmp_path: Path) -> None:
    from tenantgpu.replay.trace import load_workload

    pods = load_workload(write(tmp_path, "w.yaml", MANIFESTS))
    assert pods.names == ("notebook", "trainer-0", "trainer-1", "trainer-2")
    assert list(pods.cpu_milli) == [2000, 500, 500, 500]
    assert list(pods.memory_mib) == [8192, 1024, 1024, 1024]
    assert list(pods.num_gpu) == [1, 2, 2, 2] and list(pods.gpu_milli) == [300, 1000, 1000, 1000]
    assert pods.gpu_spec[0] == "A100|H100"
    with pytest.raises(TraceError, match="no pods"):
        load_workload(write(tmp_path, "e.yaml", "kind: ConfigMap\n"))


def test_json_manifests_load_like_yaml(tmp_path: Path) -> None:
    import json

    import yaml

    from tenantgpu.replay.trace import load_workload

    docs = [d for d in yaml.safe_load_all(MANIFESTS) if d]
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    from_json = load_workload(write(tmp_path, "w.json", listed))
    from_yaml = load_workload(write(tmp_path, "w.yaml", MANIFESTS))
    assert from_json.names == from_yaml.names and from_json.gpu_spec == from_yaml.gpu_spec
    assert list(from_json.total_milli) == list(from_yaml.total_milli)
