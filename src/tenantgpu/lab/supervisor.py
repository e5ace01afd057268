"""The lab supervisor: starts the management plane and every tenant in one process and one event loop,
runs it in the foreground or detached, and stops it again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenantgpu.kamaji import model
from tenantgpu.kamaji.plane import ManagementPlane
from tenantgpu.kubeclient import ApiError, Informer, KubeClient
from tenantgpu.lab.spec import Lab, load_lab, parse_lab
from tenantgpu.lab.state import LabLock, LabLockedError, StateDir

log = logging.getLogger(__name__)

TENANT_NAMESPACE = "default"
_READY_TIMEOUT = float(os.environ.get("TENANTGPU_READY_TIMEOUT", "300"))


class LabError(Exception):
    """The lab could not be started or stopped; the message is one line for the user."""


class LabAlreadyRunning(LabError):
    pass


@dataclass(frozen=True)
class Progress:
    """One step the lab reports while it comes up: `what` names the thing, `state` where it is."""

    what: str
    state: str
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"what": self.what, "state": self.state, "detail": self.detail}


ProgressSink = Callable[[Progress], None]


def _ignore(_: Progress) -> None:
    return None


def kubeconfig_file_name(namespace: str, name: str) -> str:
    """Lab tenants live in `default` and keep their plain name; others are prefixed by their namespace."""
    return name if namespace == TENANT_NAMESPACE else f"{namespace}.{name}"


@dataclass
class LabRuntime:
    """The whole lab inside this process: management plane, tenant control planes (and, as they are wired,
    each tenant's tunnel, workers and HAMi)."""

    state: StateDir
    lab: Lab
    progress: ProgressSink = _ignore
    plane: ManagementPlane | None = None
    _exporter: Informer | None = None
    _ready: dict[str, str] = field(default_factory=dict)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        self.state.create()
        self.progress(Progress("management plane", "starting"))
        self.plane = ManagementPlane(
            self.state.datastore, self.state.management_pki, self.state.management_kubeconfig
        )
        await self.plane.start()
        client = self.plane.client
        self.progress(Progress("management plane", "ready", self.plane.endpoint))
        await self._ensure_datastore(client)
        # Kubeconfigs of Ready tenants are written for every TCP, also those applied later with kubectl.
        self._exporter = Informer(client, model.TENANT_CONTROL_PLANES)
        self._exporter.add_handler(self._on_tcp)
        await self._exporter.start()
        assert self.plane.controller is not None
        await asyncio.wait_for(self.plane.controller.wait_synced(), _READY_TIMEOUT)
        for tenant in self.lab.tenants:
            await self._ensure_tenant(client, tenant.name)
        await self._wait_tenants_ready([t.name for t in self.lab.tenants])
        # Integration point for the running lab: per tenant, join the workers (konnectivity agent, Worker with
        # device plugin and kubelet) and install HAMi on the first worker, then wait for nodes and GPUs.

    async def stop(self) -> None:
        if self._exporter is not None:
            await self._exporter.stop()
            self._exporter = None
        if self.plane is not None:
            await self.plane.stop()
            self.plane = None

    async def _ensure_datastore(self, client: KubeClient) -> None:
        try:
            await client.create(
                model.DATASTORES, model.datastore(endpoint=f"sqlite://{self.state.datastore}")
            )
        except ApiError as err:
            if err.code != 409:
                raise

    async def _ensure_tenant(self, client: KubeClient, name: str) -> None:
        try:
            await client.get(model.TENANT_CONTROL_PLANES, name, TENANT_NAMESPACE)
            self.progress(Progress(f"tenant {name}", "resuming"))
            return
        except ApiError as err:
            if err.code != 404:
                raise
        manifest = model.tenant_control_plane(
            name,
            TENANT_NAMESPACE,
            version=self.lab.spec.kubernetes_version,
            labels={"tenantgpu.io/lab": "true"},
        )
        try:
            await client.create(model.TENANT_CONTROL_PLANES, manifest, TENANT_NAMESPACE)
        except ApiError as err:
            if err.code != 409:
                raise
        self.progress(Progress(f"tenant {name}", "provisioning"))

    async def _on_tcp(self, kind: str, tcp: model.Obj, old: model.Obj | None) -> None:
        ref = model.TenantRef.of(tcp)
        path = self.state.tenant_kubeconfig(kubeconfig_file_name(ref.namespace, ref.name))
        if kind == "DELETED":
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            self._ready.pop(ref.key, None)
            return
        if model.version_status(tcp) != model.VersionStatus.READY:
            self._ready.pop(ref.key, None)
            self._changed.set()
            return
        endpoint = model.endpoint(tcp)
        if self._ready.get(ref.key) == endpoint and path.exists():
            return
        assert self.plane is not None
        secret = await _read_admin_kubeconfig(self.plane.client, ref)
        if secret is None:
            return
        _write_private(path, secret)
        self._ready[ref.key] = endpoint
        self.progress(Progress(f"tenant {ref.name}", "ready", endpoint))
        self._changed.set()

    async def _wait_tenants_ready(self, names: list[str]) -> None:
        keys = {f"{TENANT_NAMESPACE}/{n}" for n in names}
        deadline = asyncio.get_running_loop().time() + _READY_TIMEOUT
        while not keys <= self._ready.keys():
            self._changed.clear()
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                missing = ", ".join(sorted(k.split("/", 1)[1] for k in keys - self._ready.keys()))
                raise LabError(f"tenants not Ready after {_READY_TIMEOUT:.0f}s: {missing}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 1.0))

    def endpoints(self) -> dict[str, str]:
        return {key.split("/", 1)[1]: endpoint for key, endpoint in self._ready.items()}


async def _read_admin_kubeconfig(client: KubeClient, ref: model.TenantRef) -> bytes | None:
    from tenantgpu.kamaji.units import read_secret, secret_bytes

    secret = await read_secret(client, ref.namespace, ref.secret_name(model.ADMIN_KUBECONFIG_SECRET))
    return None if secret is None else secret_bytes(secret, model.ADMIN_KUBECONFIG_KEY)


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


# --- choosing the lab ------------------------------------------------------------------------------


def resolve_lab(state: StateDir, lab_file: str | None) -> Lab:
    """`-f` wins and is remembered; otherwise the lab the state directory was created with; else the seed lab."""
    if lab_file is not None:
        lab = load_lab(lab_file)
        state.create()
        state.lab_file.write_text(Path(lab_file).read_text(encoding="utf-8"), encoding="utf-8")
        return lab
    if state.exists():
        return parse_lab(state.lab_file.read_text(encoding="utf-8"), source=str(state.lab_file))
    lab = load_lab(None)
    from tenantgpu.lab.spec import SEED_LAB_YAML

    state.create()
    state.lab_file.write_text(SEED_LAB_YAML, encoding="utf-8")
    return lab


# --- running in this process ---------------------------------------------------------------------


async def serve(
    state: StateDir, lab: Lab, progress: ProgressSink, on_ready: Callable[[LabRuntime], None]
) -> None:
    """Run the lab until SIGTERM or SIGINT; `on_ready` is called once everything is up."""
    runtime = LabRuntime(state, lab, progress)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        starting = asyncio.create_task(runtime.start())
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({starting, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if starting in done:
            starting.result()
            on_ready(runtime)
            await stop.wait()
        else:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await starting
        stopper.cancel()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await runtime.stop()


def run_foreground(
    state: StateDir, lab: Lab, progress: ProgressSink, on_ready: Callable[[LabRuntime], None]
) -> None:
    """Hold the state directory's lock and serve the lab until a signal; raises LabAlreadyRunning if held."""
    lock = LabLock(state)
    try:
        lock.acquire()
    except LabLockedError as err:
        raise LabAlreadyRunning(_already_running(state, err.pid)) from None
    try:
        asyncio.run(serve(state, lab, progress, on_ready))
    finally:
        lock.release()


def _already_running(state: StateDir, pid: int | None) -> str:
    return f"a lab is already running in {state.root} (pid {pid}); stop it with `tenantgpu down`"


# --- detached: a child process in its own session ------------------------------------------------


class PipeReporter:
    """The child's side of the readiness pipe: one JSON line per progress step, then `ready` or `error`."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "w", buffering=1)

    def progress(self, step: Progress) -> None:
        self._send({"event": "progress", **step.as_dict()})

    def ready(self, runtime: LabRuntime) -> None:
        self._send({"event": "ready", "endpoints": runtime.endpoints()})
        self.close()

    def error(self, message: str) -> None:
        self._send({"event": "error", "message": message})
        self.close()

    def _send(self, message: dict[str, Any]) -> None:
        if self._file.closed:
            return
        with contextlib.suppress(OSError):
            self._file.write(json.dumps(message) + "\n")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()


def start_detached(
    state: StateDir, lab_file: str | None, progress: ProgressSink, *, timeout: float = _READY_TIMEOUT
) -> dict[str, str]:
    """Start the lab in a new session with its logs under `DIR/logs/`; return once it is ready."""
    pid = state.running_pid()
    if pid is not None:
        raise LabAlreadyRunning(_already_running(state, pid))
    state.create()
    read_fd, write_fd = os.pipe()
    argv = [
        sys.executable,
        "-m",
        "tenantgpu",
        "up",
        "--state-dir",
        str(state.root),
        "--ready-fd",
        str(write_fd),
    ]
    if lab_file is not None:
        argv += ["-f", str(Path(lab_file).absolute())]
    with open(state.log_file, "ab") as log_file:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            start_new_session=True,
            close_fds=True,
        )
    os.close(write_fd)
    deadline = time.monotonic() + timeout
    with os.fdopen(read_fd, "r") as pipe:
        for line in pipe:
            message = json.loads(line)
            event = message.pop("event")
            if event == "progress":
                progress(Progress(**message))
            elif event == "ready":
                return dict(message.get("endpoints") or {})
            elif event == "error":
                _reap(child, 5)
                raise LabError(message["message"])
            if time.monotonic() > deadline:
                break
    code = _reap(child, 5)
    raise LabError(f"the lab process exited (code {code}) before it was ready; see {state.log_file}")


def _reap(child: subprocess.Popen[bytes], timeout: float) -> int | None:
    try:
        return child.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def stop_lab(state: StateDir, *, timeout: float = 30.0) -> int | None:
    """SIGTERM the lab process and wait until it has let go of the state directory; returns its pid."""
    pid = state.running_pid()
    if pid is None:
        return None
    if pid > 0:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while state.running_pid() is not None:
        if time.monotonic() > deadline:
            if pid > 0:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
            break
        time.sleep(0.05)
    return pid
