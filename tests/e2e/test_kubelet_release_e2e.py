"""A worker's kubelet is of its API server's release: `kubectl get nodes` shows that version, and what
the kubelet writes follows that release's feature-gate defaults (facts in tests/node/test_release.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from apiserver_harness import BackgroundLoop, Kubectl, release_server

from tenantgpu.gpushare import SharingConfig
from tenantgpu.hami.device_plugin import GPUSpec
from tenantgpu.kubeclient import KubeClient
from tenantgpu.node.worker import Worker

pytestmark = pytest.mark.slow  # drives real kubectl binaries

POD = {
    "metadata": {"name": "probe"},
    "spec": {
        "nodeName": "gpu-0",
        "securityContext": {"runAsUser": 1000, "supplementalGroups": [3000]},
        "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "config", "emptyDir": {}}],
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"limits": {"cpu": "500m", "memory": "1G"}},
                "volumeMounts": [
                    {"name": "scratch", "mountPath": "/scratch"},
                    {"name": "config", "mountPath": "/etc/app", "readOnly": True},
                ],
            }
        ],
    },
}


def _worker_with_a_running_pod(loop: BackgroundLoop, kubeconfig: Path) -> tuple[Worker, KubeClient]:
    async def up() -> tuple[Worker, KubeClient]:
        client = KubeClient.from_kubeconfig(kubeconfig)
        worker = Worker(client, "gpu-0", [GPUSpec("NVIDIA L4", 23034)], SharingConfig())
        await worker.start()
        await client.create("pods", POD, "default")
        async with asyncio.timeout(15):
            while (await client.get("pods", "probe", "default")).get("status", {}).get("phase") != "Running":
                await asyncio.sleep(0.05)
        return worker, client

    result: tuple[Worker, KubeClient] = loop.run(up())
    return result


def _down(loop: BackgroundLoop, worker: Worker, client: KubeClient) -> None:
    async def down() -> None:
        await worker.stop()
        await client.close()

    loop.run(down())


def _node_and_pod(
    kubectl: Kubectl, kubeconfig: Path, minor: str
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    table = kubectl("get", "nodes", kubeconfig=kubeconfig, version=minor).stdout
    node = json.loads(
        kubectl("get", "node", "gpu-0", "-o", "json", kubeconfig=kubeconfig, version=minor).stdout
    )
    pod = json.loads(
        kubectl("get", "pod", "probe", "-o", "json", kubeconfig=kubeconfig, version=minor).stdout
    )
    return table, node, pod


@pytest.mark.parametrize(
    ("version", "proxy", "ready_to_start", "features"),
    [
        # PodReadyToStartContainers and PodHostIPs are off in 1.28; kubeProxyVersion still set.
        ("v1.28.9", "v1.28.9", False, None),
        ("v1.31.4", "v1.31.4", True, None),
        # DisableNodeKubeProxyVersion and SupplementalGroupsPolicy on from 1.33.
        ("v1.33.1", "", True, {"supplementalGroupsPolicy": True}),
    ],
)
def test_the_kubelet_runs_its_api_server_s_release(
    background_loop: BackgroundLoop,
    kubectl: Kubectl,
    tmp_path: Path,
    version: str,
    proxy: str,
    ready_to_start: bool,
    features: dict[str, Any] | None,
) -> None:
    minor = version[1:5]
    with release_server(background_loop, tmp_path / "server", version) as kubeconfig:
        worker, client = _worker_with_a_running_pod(background_loop, kubeconfig)
        try:
            table, node, pod = _node_and_pod(kubectl, kubeconfig, minor)
        finally:
            _down(background_loop, worker, client)
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert row.split()[0] == "gpu-0" and row.split()[-1] == version
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == version and info["kubeProxyVersion"] == proxy
    assert node["status"].get("features") == features
    handlers = node["status"].get("runtimeHandlers")
    # a GPU node: containerd has the NVIDIA toolkit's handler beside runc
    assert [h["name"] for h in handlers or []] == ([] if minor < "1.31" else ["", "nvidia", "runc"])
    conditions = [c["type"] for c in pod["status"]["conditions"]]
    assert ("PodReadyToStartContainers" in conditions) is ready_to_start
    assert {"Initialized", "Ready", "ContainersReady", "PodScheduled"} <= set(conditions)
    assert ("hostIPs" in pod["status"]) is ready_to_start
    # RecursiveReadOnlyMounts is on from 1.31: the container's mounts are listed, a read-only one says so
    mounts = pod["status"]["containerStatuses"][0].get("volumeMounts")
    if minor >= "1.31":
        assert mounts == [
            {"name": "scratch", "mountPath": "/scratch"},
            {"name": "config", "mountPath": "/etc/app", "readOnly": True, "recursiveReadOnly": "Disabled"},
        ]
    else:
        assert mounts is None
    assert pod["status"]["hostIP"] == "127.0.0.1"
    # InPlacePodVerticalScaling and SupplementalGroupsPolicy are on from 1.33: the runtime's view of the
    # running container, its memory limit read back in bytes (tests/node/test_runtime_status.py)
    main = pod["status"]["containerStatuses"][0]
    if minor == "1.33":
        assert main["resources"] == {
            "limits": {"cpu": "500m", "memory": "1000000000"},
            "requests": {"cpu": "500m", "memory": "1G"},
        }
        assert main["user"] == {"linux": {"uid": 1000, "gid": 0, "supplementalGroups": [0, 3000]}}
    else:
        assert "resources" not in main and "user" not in main


def test_a_kubelet_of_another_release_reports_that_one(
    background_loop: BackgroundLoop, tmp_path: Path
) -> None:
    """`kubelet_version` stands for a kubelet older than its API server (the skew policy allows three
    minors): the node says so, and the pods it runs take that kubelet's shape."""
    with release_server(background_loop, tmp_path / "server", "v1.31.4") as kubeconfig:

        async def run() -> tuple[dict[str, Any], dict[str, Any]]:
            async with KubeClient.from_kubeconfig(kubeconfig) as client:
                worker = Worker(client, "gpu-0", [], SharingConfig(), kubelet_version="v1.28.15")
                await worker.start()
                try:
                    await client.create("pods", POD, "default")
                    async with asyncio.timeout(15):
                        while (pod := await client.get("pods", "probe", "default"))["status"].get(
                            "phase"
                        ) != "Running":
                            await asyncio.sleep(0.05)
                    return await client.get("nodes", "gpu-0"), pod
                finally:
                    await worker.stop()

        node, pod = background_loop.run(run())
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.28.15"
    assert "PodReadyToStartContainers" not in [c["type"] for c in pod["status"]["conditions"]]
