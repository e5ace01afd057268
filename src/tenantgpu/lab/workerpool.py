"""The supervisor's side of the worker processes: starts them, hands each tenant's workers to one, stops them.

The lab's API servers run in the supervisor's process; the tenants' data planes (worker nodes, HAMi,
tunnel agents) run in `count` worker processes (`tenantgpu.lab.workerprocess`), handed out round robin
in the order the tenants join, so the two halves of every pod's way use different cores. With `count` 0 the data planes
run in the supervisor's own event loop, as one process.
"""

from __future__ import annotations

import asyncio
import logging
import os

from tenantgpu.childprocess import ChildError, ChildProcess
from tenantgpu.lab.process import WORKER_PROCESSES_ENV, LabError, Progress, ProgressSink, process_setting
from tenantgpu.lab.state import StateDir

log = logging.getLogger(__name__)

# A worker process costs about half a second of start-up and pays off only when there is load to split;
# labs with fewer worker nodes than this run in one process under `auto`.
AUTO_MIN_WORKER_NODES = 3
_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 30.0


def worker_process_count(setting: str | None, tenants_with_workers: int, worker_nodes: int) -> int:
    """How many worker processes a lab gets: a number, or `auto` (one per two cores for a lab of at
    least AUTO_MIN_WORKER_NODES worker nodes on two or more cores, else none); never more than there are
    tenants with workers."""
    wanted = process_setting(setting, WORKER_PROCESSES_ENV, "worker processes")
    if wanted is None:
        cores = os.cpu_count() or 1
        wanted = 0 if cores < 2 or worker_nodes < AUTO_MIN_WORKER_NODES else max(1, cores // 2)
    return min(wanted, tenants_with_workers)


class WorkerPool:
    """`await start()`, then `await join(tenant, konnectivity_address)` per tenant, `await stop()` at the end."""

    def __init__(self, state: StateDir, count: int) -> None:
        self.state = state
        self.count = count
        self._children: list[ChildProcess] = []
        self._assigned: dict[str, int] = {}

    @property
    def pids(self) -> list[int]:
        return [child.pid for child in self._children]

    async def start(self) -> None:
        level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
        for index in range(self.count):
            child = ChildProcess(
                f"worker process {index}",
                "tenantgpu.lab.workerprocess",
                ["--state-dir", str(self.state.root), "--index", str(index), "--log-level", str(level)],
                log_hint=str(self.state.log_file),
            )
            await child.spawn()
            self._children.append(child)
        try:
            async with asyncio.timeout(_START_TIMEOUT):
                for child in self._children:
                    await child.wait_ready()
        except TimeoutError:
            raise LabError(f"worker processes not ready after {_START_TIMEOUT:.0f}s") from None
        except ChildError as err:
            raise LabError(str(err)) from None

    async def join(self, tenant: str, konnectivity: str, timeout: float, progress: ProgressSink) -> None:
        """Start the tenant's workers in its process; returns when its nodes are Ready with their GPUs."""
        index = self._assigned.setdefault(tenant, len(self._assigned) % len(self._children))
        try:
            await self._children[index].call(
                "join",
                lambda step: progress(Progress(**step)),
                tenant=tenant,
                konnectivity=konnectivity,
                timeout=timeout,
            )
        except ChildError as err:
            raise LabError(str(err)) from None

    async def stop(self) -> None:
        """Ask every worker process to stop its data planes (tunnels drain), then wait for it to exit."""
        await asyncio.gather(*(child.stop(_STOP_TIMEOUT) for child in self._children))
        self._children = []
