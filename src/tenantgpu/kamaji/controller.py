"""The TenantControlPlane controller: watches TCPs over the management API and reconciles each one's units."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Collection, Sequence

from tenantgpu.kamaji import model
from tenantgpu.kamaji.host import ControlPlaneHost
from tenantgpu.kamaji.model import Obj, VersionStatus
from tenantgpu.kamaji.units import Reconciliation, Unit, default_units, rotation_requested
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

log = logging.getLogger(__name__)

_RETRY_SECONDS = (0.05, 0.2, 0.5, 1.0, 2.0, 5.0)


class TenantControlPlaneController:
    """List+watch TenantControlPlanes and drive each to its wanted state; status is derived every pass.

    Keys are processed one at a time each (a work queue like controller-runtime's), several keys at once.
    """

    def __init__(
        self,
        client: KubeClient,
        host: ControlPlaneHost,
        *,
        units: Sequence[Unit] | None = None,
        concurrency: int = 8,
    ) -> None:
        self.client = client
        self.host = host
        self.units: list[Unit] = list(units) if units is not None else default_units()
        self._informer = Informer(client, model.TENANT_CONTROL_PLANES)
        self._informer.add_handler(self._on_event)
        # A TCP whose DataStore is missing waits for it: Kamaji's controller watches DataStores and
        # reconciles the TCPs that name one when it appears or changes.
        self._datastores = Informer(client, model.DATASTORES)
        self._datastores.add_handler(self._on_datastore)
        # Kamaji's certificate lifecycle controller: a labelled Secret annotated for rotation has its
        # TenantControlPlane reconciled, which renews the certificate (and rolls the control plane).
        self._certificates = Informer(client, model.SECRETS, label_selector=model.LIFECYCLE_LABEL)
        self._certificates.add_handler(self._on_certificate)
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._active: set[str] = set()
        self._dirty: set[str] = set()
        self._gone: dict[str, Obj] = {}
        # key → (failed reconciliations in a row, the last one's error): the retry's backoff and the report
        self._failures: dict[str, tuple[int, str]] = {}
        self._concurrency = concurrency
        self._tasks: list[asyncio.Task[None]] = []
        self._unsynced: set[str] = set()
        self._done_before_sync: set[str] = set()
        self._counting = False
        self._reconciled = asyncio.Event()  # set each time a TCP of `_unsynced` was reconciled

    async def start(self) -> None:
        """Returns once the informer has listed every TCP (their reconciliations are queued)."""
        self._tasks = [
            asyncio.create_task(self._work(), name=f"tcp-controller-{i}") for i in range(self._concurrency)
        ]
        await self._datastores.start()
        await self._certificates.start()
        await self._informer.start()
        # A restarted lab finds the Ready status its last run derived; until every TCP was reconciled once
        # by this run, that status is a memory, not an observation.
        self._unsynced = {model.TenantRef.of(tcp).key for tcp in self._informer.items()}
        self._unsynced -= self._done_before_sync
        self._counting = True
        self._reconciled.set()  # a waiter that came before start looks again

    async def wait_synced(self, keys: Collection[str] | None = None) -> None:
        """Wait until every TCP that existed at start, or each of `keys` among them, has been reconciled
        successfully once. `keys` lets a caller wait for its own tenants while another TCP keeps failing."""
        while not self._counting or self._still_unsynced(keys):
            self._reconciled.clear()
            await self._reconciled.wait()

    def not_synced(self, keys: Collection[str] | None = None) -> dict[str, str]:
        """The TCPs `wait_synced` still waits for, each with why its last reconciliation failed."""
        return {
            key: self._failures.get(key, (0, "not reconciled yet"))[1] for key in self._still_unsynced(keys)
        }

    def _still_unsynced(self, keys: Collection[str] | None) -> list[str]:
        return sorted(self._unsynced if keys is None else self._unsynced.intersection(keys))

    async def stop(self) -> None:
        await self._informer.stop()
        await self._datastores.stop()
        await self._certificates.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    def _on_event(self, kind: str, obj: Obj, old: Obj | None) -> None:
        key = model.TenantRef.of(obj).key
        if kind == "DELETED":
            self._gone[key] = obj
        else:
            self._gone.pop(key, None)
        self._enqueue(key)

    def _on_datastore(self, kind: str, obj: Obj, old: Obj | None) -> None:
        if kind == "DELETED" or (old is not None and old.get("spec") == obj.get("spec")):
            return  # its status follows the TCPs (usedBy): reconciling them for it would only loop
        name = obj["metadata"]["name"]
        for tcp in self._informer.items():
            if model.datastore_name(tcp) == name or model.current_datastore_name(tcp) == name:
                self._enqueue(model.TenantRef.of(tcp).key)

    def _on_certificate(self, kind: str, obj: Obj, old: Obj | None) -> None:
        if kind == "DELETED" or not rotation_requested(obj):
            return
        meta = obj.get("metadata") or {}
        for owner in meta.get("ownerReferences") or []:
            if owner.get("kind") == "TenantControlPlane":
                tcp = model.TenantRef(
                    meta.get("namespace") or "default", owner.get("name", ""), owner.get("uid", "")
                )
                self._enqueue(tcp.key)

    def requeue(self, key: str) -> None:
        """Reconcile "<namespace>/<name>" again, e.g. after the process that served it was lost."""
        self._enqueue(key)

    def _enqueue(self, key: str) -> None:
        if key in self._active:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            self._active.add(key)
            try:
                await self.reconcile(key)
                self._failures.pop(key, None)
                self._mark_reconciled(key)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                attempt = self._failures.get(key, (0, ""))[0]
                self._failures[key] = (attempt + 1, str(err) or repr(err))
                delay = _RETRY_SECONDS[min(attempt, len(_RETRY_SECONDS) - 1)]
                if isinstance(err, ApiError) and err.code == 409:
                    log.debug("tcp %s: conflict, retrying", key)
                else:
                    log.warning(
                        "tcp %s: reconcile failed (retry in %.2fs): %s", key, delay, err, exc_info=True
                    )
                asyncio.get_running_loop().call_later(delay, self._enqueue, key)
            finally:
                self._active.discard(key)
                if key in self._dirty:
                    self._dirty.discard(key)
                    self._enqueue(key)

    def _mark_reconciled(self, key: str) -> None:
        if not self._counting:
            self._done_before_sync.add(key)
        elif key in self._unsynced:
            self._unsynced.discard(key)
            self._reconciled.set()

    async def reconcile(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        tcp = self._informer.get(namespace, name)
        if tcp is None:
            gone = self._gone.pop(key, None)
            if gone is not None:
                await self._clean_up(gone)
            return
        tcp = copy.deepcopy(tcp)
        if model.is_deleting(tcp):
            await self._clean_up(tcp)
            await self._drop_finalizer(tcp)
            return
        if model.FINALIZER not in (tcp["metadata"].get("finalizers") or []):
            # Go on with the patched object at once: waiting for its watch event would cost a round trip.
            tcp = await self._add_finalizer(tcp)
        r = Reconciliation(tcp=tcp, client=self.client, host=self.host)
        for unit in self.units:
            await unit.ensure(r)
        await self._write_status(tcp, self._derive_status(r))

    def _derive_status(self, r: Reconciliation) -> Obj:
        status = r.status
        wanted = model.replicas(r.tcp)
        state = model.derive_version_status(
            replicas=wanted,
            running=r.running is not None,
            ready=r.running is not None,
            failed=r.failure is not None,
            write_limited=any(model.blocks_of(r.tcp)),
        )
        version: Obj = {"status": str(state)}
        installed = (((r.tcp.get("status") or {}).get("kubernetesResources") or {}).get("version") or {}).get(
            "version"
        )
        if state in (VersionStatus.READY, VersionStatus.SLEEPING):
            version["version"] = model.kubernetes_version(r.tcp)
        elif installed:
            # Kamaji writes the installed version only when Ready or Sleeping and keeps it otherwise
            # (`kubectl get tcp`'s INSTALLED VERSION while it upgrades or is WriteLimited)
            version["version"] = installed
        if r.failure:
            version["message"] = r.failure
        status.setdefault("kubernetesResources", {})["version"] = version
        generation = r.tcp["metadata"].get("generation")
        if generation is not None:
            status["observedGeneration"] = generation
        return status

    async def _write_status(self, tcp: Obj, status: Obj) -> None:
        if tcp.get("status") == status:
            return
        body = copy.deepcopy(tcp)
        body["status"] = status
        await self.client.update_status(model.TENANT_CONTROL_PLANES, body)

    async def _clean_up(self, tcp: Obj) -> None:
        r = Reconciliation(tcp=tcp, client=self.client, host=self.host)
        for unit in reversed(self.units):
            await unit.clean_up(r)

    async def _add_finalizer(self, tcp: Obj) -> Obj:
        finalizers = [*(tcp["metadata"].get("finalizers") or []), model.FINALIZER]
        return await self._patch_finalizers(tcp, finalizers)

    async def _drop_finalizer(self, tcp: Obj) -> None:
        finalizers = [f for f in tcp["metadata"].get("finalizers") or [] if f != model.FINALIZER]
        try:
            await self._patch_finalizers(tcp, finalizers)
        except ApiError as err:
            if err.code != 404:
                raise

    async def _patch_finalizers(self, tcp: Obj, finalizers: list[str]) -> Obj:
        ref = model.TenantRef.of(tcp)
        patch = {
            "metadata": {"finalizers": finalizers, "resourceVersion": tcp["metadata"].get("resourceVersion")}
        }
        return await self.client.patch(
            model.TENANT_CONTROL_PLANES, ref.name, patch, ref.namespace, patch_type="merge"
        )
