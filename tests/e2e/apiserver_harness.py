"""Helpers for end-to-end tests: API servers in a background loop, versioned kubectl binaries."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tenantgpu.apiserver.kinds import KAMAJI_KINDS
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore


def kubectl_path(version: str | None = None) -> str:
    """The real kubectl; `version="1.29"` picks `kubectl.1.29` next to the dispatcher."""
    dispatcher = shutil.which("kubectl")
    if dispatcher is None:
        pytest.fail("kubectl is not on PATH")
    if version is None:
        return dispatcher
    path = Path(os.path.realpath(dispatcher)).parent / f"kubectl.{version}"
    if not path.exists():
        pytest.fail(f"{path} does not exist")
    return str(path)


class BackgroundLoop:
    """An asyncio loop in a daemon thread, so synchronous tests (kubectl, Python client) run beside it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


@dataclass
class RunningAPIServer:
    """A started server plus what tests need to reach it."""

    server: APIServer
    loop: BackgroundLoop
    state_dir: Path
    kubeconfig: Path
    datastore: SQLiteDatastore
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.server.url

    def write_kubeconfig(self, name: str, text: str) -> Path:
        path = self.state_dir / name
        path.write_text(text)
        return path


def start_server(
    loop: BackgroundLoop,
    state_dir: Path,
    name: str = "tenant-a",
    *,
    management: bool = False,
    datastore: SQLiteDatastore | None = None,
    **config: Any,
) -> RunningAPIServer:
    state_dir.mkdir(parents=True, exist_ok=True)
    pki = ServerPKI.load_or_create(state_dir / f"{name}-pki", name)
    store = datastore or SQLiteDatastore(state_dir / "state.db")
    server = APIServer(
        APIServerConfig(
            name=name, datastore=store, pki=pki, extra_kinds=KAMAJI_KINDS if management else (), **config
        )
    )
    loop.run(server.start())
    kubeconfig = state_dir / f"{name}.kubeconfig"
    kubeconfig.write_text(server.admin_kubeconfig())
    return RunningAPIServer(server, loop, state_dir, kubeconfig, store)


Kubectl = Callable[..., subprocess.CompletedProcess[str]]
