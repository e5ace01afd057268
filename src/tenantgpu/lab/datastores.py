"""How the lab spreads its tenants over DataStores, and so over control-plane processes.

Each SQLite DataStore is served by one process (see `tenantgpu.kamaji.datastorehosts`): `default`, the
management plane's own file, in the lab's process, and `datastore-1` … `datastore-N` each in a process of
its own. New tenants are assigned round robin in the lab file's order through the TCP's `spec.dataStore`,
as a Kamaji user would spread tenants over DataStores; a resumed tenant keeps the store its data is in.
"""

from __future__ import annotations

import os

from tenantgpu.kamaji import model
from tenantgpu.lab.process import CONTROL_PLANE_PROCESSES_ENV, process_setting
from tenantgpu.lab.state import StateDir

# A control-plane process costs about half a second of start-up; smaller labs (the seed lab has two
# tenants) keep every API server in the lab's process under `auto`.
AUTO_MIN_TENANTS = 4
# On two cores the lab, its worker process and the load already use both: a second control-plane process
# placed no more pods per second (bench/lab, interleaved runs) and cost more CPU per pod. It pays once
# there are cores to spare, so `auto` adds one per four cores.
AUTO_CORES_PER_PROCESS = 4


def control_plane_process_count(setting: str | None, tenants: int) -> int:
    """How many DataStores beyond `default` the lab serves, each from a process of its own: a number, or
    `auto` (one per AUTO_CORES_PER_PROCESS cores for a lab of at least AUTO_MIN_TENANTS tenants, else
    none); never more than there are tenants besides the first."""
    wanted = process_setting(setting, CONTROL_PLANE_PROCESSES_ENV, "control-plane processes")
    if wanted is None:
        cores = os.cpu_count() or 1
        wanted = 0 if tenants < AUTO_MIN_TENANTS else cores // AUTO_CORES_PER_PROCESS
    return min(wanted, max(0, tenants - 1))


def lab_datastores(state: StateDir, extra: int) -> list[model.Obj]:
    """The DataStores of a lab: `default` on the lab's own file, then `extra` more, a file each."""
    stores = [model.datastore(endpoint=f"sqlite://{state.datastore}")]
    for index in range(1, extra + 1):
        name = f"datastore-{index}"
        stores.append(model.datastore(name, endpoint=f"sqlite://{state.datastores / name}.sqlite"))
    return stores


def assign_datastore(stores: list[model.Obj], tenant_index: int) -> str:
    """The DataStore a new tenant goes to: round robin over the lab's stores."""
    return str(stores[tenant_index % len(stores)]["metadata"]["name"])
