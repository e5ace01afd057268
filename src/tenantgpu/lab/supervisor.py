"""The lab supervisor: starts the management plane and every tenant in one process and one event loop,
runs it in the foreground or detached, and stops it again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenantgpu import eventloop
from tenantgpu.apiserver.gcpolicy import CollectorPolicy
from tenantgpu.kamaji import model
from tenantgpu.kamaji.plane import ManagementPlane
from tenantgpu.kubeclient import ApiError, Informer, KubeClient
from tenantgpu.lab.datastores import assign_datastore, control_plane_process_count, lab_datastores
from tenantgpu.lab.process import (
    LabAlreadyRunning,
    LabError,
    Progress,
    ProgressSink,
    already_running_message,
    ready_timeout,
)
from tenantgpu.lab.spec import Lab, TenantSpec, load_lab, parse_lab
from tenantgpu.lab.state import TENANT_NAMESPACE, LabLock, LabLockedError, StateDir, kubeconfig_file_name
from tenantgpu.lab.workerpool import WorkerPool, worker_process_count

log = logging.getLogger(__name__)


@dataclass
class LabRuntime:
    """The whole lab inside this process: management plane, tenant control planes (and, as they are wired,
    each tenant's tunnel, workers and HAMi)."""

    state: StateDir
    lab: Lab
    progress: ProgressSink = lambda _: None
    plane: ManagementPlane | None = None
    _exporter: Informer | None = None
    data_planes: list[Any] = field(default_factory=list)
    workers: WorkerPool | None = None
    _ready: dict[str, str] = field(default_factory=dict)
    _written: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    _stores: list[model.Obj] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        self.state.create()
        self.progress(Progress("management plane", "starting"))
        count = worker_process_count(
            None,
            sum(1 for t in self.lab.tenants if t.workers),
            sum(len(t.workers) for t in self.lab.tenants),
        )
        if count:
            # The worker processes import and start while the management plane comes up.
            self.workers = WorkerPool(self.state, count)
            starting_workers = asyncio.ensure_future(self.workers.start())
        extra_stores = control_plane_process_count(None, len(self.lab.tenants))
        self._stores = lab_datastores(self.state, extra_stores)
        self.plane = ManagementPlane(
            self.state.datastore,
            self.state.management_pki,
            self.state.management_kubeconfig,
            datastore_processes=True,
            log_hint=str(self.state.log_file),
        )
        await self.plane.start()
        if count:
            await starting_workers
        client = self.plane.client
        self.progress(Progress("management plane", "ready", self.plane.endpoint))
        await self._ensure_datastores(client)
        # Kubeconfigs of Ready tenants are written for every TCP, also those applied later with kubectl.
        self._exporter = Informer(client, model.TENANT_CONTROL_PLANES)
        self._exporter.add_handler(self._on_tcp)
        await self._exporter.start()
        assert self.plane.controller is not None
        # Only the lab's own tenants are waited for: a TCP applied with kubectl that keeps failing to
        # reconcile is retried in the background (see lab.log) and does not keep the lab from starting.
        own = {f"{TENANT_NAMESPACE}/{t.name}" for t in self.lab.tenants}
        try:
            await asyncio.wait_for(self.plane.controller.wait_synced(own), ready_timeout())
        except TimeoutError:
            stuck = "; ".join(f"{k}: {why}" for k, why in self.plane.controller.not_synced(own).items())
            raise LabError(
                f"TenantControlPlanes not reconciled after {ready_timeout():.0f}s ({stuck}); "
                f"see {self.state.log_file}"
            ) from None
        # Each tenant's workers join as soon as its control plane is Ready, while others still provision.
        bring_up = [asyncio.ensure_future(self._bring_up(client, tenant)) for tenant in self.lab.tenants]
        try:
            async with asyncio.timeout(ready_timeout()):
                for index, tenant in enumerate(self.lab.tenants):
                    await self._ensure_tenant(client, tenant.name, assign_datastore(self._stores, index))
                await asyncio.gather(*bring_up)
        except TimeoutError:
            missing = sorted(
                t.name for t in self.lab.tenants if f"{TENANT_NAMESPACE}/{t.name}" not in self._ready
            )
            what = (
                f"tenants not Ready: {', '.join(missing)}" if missing else "nodes not Ready with their GPUs"
            )
            raise LabError(f"{what} after {ready_timeout():.0f}s") from None
        finally:
            for task in bring_up:
                task.cancel()

    async def _bring_up(self, client: KubeClient, tenant: TenantSpec) -> None:
        """Wait for the tenant's control plane, then join its workers and install HAMi (see TenantDataPlane)."""
        from tenantgpu.kamaji.kubeconfig import kubeconfig_ca
        from tenantgpu.lab.tenant import TenantDataPlane

        key = f"{TENANT_NAMESPACE}/{tenant.name}"
        while key not in self._ready:
            await self._changed.wait()
        if not tenant.workers and not tenant.quotas:
            return
        tcp = await client.get(model.TENANT_CONTROL_PLANES, tenant.name, TENANT_NAMESPACE)
        port = model.previous_konnectivity_port(tcp)
        if not port and tenant.workers:
            raise LabError(f"tenant {tenant.name} has no konnectivity server (spec.addons.konnectivity)")
        self.progress(Progress(f"tenant {tenant.name}", "joining workers"))
        if self.workers is not None:
            address = f"{model.advertised_address(tcp)}:{port}"
            await self.workers.join(tenant.name, address, ready_timeout(), self.progress)
            return
        path = self.state.tenant_kubeconfig(tenant.name)
        plane = TenantDataPlane(
            tenant,
            self.lab.sharing,
            path,
            f"{model.advertised_address(tcp)}:{port}",
            kubeconfig_ca(path.read_text()),
            self.progress,
            kubelet_pki=lambda node: self.state.kubelet_pki(tenant.name, node),
        )
        self.data_planes.append(plane)
        await plane.start(ready_timeout())

    async def stop(self) -> None:
        # Workers go first, so their tunnel agents drain while the API servers still answer.
        if self.workers is not None:
            await self.workers.stop()
            self.workers = None
        for data_plane in self.data_planes:
            await data_plane.stop()
        self.data_planes = []
        if self._exporter is not None:
            await self._exporter.stop()
            self._exporter = None
        if self.plane is not None:
            await self.plane.stop()
            self.plane = None

    async def _ensure_datastores(self, client: KubeClient) -> None:
        for store in self._stores:
            try:
                await client.create(model.DATASTORES, store)
            except ApiError as err:
                if err.code != 409:
                    raise

    async def _ensure_tenant(self, client: KubeClient, name: str, datastore: str) -> None:
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
            datastore=datastore,
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
            self._written.pop(ref.key, None)
            return
        if not model.serving(tcp):
            self._ready.pop(ref.key, None)
            return
        endpoint = model.endpoint(tcp)
        # a renewed admin certificate (Kamaji's rotation) changes the Secret's checksum: write it again
        admin = ((tcp.get("status") or {}).get("kubeconfig") or {}).get("admin") or {}
        written = self._written.get(ref.key) == (endpoint, admin.get("checksum")) and path.exists()
        if written and self._ready.get(ref.key) == endpoint:
            return
        if not written:
            assert self.plane is not None
            secret = await _read_admin_kubeconfig(self.plane.client, ref)
            if secret is None:
                return
            _write_private(path, secret)
            self._written[ref.key] = (endpoint, admin.get("checksum"))
        fresh = self._ready.get(ref.key) != endpoint
        self._ready[ref.key] = endpoint
        if not fresh:
            return
        self.progress(Progress(f"tenant {ref.name}", "ready", endpoint, shown=model.version_status(tcp)))
        # Wake every waiter at once: they hold the old event, later waiters get a fresh one.
        self._changed.set()
        self._changed = asyncio.Event()

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


# asyncio gives every TLS connection a 256 KiB receive buffer; the lab holds both ends of several watch
# streams per tenant in one process, so that alone was ~4 MiB per tenant. A TLS record carries at most
# 16 KiB of plaintext, and the protocol reads in a loop until the record buffer is drained, so 32 KiB loses
# nothing but memory.
_TLS_READ_BUFFER_BYTES = 32 * 1024


def tune_for_many_tenants() -> None:
    """Process-wide settings of the lab process that let hundreds of tenants share one event loop."""
    import asyncio.sslproto

    asyncio.sslproto.SSLProtocol.max_size = _TLS_READ_BUFFER_BYTES
    _fix_mmap_threshold()


# glibc's M_TRIM_THRESHOLD and M_MMAP_THRESHOLD (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_BYTES = 128 * 1024
_TRIM_THRESHOLD_BYTES = 4 * 1024 * 1024


def _fix_mmap_threshold() -> None:
    """Keep glibc's mmap threshold at its initial 128 KiB. uvloop gives every TLS connection a 256 KiB read
    buffer, mostly untouched. glibc raises its threshold each time it frees such a mapped block. From then
    on, the buffers of new connections come from the heap, in pages that earlier buffers touched. Each
    watch then held about 0.1 MiB more, at both of its ends. Fixing the threshold keeps those buffers
    mapped, so only the pages read into count (docs/management-plane-performance-history.md, session 34).
    Does nothing where the C library is not glibc."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD_BYTES)


async def serve(
    state: StateDir, lab: Lab, progress: ProgressSink, on_ready: Callable[[LabRuntime], None]
) -> None:
    """Run the lab until SIGTERM or SIGINT; `on_ready` is called once everything is up."""
    runtime = LabRuntime(state, lab, progress)
    collector = CollectorPolicy()
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
            # Long-lived state is built now; full collections need not walk it again (see gcpolicy).
            collector.start()
            on_ready(runtime.endpoints())
            await stop.wait()
        else:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await starting
        stopper.cancel()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        collector.stop()
        await runtime.stop()


def run_foreground(
    state: StateDir, lab: Lab, progress: ProgressSink, on_ready: Callable[[LabRuntime], None]
) -> None:
    """Hold the state directory's lock and serve the lab until a signal; raises LabAlreadyRunning if held."""
    lock = LabLock(state)
    tune_for_many_tenants()
    try:
        lock.acquire()
    except LabLockedError as err:
        raise LabAlreadyRunning(already_running_message(state, err.pid)) from None
    try:
        eventloop.run(serve(state, lab, progress, on_ready))
    finally:
        lock.release()
