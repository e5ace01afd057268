"""A worker process: runs some tenants' data planes (worker nodes, HAMi, tunnel agents), driven over stdin.

In a real lab the worker nodes are machines of their own; here they are processes of their own, so a
tenant's API server and its workers run on different cores. The lab supervisor writes one JSON command
per line on this process's stdin and reads JSON lines from its stdout:

    {"id": 1, "op": "join", "tenant": "tenant-a", "konnectivity": "127.0.0.1:40123", "timeout": 300}
      -> {"id": 1, "progress": {"what": ..., "state": ..., "detail": ...}}   (any number)
      -> {"id": 1, "ok": true}  or  {"id": 1, "error": "one line"}
    {"op": "stop"}  -> every data plane stops gracefully (agents announce DRAIN), then {"op": "stopped"}

End of input means the supervisor is gone (even by kill -9): the data planes stop and the process exits,
so no worker outlives its lab.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from tenantgpu import eventloop
from tenantgpu.apiserver.gcpolicy import CollectorPolicy
from tenantgpu.lab.process import Progress
from tenantgpu.lab.spec import Lab, parse_lab
from tenantgpu.lab.state import StateDir

log = logging.getLogger(__name__)

_STOP_TIMEOUT = 20.0


class _Replies:
    """Writes reply lines to stdout; one line per write keeps them whole for the reader."""

    def send(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()


class WorkerProcess:
    """The data planes this process runs, by tenant name."""

    def __init__(self, state: StateDir, lab: Lab) -> None:
        self.state = state
        self.lab = lab
        self.planes: dict[str, Any] = {}
        self._replies = _Replies()
        self._joins: set[asyncio.Task[None]] = set()

    async def join(self, command_id: int, tenant: str, konnectivity: str, timeout: float) -> None:
        from tenantgpu.kamaji.kubeconfig import kubeconfig_ca
        from tenantgpu.lab.tenant import TenantDataPlane

        spec = next((t for t in self.lab.tenants if t.name == tenant), None)
        if spec is None:
            self._replies.send({"id": command_id, "error": f"tenant {tenant} is not in the lab spec"})
            return
        if tenant in self.planes:
            self._replies.send({"id": command_id, "error": f"tenant {tenant} already joined here"})
            return
        path = self.state.tenant_kubeconfig(tenant)

        def progress(step: Progress) -> None:
            self._replies.send({"id": command_id, "progress": step.as_dict()})

        plane = TenantDataPlane(
            spec, self.lab.sharing, path, konnectivity, kubeconfig_ca(path.read_text()), progress
        )
        self.planes[tenant] = plane
        try:
            await plane.start(timeout)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.exception("tenant %s: the workers did not join", tenant)
            self._replies.send({"id": command_id, "error": f"tenant {tenant}: {err or type(err).__name__}"})
            return
        log.info("tenant %s: workers joined", tenant)
        self._replies.send({"id": command_id, "ok": True})

    def dispatch(self, command: dict[str, Any]) -> bool:
        """Act on one command; False once asked to stop."""
        op = command.get("op")
        if op == "stop":
            return False
        if op == "join":
            task = asyncio.create_task(
                self.join(
                    int(command["id"]),
                    str(command["tenant"]),
                    str(command["konnectivity"]),
                    float(command.get("timeout") or 300),
                )
            )
            self._joins.add(task)
            task.add_done_callback(self._joins.discard)
            return True
        self._replies.send({"id": command.get("id"), "error": f"unknown op {op!r}"})
        return True

    async def stop(self) -> None:
        for task in list(self._joins):
            task.cancel()
        await asyncio.gather(*self._joins, return_exceptions=True)
        for tenant, plane in list(self.planes.items()):
            try:
                await asyncio.wait_for(plane.stop(), _STOP_TIMEOUT)
            except Exception:
                log.exception("tenant %s: the workers did not stop cleanly", tenant)
        self.planes.clear()


async def _stdin_lines() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def serve(state: StateDir) -> None:
    lab = parse_lab(state.lab_file.read_text(encoding="utf-8"), source=str(state.lab_file))
    process = WorkerProcess(state, lab)
    commands = await _stdin_lines()
    terminated = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, terminated.set)
    replies = _Replies()
    replies.send({"op": "ready"})
    collector = CollectorPolicy()
    collector.start()
    try:
        while not terminated.is_set():
            reading = asyncio.ensure_future(commands.readline())
            ending = asyncio.ensure_future(terminated.wait())
            await asyncio.wait({reading, ending}, return_when=asyncio.FIRST_COMPLETED)
            ending.cancel()
            if not reading.done():
                reading.cancel()
                break
            line = reading.result()
            if not line:
                log.info("the lab supervisor is gone; stopping the workers")
                break
            try:
                command = json.loads(line)
            except ValueError:
                log.error("ignoring a command that is not JSON: %r", line[:80])
                continue
            if not process.dispatch(command):
                break
    finally:
        collector.stop()
        await process.stop()
        replies.send({"op": "stopped"})


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tenantgpu.lab.workerprocess", description=__doc__)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--index", type=int, default=0, help="this process's number, for the logs")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args()
    logging.basicConfig(
        level=args.log_level,
        format=f"%(asctime)s %(levelname)s [workers-{args.index}] %(name)s: %(message)s",
    )
    # Ctrl-C in the terminal reaches the whole process group; the supervisor alone decides when the
    # workers stop, so they can drain their tunnels first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from tenantgpu.lab.supervisor import tune_for_many_tenants

    tune_for_many_tenants()
    eventloop.run(serve(StateDir.at(args.state_dir)))


if __name__ == "__main__":
    main()
