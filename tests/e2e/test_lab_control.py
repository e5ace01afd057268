"""Lab control end to end: the lab's ConfigMap server and the suite's client agree over a real tenant API server."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from apiserver_harness import BackgroundLoop, RunningAPIServer

from tenantgpu.kubeclient import KubeClient
from tenantgpu.lab.control import LabControl as LabControlServer
from tenantgpu.lab.control import Switch
from tenantgpu.validate import lab_control
from tenantgpu.validate.cluster import KubeCluster


@pytest.fixture(scope="module")
def served(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop
) -> Iterator[tuple[LabControlServer, list[str]]]:
    calls: list[str] = []

    def switch(name: str) -> Switch:
        async def stop() -> None:
            calls.append(f"{name} stop")

        async def start() -> None:
            calls.append(f"{name} start")

        return Switch(stop, start)

    async def build() -> tuple[KubeClient, LabControlServer]:
        client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
        server = LabControlServer(
            client, {"hami-scheduler": switch("scheduler"), "konnectivity-agent": switch("agent")}
        )
        await server.start()
        return client, server

    client, server = background_loop.run(build())
    yield server, calls
    background_loop.run(server.stop())
    background_loop.run(client.close())


def test_the_suite_sees_what_the_lab_can_stop(apiserver: RunningAPIServer, served) -> None:
    control = lab_control.discover(KubeCluster("tenant", apiserver.kubeconfig))
    assert control is not None
    assert control.components() == {"hami-scheduler", "konnectivity-agent"}


def test_stop_and_start_reach_the_switch_and_are_confirmed(apiserver: RunningAPIServer, served) -> None:
    _, calls = served
    control = lab_control.discover(KubeCluster("tenant", apiserver.kubeconfig))
    assert control is not None
    calls.clear()
    control.stop("hami-scheduler")  # returns only once the lab wrote hami-scheduler.observed=stopped
    assert calls == ["scheduler stop"]
    assert control.observed("hami-scheduler") == "stopped"
    control.start("hami-scheduler")
    assert calls == ["scheduler stop", "scheduler start"]
    assert control.observed("konnectivity-agent") == "running"


def test_deleting_the_config_map_starts_what_was_stopped(apiserver: RunningAPIServer, served) -> None:
    _, calls = served
    cluster = KubeCluster("tenant", apiserver.kubeconfig)
    control = lab_control.discover(cluster)
    assert control is not None
    control.stop("konnectivity-agent")
    calls.clear()
    cluster.delete("ConfigMap", lab_control.NAME, lab_control.NAMESPACE)
    deadline = time.monotonic() + 5
    while calls != ["agent start"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert calls == ["agent start"]
