"""Fixtures: a fake pod API on a free port and a KubeClient pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fakeapi import FakeApi

from served import serve
from tenantgpu.kubeclient import KubeClient


@pytest.fixture
async def fake_api() -> AsyncIterator[tuple[FakeApi, KubeClient]]:
    api = FakeApi()
    async for client in serve(api.app):
        try:
            yield api, client
        finally:
            api.close_watches()  # open watch streams end before the server shuts down
