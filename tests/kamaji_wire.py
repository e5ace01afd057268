"""Waiting on a management plane's TenantControlPlane and on what its tenant shows, for the Kamaji tests
that go over the wire."""

from __future__ import annotations

import asyncio
import base64
import tempfile
from collections.abc import Callable
from typing import Any

import kubernetes

from tenantgpu.kamaji import model
from tenantgpu.kamaji.plane import ManagementPlane
from tenantgpu.kubeclient import ApiError
from tenantgpu.kubeclient.client import PatchType

Obj = dict[str, Any]


async def tcp_matching(
    plane: ManagementPlane, check: Callable[[Obj], bool], timeout: float = 10.0, name: str = "tenant-a"
) -> Obj:
    """The TCP once `check` holds for it."""
    deadline = asyncio.get_running_loop().time() + timeout
    tcp: Obj = {}
    while asyncio.get_running_loop().time() < deadline:
        tcp = await plane.client.get(model.TENANT_CONTROL_PLANES, name, "default")
        if check(tcp):
            return tcp
        await asyncio.sleep(0.02)
    raise AssertionError(f"the TCP never matched; last status: {tcp.get('status')}")


async def eventually(probe: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    """The first truthy answer of a blocking `probe` (an official-client call), run off the loop."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = await asyncio.to_thread(probe)
        if found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"never: {what}")
        await asyncio.sleep(0.05)


async def admin_api(plane: ManagementPlane, name: str = "tenant-a") -> kubernetes.client.ApiClient:
    """The official client as the tenant's admin, from the kubeconfig Secret Kamaji writes."""
    secret = await plane.client.get(model.SECRETS, f"{name}-admin-kubeconfig", "default")
    with tempfile.NamedTemporaryFile("w", suffix=".kubeconfig", delete=False) as fh:
        fh.write(base64.b64decode(secret["data"]["admin.conf"]).decode())
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=fh.name, client_configuration=config)
    return kubernetes.client.ApiClient(config)


def found(read: Callable[[], Any]) -> Any:
    """What an official-client read returns, or None on 404."""
    try:
        return read()
    except kubernetes.client.ApiException as err:
        if err.status == 404:
            return None
        raise


async def patch_tcp(
    plane: ManagementPlane, patch: Any, patch_type: PatchType = "merge", name: str = "tenant-a"
) -> None:
    """Patch the TCP, again when the controller's status write raced the patch (409)."""
    for _ in range(10):
        try:
            await plane.client.patch(
                model.TENANT_CONTROL_PLANES, name, patch, "default", patch_type=patch_type
            )
            return
        except ApiError as err:
            if err.code != 409:
                raise
