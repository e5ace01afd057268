"""The DataStore controller: derives each DataStore's `status.ready` and `status.usedBy` from the TCPs."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging

from tenantgpu.kamaji import model
from tenantgpu.kamaji.model import Obj
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

log = logging.getLogger(__name__)

# The lab's one store is SQLite; other drivers are valid Kamaji objects that nothing here can serve.
SERVED_DRIVERS = frozenset({model.DEFAULT_DRIVER})


def derive_datastore_status(datastore: Obj, tcps: list[Obj]) -> Obj:
    """What Kamaji reports for a DataStore: which TCPs use it and whether it can be used."""
    name = datastore["metadata"]["name"]
    driver = (datastore.get("spec") or {}).get("driver", "")
    used_by = sorted(
        model.TenantRef.of(t).key
        for t in tcps
        if model.datastore_name(t) == name and not model.is_deleting(t)
    )
    status: Obj = {"ready": driver in SERVED_DRIVERS, "usedBy": used_by}
    generation = datastore["metadata"].get("generation")
    if generation is not None:
        status["observedGeneration"] = generation
    return status


class DataStoreController:
    """Keeps every DataStore's status in step with the TenantControlPlanes that name it."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._datastores = Informer(client, model.DATASTORES)
        self._tcps = Informer(client, model.TENANT_CONTROL_PLANES)
        self._datastores.add_handler(self._changed)
        self._tcps.add_handler(self._changed)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._tcps.start()
        await self._datastores.start()
        self._task = asyncio.create_task(self._run(), name="datastore-controller")
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._datastores.stop()
        await self._tcps.stop()

    def _changed(self, kind: str, obj: Obj, old: Obj | None) -> None:
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            # Coalesce bursts (100 TCPs created at once) into one pass.
            await asyncio.sleep(0.05)
            tcps = self._tcps.items()
            for datastore in self._datastores.items():
                status = derive_datastore_status(datastore, tcps)
                if datastore.get("status") == status:
                    continue
                body = copy.deepcopy(datastore)
                body["status"] = status
                try:
                    await self.client.update_status(model.DATASTORES, body)
                except ApiError as err:
                    # A conflict or a deletion brings a watch event, and with it another pass.
                    log.debug("datastore %s: %s", datastore["metadata"]["name"], err)
