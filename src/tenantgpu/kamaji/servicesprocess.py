"""The tenants' kube-scheduler and kube-controller-manager duties in a process of their own.

In Kamaji these run in containers of their own beside each tenant's kube-apiserver. Here they are one
process for all the tenants of the lab process: each duty watches every pod and node of its tenant, and
with the duties beside the API servers both ends of those watches would share one core. The lab drives
the process with JSON lines (see `tenantgpu.childprocess`):

    {"id": 1, "op": "start", "instance": {...}, "url": "https://127.0.0.1:40123"}   -> {"id": 1, "ok": true}
    {"id": 2, "op": "stop_tenant", "key": "<key>"}                                   -> {"id": 2, "ok": true}

A process that crashes is started again, and every tenant's duties with it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import Callable

from tenantgpu import eventloop
from tenantgpu.childprocess import ChildError, ChildProcess, Message, prepare_child, serve_commands
from tenantgpu.kamaji.host import ControlPlaneInstance
from tenantgpu.kamaji.services import LocalServices

log = logging.getLogger(__name__)

MODULE = "tenantgpu.kamaji.servicesprocess"
_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 20.0


class ServicesProcess:
    """The lab's side: a `ServicesRunner` whose services run in the child process, started on first use."""

    def __init__(self, *, log_hint: str = "", log_level: str = "WARNING") -> None:
        self.log_hint = log_hint
        self.log_level = log_level
        self._child: ChildProcess | None = None
        # What each tenant's services were started with, to start them again in a replacement process.
        self._wanted: dict[str, Message] = {}
        self._lock = asyncio.Lock()
        self._closed = False
        self._restart: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._child is None else self._child.pid

    async def _running_child(self) -> ChildProcess:
        async with self._lock:
            if self._child is None:
                child = ChildProcess(
                    "control-plane services process",
                    MODULE,
                    ["--log-level", self.log_level],
                    log_hint=self.log_hint,
                )
                child.on_exit = lambda code: self._lost(child, code)
                await child.start(_START_TIMEOUT)
                self._child = child
                log.info("tenants' kube-scheduler and kube-controller-manager duties: process %d", child.pid)
            return self._child

    async def start(self, instance: ControlPlaneInstance, url: str) -> None:
        command = {"instance": instance.to_json(), "url": url}
        self._wanted[instance.key] = command
        child = await self._running_child()
        await child.call("start", **command)

    async def stop(self, key: str) -> None:
        if self._wanted.pop(key, None) is None or self._child is None:
            return
        with contextlib.suppress(ChildError):
            await self._child.call("stop_tenant", key=key)

    async def close(self) -> None:
        self._closed = True
        if self._restart is not None:
            self._restart.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._restart
        self._wanted.clear()
        async with self._lock:
            if self._child is not None:
                await self._child.stop(_STOP_TIMEOUT)
                self._child = None

    def _lost(self, child: ChildProcess, code: int) -> None:
        if child is not self._child:
            return
        self._child = None
        if self._closed:
            return
        log.error("the control-plane services process exited (code %d); starting it again", code)
        self._restart = asyncio.get_running_loop().create_task(self._start_again(), name="services-restart")

    async def _start_again(self) -> None:
        if not self._wanted:
            return
        try:
            child = await self._running_child()
            await asyncio.gather(*(child.call("start", **command) for command in list(self._wanted.values())))
        except ChildError:
            log.exception("the control-plane services process could not be started again")


class _Commands:
    """The child's side: each op is a `LocalServices` method."""

    def __init__(self) -> None:
        self.services = LocalServices()

    async def start(self, command: Message, _: Callable[[Message], None]) -> Message:
        await self.services.start(ControlPlaneInstance.from_json(command["instance"]), str(command["url"]))
        return {}

    async def stop(self, command: Message, _: Callable[[Message], None]) -> Message:
        await self.services.stop(str(command["key"]))
        return {}


async def serve() -> None:
    commands = _Commands()
    await serve_commands({"start": commands.start, "stop_tenant": commands.stop}, commands.services.close)


def main() -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args()
    prepare_child("control-plane services", args.log_level)
    eventloop.run(serve())


if __name__ == "__main__":
    main()
