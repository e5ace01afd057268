"""`tenantgpu plan` from the outside: a `kubectl get nodes,pods -A -o yaml` dump in, one JSON object out.

Runs the installed command in a subprocess, as a user would; expectations follow HAMi v2.10's
webhook and scheduler (binpack nodes, spread GPUs by default).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REGISTER = "hami.io/node-nvidia-register"
A100 = '[{"id":"GPU-a100-0000","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA A100-SXM4-80GB","mode":"hami-core","health":true}]'
L4 = (
    '[{"id":"GPU-l4-0000","count":10,"devmem":23034,"devcore":100,"type":"NVIDIA L4","mode":"hami-core",'
    '"health":true},{"id":"GPU-l4-0001","index":1,"count":10,"devmem":23034,"devcore":100,'
    '"type":"NVIDIA L4","numa":1,"mode":"hami-core","health":true}]'
)
NOISE = {
    "uid": "0b8f3c1e-1111-2222-3333-444455556666",
    "resourceVersion": "4711",
    "creationTimestamp": "2026-11-29T10:00:00Z",
    "managedFields": [
        {
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-11-29T10:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {".": {}}}},
        }
    ],
}


def run(*args: str, columns: int = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "tenantgpu", "plan", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def node(name: str, register: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name},
            "annotations": {REGISTER: register},
            **NOISE,
        },
        "spec": {"podCIDR": "10.244.1.0/24"},
        "status": {
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus * 10)},
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus * 10)},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.31.0"},
        },
    }


def gpu_container(name: str = "main", **limits: Any) -> dict[str, Any]:
    names = {"gpu": "nvidia.com/gpu", "mem": "nvidia.com/gpumem", "cores": "nvidia.com/gpucores",
             "pct": "nvidia.com/gpumem-percentage"}  # fmt: skip
    return {
        "name": name,
        "image": "cuda:12",
        "resources": {"limits": {names[k]: v for k, v in limits.items()}},
    }


def pod(name: str, *containers: dict[str, Any], namespace: str = "team-a", **extra: Any) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace, "annotations": extra.pop("annotations", {})}
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": list(containers)},
    }
    if "init" in extra:
        obj["spec"]["initContainers"] = extra.pop("init")
    obj["spec"].update(extra.pop("spec", {}))
    if "status" in extra:
        obj["status"] = extra.pop("status")
    return obj


def running(name: str, node_name: str, allocated: str, phase: str = "Running") -> dict[str, Any]:
    p = pod(
        name,
        gpu_container(gpu=1, mem=20000, cores=50),
        annotations={
            "hami.io/vgpu-node": node_name,
            "hami.io/vgpu-devices-allocated": allocated,
            "hami.io/vgpu-devices-to-allocate": ";;",
            "hami.io/bind-phase": "success",
        },
        spec={"nodeName": node_name, "schedulerName": "hami-scheduler"},
        status={"phase": phase, "conditions": [{"type": "Ready", "status": "True"}], "podIP": "10.244.1.7"},
    )
    p["metadata"].update(NOISE)
    return p


def cluster(tmp_path: Path, *pods: dict[str, Any], extra: list[dict[str, Any]] | None = None) -> str:
    items = [node("gpu-a100", A100, 1), node("gpu-l4", L4, 2), *(extra or []), *pods]
    path = tmp_path / "cluster.yaml"
    path.write_text(
        yaml.safe_dump(
            {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
        )
    )
    return str(path)


def plan_json(path: str) -> dict[str, dict[str, Any]]:
    res = run("--nodes", path, "--pods", path, "-o", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert list(doc) == ["placements"]
    return {p["pod"]: p for p in doc["placements"]}


def test_kubectl_dump_with_noise_places_in_order(tmp_path: Path) -> None:
    path = cluster(
        tmp_path,
        running("notebook", "gpu-l4", "GPU-l4-0000,NVIDIA,20000,50:;"),
        running("done", "gpu-l4", "GPU-l4-0001,NVIDIA,20000,50:;", phase="Succeeded"),
        pod("small", gpu_container(gpu=1, mem=4000, cores=30)),
        pod(
            "a100-only",
            gpu_container(gpu=1, mem=10000, cores=20),
            annotations={"nvidia.com/use-gputype": "a100"},
        ),
        pod("multi", gpu_container(gpu=2, mem=3000, cores=10)),
        pod(
            "with-init",
            gpu_container("app", gpu=1, mem=1000),
            init=[gpu_container("warmup", gpu=1, mem=30000)],
        ),
        pod("oversize", gpu_container(gpu=1, mem=100000, cores=10)),
    )
    placements = plan_json(path)
    assert list(placements) == [
        "team-a/small",
        "team-a/a100-only",
        "team-a/multi",
        "team-a/with-init",
        "team-a/oversize",
    ]
    # binpack: the L4 node holds the notebook (the Succeeded pod holds nothing); spread: its idle GPU1
    assert placements["team-a/small"] == {
        "pod": "team-a/small",
        "node": "gpu-l4",
        "devices": "GPU-l4-0001,NVIDIA,4000,30:;",
        "reason": None,
    }
    assert placements["team-a/a100-only"]["devices"] == "GPU-a100-0000,NVIDIA,10000,20:;"
    # two distinct cards on one node, the emptier first (the A100 node has one card only)
    assert placements["team-a/multi"]["node"] == "gpu-l4"
    assert placements["team-a/multi"]["devices"] == "GPU-l4-0001,NVIDIA,3000,10:GPU-l4-0000,NVIDIA,3000,10:;"
    # the 30000 MiB init container fits only the A100; both segments, init first
    assert placements["team-a/with-init"]["node"] == "gpu-a100"
    assert (
        placements["team-a/with-init"]["devices"]
        == "GPU-a100-0000,NVIDIA,30000,0:;GPU-a100-0000,NVIDIA,1000,0:;"
    )
    oversize = placements["team-a/oversize"]
    assert oversize["node"] is None and oversize["devices"] is None
    assert "CardInsufficientMemory" in oversize["reason"]


@pytest.mark.parametrize(
    ("spec", "limits", "message"),
    [
        (
            {"containers": [{**gpu_container(gpu=1, mem=1000), "securityContext": {"privileged": True}}]},
            None,
            "container main is privileged",
        ),
        ({"nodeName": "gpu-l4"}, {"gpu": 1, "mem": 1000}, "pod has node assigned"),
        (
            {},
            {"gpu": 1, "pct": 150},
            "invalid nvidia.com/gpumem-percentage value 150 in container main: must be an integer between 0 and 100",
        ),
    ],
)
def test_webhook_denials_are_reasons(tmp_path: Path, spec: dict, limits: dict | None, message: str) -> None:
    p = pod("denied", gpu_container(**(limits or {"gpu": 1})), spec=spec)
    placements = plan_json(cluster(tmp_path, p))
    assert placements == {
        "team-a/denied": {"pod": "team-a/denied", "node": None, "devices": None, "reason": message}
    }


def test_quota_exceeded_by_the_second_pod(tmp_path: Path) -> None:
    rq = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu", "namespace": "team-q", **NOISE},
        "spec": {"hard": {"limits.nvidia.com/gpumem": "5000", "requests.nvidia.com/gpu": "4"}},
        "status": {"hard": {"limits.nvidia.com/gpumem": "5000"}, "used": {"limits.nvidia.com/gpumem": "0"}},
    }
    path = cluster(
        tmp_path,
        pod("q1", gpu_container(gpu=1, mem=4000), namespace="team-q"),
        pod("q2", gpu_container(gpu=1, mem=4000), namespace="team-q"),
        pod("free", gpu_container(gpu=1, mem=4000), namespace="team-a"),
        extra=[rq],
    )
    placements = plan_json(path)
    assert placements["team-q/q1"]["node"] is not None
    assert placements["team-q/q2"] == {
        "pod": "team-q/q2",
        "node": None,
        "devices": None,
        "reason": "exceeding resource quota",
    }
    assert placements["team-a/free"]["node"] is not None


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- just\n- strings\n", ""),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources:\n      limits: {nvidia.com/gpumem: 1x}\n",
            "limits.nvidia.com/gpumem",
        ),
        ("{{{{ not yaml", ""),
    ],
)
def test_bad_pod_files_exit_2_with_one_line(tmp_path: Path, text: str, fragment: str) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(text)
    res = run("--nodes", cluster(tmp_path), "--pods", str(pods), "-o", "json")
    assert res.returncode == 2
    assert res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert fragment in res.stderr


@pytest.mark.parametrize(
    "register",
    ['[{"id": "GPU-1", "count": "ten"}]', "GPU-1,10,16384,100,NVIDIA-Tesla T4,0,true,0,hami-core:"],
)
def test_malformed_or_pre_v28_register_exits_2(tmp_path: Path, register: str) -> None:
    """HAMi v2.10's scheduler reads the register annotation as JSON only."""
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump(node("bad", register, 1)))
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump(pod("p", gpu_container(gpu=1, mem=10))))
    res = run("--nodes", str(nodes), "--pods", str(pods))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "bad" in res.stderr and REGISTER in res.stderr


def test_unreadable_file_exits_2(tmp_path: Path) -> None:
    res = run("--nodes", str(tmp_path / "missing.yaml"), "--pods", str(tmp_path / "missing.yaml"))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("columns", [60, 100, 160])
def test_table_reasons_stay_readable_in_narrow_terminals(tmp_path: Path, columns: int) -> None:
    path = cluster(
        tmp_path,
        pod("oversize-and-then-some", gpu_container(gpu=2, mem=30000, cores=10)),
        pod("fits", gpu_container(gpu=1, mem=1000)),
    )
    res = run("--nodes", path, "--pods", path, columns=columns)
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    assert all(len(line.rstrip()) <= columns for line in lines)
    # whole reason words, never one word per line
    words = {w.strip(",") for line in lines for w in line.split()}
    assert {"NodeInsufficientDevice", "CardInsufficientMemory"} <= words
    assert not any(line.strip() in ("nodes", "1", "1 nodes") for line in lines)
    assert lines[-1] == "1/2 pods placed"
