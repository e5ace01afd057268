"""The management plane most Kamaji tests drive: its API server, its controller and the default DataStore,
with every tenant served in the test's process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tenantgpu.kamaji import model
from tenantgpu.kamaji.plane import ManagementPlane


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[ManagementPlane]:
    p = ManagementPlane(tmp_path / "datastore.sqlite", tmp_path / "pki", tmp_path / "management.kubeconfig")
    await p.start()
    await p.client.create(model.DATASTORES, model.datastore())
    yield p
    await p.stop()
