"""Fixtures: a fake pod API on a free port and a KubeClient pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from fakeapi import FakeApi

from tenantgpu.kubeclient import KubeClient, KubeConfig


@pytest.fixture
async def fake_api() -> AsyncIterator[tuple[FakeApi, KubeClient]]:
    api = FakeApi()
    runner = web.AppRunner(api.app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = KubeClient(KubeConfig(server=f"http://127.0.0.1:{port}"))
    yield api, client
    api.close_watches()
    await client.close()
    await runner.cleanup()
