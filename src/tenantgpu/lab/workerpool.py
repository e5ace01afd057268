"""The supervisor's side of the worker processes: starts them, hands each tenant's workers to one, stops them.

The lab's API servers run in the supervisor's process; the tenants' data planes (worker nodes, HAMi,
tunnel agents) run in `count` worker processes (`tenantgpu.lab.workerprocess`), handed out round robin
in the order the tenants join, so the two halves of every pod's way use different cores. With `count` 0 the data planes
run in the supervisor's own event loop, as one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from tenantgpu.lab.process import LabError, Progress, ProgressSink
from tenantgpu.lab.state import StateDir

log = logging.getLogger(__name__)

WORKER_PROCESSES_ENV = "TENANTGPU_WORKER_PROCESSES"
# A worker process costs about half a second of start-up and pays off only when there is load to split;
# labs with fewer worker nodes than this run in one process under `auto`.
AUTO_MIN_WORKER_NODES = 3
_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 30.0


def worker_process_count(setting: str | None, tenants_with_workers: int, worker_nodes: int) -> int:
    """How many worker processes a lab gets: a number, or `auto` (one per two cores for a lab of at
    least AUTO_MIN_WORKER_NODES worker nodes on two or more cores, else none); never more than there are
    tenants with workers."""
    value = (setting or os.environ.get(WORKER_PROCESSES_ENV) or "auto").strip().lower()
    if value == "auto":
        cores = os.cpu_count() or 1
        wanted = 0 if cores < 2 or worker_nodes < AUTO_MIN_WORKER_NODES else max(1, cores // 2)
    else:
        try:
            wanted = int(value)
        except ValueError:
            raise LabError(f"worker processes: expected a number or auto, got {value!r}") from None
        if wanted < 0:
            raise LabError(f"worker processes: expected 0 or more, got {wanted}")
    return min(wanted, tenants_with_workers)


@dataclass
class _Call:
    progress: ProgressSink
    done: asyncio.Future[None]


@dataclass
class _Child:
    """One worker process and the commands it has not answered yet."""

    index: int
    process: asyncio.subprocess.Process
    calls: dict[int, _Call] = field(default_factory=dict)
    reader: asyncio.Task[None] | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)

    def send(self, command: dict[str, Any]) -> None:
        stdin = self.process.stdin
        if stdin is None or stdin.is_closing():
            raise LabError(f"worker process {self.index} is not running")
        stdin.write((json.dumps(command) + "\n").encode())


class WorkerPool:
    """`await start()`, then `await join(tenant, konnectivity_address)` per tenant, `await stop()` at the end."""

    def __init__(self, state: StateDir, count: int) -> None:
        self.state = state
        self.count = count
        self._children: list[_Child] = []
        self._next_id = 0
        self._assigned: dict[str, int] = {}

    @property
    def pids(self) -> list[int]:
        return [child.process.pid for child in self._children]

    async def start(self) -> None:
        level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
        for index in range(self.count):
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tenantgpu.lab.workerprocess",
                "--state-dir",
                str(self.state.root),
                "--index",
                str(index),
                "--log-level",
                str(level),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            child = _Child(index, process)
            child.reader = asyncio.create_task(self._read(child), name=f"worker-process-{index}")
            self._children.append(child)
        try:
            async with asyncio.timeout(_START_TIMEOUT):
                for child in self._children:
                    ready = asyncio.ensure_future(child.ready.wait())
                    gone = asyncio.ensure_future(child.stopped.wait())
                    await asyncio.wait({ready, gone}, return_when=asyncio.FIRST_COMPLETED)
                    ready.cancel()
                    gone.cancel()
                    if not child.ready.is_set():
                        raise LabError(
                            f"worker process {child.index} exited before it was ready; see {self.state.log_file}"
                        )
        except TimeoutError:
            raise LabError(f"worker processes not ready after {_START_TIMEOUT:.0f}s") from None

    async def join(self, tenant: str, konnectivity: str, timeout: float, progress: ProgressSink) -> None:
        """Start the tenant's workers in its process; returns when its nodes are Ready with their GPUs."""
        index = self._assigned.setdefault(tenant, len(self._assigned) % len(self._children))
        child = self._children[index]
        self._next_id += 1
        call_id = self._next_id
        call = _Call(progress, asyncio.get_running_loop().create_future())
        child.calls[call_id] = call
        try:
            child.send(
                {
                    "id": call_id,
                    "op": "join",
                    "tenant": tenant,
                    "konnectivity": konnectivity,
                    "timeout": timeout,
                }
            )
            await call.done
        finally:
            child.calls.pop(call_id, None)

    async def _read(self, child: _Child) -> None:
        stdout = child.process.stdout
        assert stdout is not None
        try:
            while line := await stdout.readline():
                try:
                    message = json.loads(line)
                except ValueError:
                    log.warning("worker process %d: %s", child.index, line.decode(errors="replace").rstrip())
                    continue
                self._on_message(child, message)
        finally:
            child.stopped.set()
            code = await child.process.wait()
            for call in child.calls.values():
                if not call.done.done():
                    call.done.set_exception(
                        LabError(
                            f"worker process {child.index} exited (code {code}); see {self.state.log_file}"
                        )
                    )

    @staticmethod
    def _on_message(child: _Child, message: dict[str, Any]) -> None:
        if message.get("op") == "ready":
            child.ready.set()
            return
        call = child.calls.get(message.get("id", -1))
        if call is None:
            return
        if "progress" in message:
            call.progress(Progress(**message["progress"]))
        elif "error" in message:
            if not call.done.done():
                call.done.set_exception(LabError(str(message["error"])))
        elif message.get("ok") and not call.done.done():
            call.done.set_result(None)

    async def stop(self) -> None:
        """Ask every worker process to stop its data planes (tunnels drain), then wait for it to exit."""
        for child in self._children:
            with contextlib.suppress(LabError, OSError):
                child.send({"op": "stop"})
        for child in self._children:
            try:
                await asyncio.wait_for(child.process.wait(), _STOP_TIMEOUT)
            except TimeoutError:
                log.warning("worker process %d did not stop; killing it", child.index)
                with contextlib.suppress(ProcessLookupError):
                    child.process.kill()
                await child.process.wait()
            if child.reader is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await child.reader
        self._children = []
