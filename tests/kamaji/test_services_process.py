"""The tenants' kube-scheduler and kube-controller-manager duties in a process of their own (as Kamaji runs
them in containers of their own): they do their work from there, come back when that process dies, and
end with the plane."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from tenantgpu.kamaji import model
from tenantgpu.kamaji.inprocess import InProcessHost
from tenantgpu.kamaji.plane import ManagementPlane
from tenantgpu.kamaji.servicesprocess import ServicesProcess

Obj = dict[str, Any]


async def _started_plane(root: Path) -> ManagementPlane:
    plane = ManagementPlane(
        root / "datastore.sqlite", root / "pki", root / "management.kubeconfig", services_process=True
    )
    await plane.start()
    await plane.client.create(model.DATASTORES, model.datastore())
    return plane


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[ManagementPlane]:
    p = await _started_plane(tmp_path)
    yield p
    await p.stop()


def _services(plane: ManagementPlane) -> ServicesProcess:
    assert isinstance(plane.host, InProcessHost)
    assert isinstance(plane.host.services, ServicesProcess)
    return plane.host.services


async def _ready_tenant(plane: ManagementPlane, name: str) -> kubernetes.client.CoreV1Api:
    await plane.client.create(
        model.TENANT_CONTROL_PLANES, model.tenant_control_plane(name, version="v1.31.4")
    )
    async with asyncio.timeout(20):
        while (
            model.version_status(await plane.client.get(model.TENANT_CONTROL_PLANES, name, "default"))
            != "Ready"
        ):
            await asyncio.sleep(0.02)
    secret = await plane.client.get(model.SECRETS, f"{name}-admin-kubeconfig", "default")
    config: Obj = yaml.safe_load(base64.b64decode(secret["data"]["admin.conf"]))
    return kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config_dict(config))


async def _default_account_appears(core: kubernetes.client.CoreV1Api, namespace: str) -> None:
    """kube-controller-manager's duty: a new namespace gets its `default` ServiceAccount."""
    body = kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=namespace))
    await asyncio.to_thread(core.create_namespace, body)
    async with asyncio.timeout(20):
        while True:
            accounts = await asyncio.to_thread(core.list_namespaced_service_account, namespace)
            if any(a.metadata.name == "default" for a in accounts.items):
                return
            await asyncio.sleep(0.05)


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().replace("\0", " ")


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def test_the_duties_run_in_a_process_of_their_own_and_do_their_work(plane: ManagementPlane) -> None:
    core = await _ready_tenant(plane, "alpha")
    await _default_account_appears(core, "team-a")
    pid = _services(plane).pid
    assert pid is not None and pid != os.getpid()
    assert "tenantgpu.kamaji.servicesprocess" in _cmdline(pid)


async def test_a_killed_services_process_is_replaced_with_every_tenants_duties(
    plane: ManagementPlane,
) -> None:
    cores = [await _ready_tenant(plane, name) for name in ("alpha", "beta")]
    await _default_account_appears(cores[0], "before")
    first = _services(plane).pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    async with asyncio.timeout(30):
        while _services(plane).pid in (None, first):
            await asyncio.sleep(0.05)
    # Both tenants' duties work again, from the new process.
    for index, core in enumerate(cores):
        await _default_account_appears(core, f"after-{index}")


async def test_the_services_process_ends_with_the_plane(tmp_path: Path) -> None:
    plane = await _started_plane(tmp_path)
    try:
        await _default_account_appears(await _ready_tenant(plane, "alpha"), "team-a")
        pid = _services(plane).pid
        assert pid is not None
    finally:
        await plane.stop()
    async with asyncio.timeout(10):
        while not _gone(pid):
            await asyncio.sleep(0.05)
