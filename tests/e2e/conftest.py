"""Fixtures for end-to-end tests: a tenant API server per module and a versioned `kubectl` runner."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer, kubectl_path, start_server

from tenantgpu.controlplane import ControlPlaneServices, NamespaceController
from tenantgpu.kubeclient import KubeClient


@pytest.fixture(scope="module")
def background_loop() -> Iterator[BackgroundLoop]:
    loop = BackgroundLoop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def apiserver(
    background_loop: BackgroundLoop, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningAPIServer]:
    """One tenant API server per test module, with an admin kubeconfig at `.kubeconfig`."""
    running = start_server(background_loop, tmp_path_factory.mktemp("apiserver"))
    yield running
    background_loop.run(running.server.stop())
    running.datastore.close()


@pytest.fixture(scope="module")
def namespace_controller(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop
) -> Iterator[NamespaceController]:
    """The namespace controller beside the module's server: without it a deleted namespace stays Terminating."""

    async def up() -> NamespaceController:
        running = NamespaceController(KubeClient.from_kubeconfig(apiserver.kubeconfig))
        await running.start()
        return running

    running = background_loop.run(up())
    yield running

    async def down() -> None:
        await running.stop()
        await running.client.close()

    background_loop.run(down())


@pytest.fixture(scope="module")
def services(apiserver: RunningAPIServer, background_loop: BackgroundLoop) -> Iterator[ControlPlaneServices]:
    """The module's tenant with its kube-scheduler and controller-manager duties running beside it,
    each a client of the API server over the wire. The production node grace period (40 s): the
    modules' nodes renew no leases. The server's CA signs approved CertificateSigningRequests, as the
    tenant's does in the lab."""

    async def up() -> ControlPlaneServices:
        plane = ControlPlaneServices(
            KubeClient.from_kubeconfig(apiserver.kubeconfig), signing_ca=apiserver.server.config.pki.ca
        )
        await plane.start()
        return plane

    plane = background_loop.run(up())
    yield plane

    async def down() -> None:
        await plane.stop()
        await plane.client.close()

    background_loop.run(down())


@pytest.fixture(scope="module")
def kubectl_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kubectl-home")


@pytest.fixture(scope="module")
def kubectl(apiserver: RunningAPIServer, kubectl_home: Path) -> Kubectl:
    """Runs `kubectl` against the module's server: `kubectl("get", "pods", version="1.29")`."""

    def run(
        *args: str,
        version: str | None = "1.33",
        kubeconfig: Path | None = None,
        check: bool = True,
        input: str | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HOME": str(kubectl_home / (version or "dispatcher"))}
        command = [kubectl_path(version), "--kubeconfig", str(kubeconfig or apiserver.kubeconfig), *args]
        result = subprocess.run(
            command, env=env, capture_output=True, text=True, input=input, timeout=timeout
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} failed ({result.returncode}): {result.stderr}{result.stdout}"
            )
        return result

    return run
