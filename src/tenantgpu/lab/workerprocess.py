"""A worker process: runs some tenants' data planes (worker nodes, HAMi, tunnel agents), driven over stdin.

In a real lab the worker nodes are machines of their own; here they are processes of their own, so a
tenant's API server and its workers run on different cores. The lab supervisor drives it with JSON lines
(see `tenantgpu.childprocess`):

    {"id": 1, "op": "join", "tenant": "tenant-a", "konnectivity": "127.0.0.1:40123", "timeout": 300}
      -> {"id": 1, "progress": {"what": ..., "state": ..., "detail": ...}}   (any number)
      -> {"id": 1, "ok": true, "result": {}}  or  {"id": 1, "error": "one line"}
    {"op": "stop"}  -> every data plane stops gracefully (agents announce DRAIN), then {"op": "stopped"}

End of input means the supervisor is gone (even by kill -9): the data planes stop and the process exits,
so no worker outlives its lab.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tenantgpu import eventloop
from tenantgpu.childprocess import Message, prepare_child, serve_commands
from tenantgpu.lab.process import LabError
from tenantgpu.lab.spec import Lab, parse_lab
from tenantgpu.lab.state import StateDir

log = logging.getLogger(__name__)

_STOP_TIMEOUT = 20.0


class WorkerProcess:
    """The data planes this process runs, by tenant name."""

    def __init__(self, state: StateDir, lab: Lab) -> None:
        self.state = state
        self.lab = lab
        self.planes: dict[str, Any] = {}

    async def join(self, command: Message, progress: Callable[[Message], None]) -> Message:
        from tenantgpu.kamaji.kubeconfig import kubeconfig_ca
        from tenantgpu.lab.tenant import TenantDataPlane

        tenant = str(command["tenant"])
        timeout = float(command.get("timeout") or 300)
        spec = next((t for t in self.lab.tenants if t.name == tenant), None)
        if spec is None:
            raise LabError(f"tenant {tenant} is not in the lab spec")
        if tenant in self.planes:
            raise LabError(f"tenant {tenant} already joined here")
        path = self.state.tenant_kubeconfig(tenant)
        plane = TenantDataPlane(
            spec,
            self.lab.sharing,
            path,
            str(command["konnectivity"]),
            kubeconfig_ca(path.read_text()),
            lambda step: progress(step.as_dict()),
            kubelet_pki=lambda node: self.state.kubelet_pki(tenant, node),
        )
        self.planes[tenant] = plane
        try:
            await plane.start(timeout)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            raise LabError(f"tenant {tenant}: {err or type(err).__name__}") from err
        log.info("tenant %s: workers joined", tenant)
        return {}

    async def stop(self) -> None:
        for tenant, plane in list(self.planes.items()):
            try:
                await asyncio.wait_for(plane.stop(), _STOP_TIMEOUT)
            except Exception:
                log.exception("tenant %s: the workers did not stop cleanly", tenant)
        self.planes.clear()


async def serve(state: StateDir) -> None:
    lab = parse_lab(state.lab_file.read_text(encoding="utf-8"), source=str(state.lab_file))
    process = WorkerProcess(state, lab)
    await serve_commands({"join": process.join}, process.stop)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tenantgpu.lab.workerprocess", description=__doc__)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--index", type=int, default=0, help="this process's number, for the logs")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args()
    prepare_child(f"workers-{args.index}", args.log_level)
    eventloop.run(serve(StateDir.at(args.state_dir)))


if __name__ == "__main__":
    main()
