"""Helpers for end-to-end tests: API servers in a background loop, versioned kubectl binaries."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes
import pytest
import yaml

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.kinds import KAMAJI_KINDS
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore
from tenantgpu.node.kubeletclient import KubeletClient


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

    def __init__(self, new_loop: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop) -> None:
        self.loop = new_loop()
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


def connect_kubelets(running: RunningAPIServer) -> KubeletClient:
    """Wire the API server to its nodes' kubelets as the lab does (node proxy, logs, exec, attach, port
    forwarding), showing them kube-apiserver's kubelet client certificate."""
    ca = running.server.config.pki.ca
    kubelets = KubeletClient(
        error=errors.bad_request,
        client_certificate=ca.issue_client("kube-apiserver-kubelet-client", ["system:masters"]),
    )
    running.server.config.node_proxy = kubelets
    running.server.config.log_source = kubelets
    running.server.config.exec_source = kubelets

    async def lookup(name: str) -> dict[str, Any] | None:
        nodes = running.server.kinds.resource("", "v1", "nodes")
        assert nodes is not None
        return running.server.registry.get_object(nodes, "", name)

    kubelets.node_lookup = lookup
    return kubelets


def closed_unanswered(port: int, payload: bytes) -> bool:
    """Whether a connection to the local `port` is closed without a byte of answer once `payload` is
    sent. kubectl closes a forwarded connection the pod refused; what was sent and not yet read turns
    that close into a reset, so a reset is such a close too."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as connection:
        connection.sendall(payload)
        try:
            return connection.recv(100) == b""
        except ConnectionResetError:
            return True


@contextlib.contextmanager
def port_forwarding(
    kubectl: list[str], env: dict[str, str], *args: str
) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """`kubectl port-forward --address 127.0.0.1 ARGS` running (`kubectl`: the binary and its flags);
    yields the process and the local port it chose, and stops it afterwards."""
    command = [*kubectl, "port-forward", "--address", "127.0.0.1", *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"Forwarding from 127\.0\.0\.1:(\d+) ->", line)
        if found is None:
            process.kill()
            raise AssertionError(f"port-forward {' '.join(args)}: {line!r} {process.communicate()}")
        yield process, int(found.group(1))
    finally:
        if process.poll() is None:
            process.terminate()
        process.communicate(timeout=10)  # reaps it and closes its pipes


@contextlib.contextmanager
def release_server(loop: BackgroundLoop, state_dir: Path, version: str) -> Iterator[Path]:
    """A tenant API server of another Kubernetes release (`v1.33.1`), for as long as the block runs;
    yields its kubeconfig."""
    running = start_server(loop, state_dir, f"tenant-{version.replace('.', '-')}", kubernetes_version=version)
    try:
        yield running.kubeconfig
    finally:
        loop.run(running.server.stop())
        running.datastore.close()


Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class RawClient:
    """Plain HTTPS requests with a kubeconfig's credentials, for what typed clients cannot send."""

    def __init__(self, kubeconfig: Path, *, anonymous: bool = False, token: str | None = None) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        url = urlsplit(cluster["server"])
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.context = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
        self.token = token or (None if anonymous else user.get("token"))
        if not anonymous and "client-certificate-data" in user:
            with tempfile.TemporaryDirectory() as tmp:
                cert, key = Path(tmp) / "c.crt", Path(tmp) / "c.key"
                cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
                key.write_bytes(base64.b64decode(user["client-key-data"]))
                self.context.load_cert_chain(cert, key)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | str | dict | list | None = None,
        headers: dict[str, str] | None = None,
    ) -> RawResponse:
        payload = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        if isinstance(payload, str):
            payload = payload.encode()
        all_headers = {"Accept": "application/json", **(headers or {})}
        if payload is not None and "Content-Type" not in all_headers:
            all_headers["Content-Type"] = "application/json"
        if self.token:
            all_headers["Authorization"] = f"Bearer {self.token}"
        connection = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=30)
        try:
            connection.request(method, path, body=payload, headers=all_headers)
            response = connection.getresponse()
            return RawResponse(response.status, dict(response.getheaders()), response.read())
        finally:
            connection.close()


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05) -> Any:
    """Poll `probe` until it returns something truthy; fail naming `what` and the last value seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last seen: {last!r}")


def process_alive(pid: int) -> bool:
    """Whether the process still runs; a zombie has exited (only its parent, perhaps killed, would reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def child_processes(pid: int) -> list[int]:
    """The direct children of a process, from /proc."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


class StandInKubelet:
    """What a kubelet reports, for tests that run the controllers without one: each pod bound to a node
    (any pod, with `bound_only=False`, for modules without nodes) goes Running and Ready, or Failed when
    `fails(pod)` says so (once: `fails` may forget it); a pod `holds(pod)` picks stays Pending; a
    graceful deletion is confirmed, as once the containers are gone."""

    def __init__(
        self,
        api: Any,
        namespace: str,
        *,
        fails: Callable[[Any], bool] = lambda pod: False,
        holds: Callable[[Any], bool] = lambda pod: False,
        bound_only: bool = True,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.fails = fails
        self.holds = holds
        self.bound_only = bound_only
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> StandInKubelet:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            for pod in self.api.list_namespaced_pod(self.namespace).items:
                name = pod.metadata.name
                if self.bound_only and not pod.spec.node_name:
                    continue
                if pod.metadata.deletion_timestamp:
                    with contextlib.suppress(kubernetes.client.ApiException):  # gone already
                        self.api.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
                    continue
                if pod.status.phase != "Pending" or self.holds(pod):
                    continue
                if self.fails(pod):
                    status: dict[str, Any] = {"phase": "Failed"}
                else:
                    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
                # A pod deleted since the list (a rollout's) gives 404: one error must not end the
                # stand-in's thread, or every later pod of the module would stay Pending.
                with contextlib.suppress(kubernetes.client.ApiException):
                    self.api.patch_namespaced_pod_status(name, self.namespace, {"status": status})
            time.sleep(0.05)
