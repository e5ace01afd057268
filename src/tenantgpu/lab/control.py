"""The lab side of lab control: a tenant's ConfigMap `kube-system/tenantgpu-lab-control` that stops and starts
its HAMi scheduler and tunnel agents on request (contract: src/tenantgpu/validate/README-lab-control.md)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tenantgpu.kubeclient import ApiError, KubeClient
from tenantgpu.kubeclient.informer import Informer

log = logging.getLogger(__name__)

NAMESPACE = "kube-system"
NAME = "tenantgpu-lab-control"
RUNNING = "running"
STOPPED = "stopped"


@dataclass(frozen=True)
class Switch:
    """How to stop and start one component; each returns once the component really is in that state."""

    stop: Callable[[], Awaitable[None]]
    start: Callable[[], Awaitable[None]]


class LabControl:
    """Serves the switches of one tenant: watches `<component>.desired`, acts, then writes `.observed`."""

    def __init__(self, client: KubeClient, switches: dict[str, Switch]) -> None:
        self.client = client
        self.switches = switches
        self.state = dict.fromkeys(switches, RUNNING)
        self._informer = Informer(client, "configmaps", NAMESPACE, field_selector=f"metadata.name={NAME}")
        self._informer.add_handler(self._on_change)
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Advertise every switch as running, then follow the ConfigMap."""
        data = {f"{c}.observed": RUNNING for c in self.switches} | {
            f"{c}.desired": RUNNING for c in self.switches
        }
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "data": data,
        }
        try:
            await self.client.create("configmaps", body, NAMESPACE)
        except ApiError as err:
            if err.code != 409:
                raise
            await self.client.patch("configmaps", NAME, {"data": data}, NAMESPACE)
        await self._informer.start()

    async def stop(self) -> None:
        await self._informer.stop()
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _on_change(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        data = dict(obj.get("data") or {}) if kind != "DELETED" else {}
        wanted = {c: data.get(f"{c}.desired", RUNNING) for c in self.switches}  # a deleted map means: run
        task = asyncio.create_task(self._apply(wanted))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _apply(self, wanted: dict[str, str]) -> None:
        async with self._lock:
            for component, desired in wanted.items():
                if desired not in (RUNNING, STOPPED) or desired == self.state[component]:
                    continue
                switch = self.switches[component]
                try:
                    await (switch.stop() if desired == STOPPED else switch.start())
                except Exception:
                    log.exception("lab control: %s → %s failed", component, desired)
                    continue
                self.state[component] = desired
                log.info("lab control: %s is %s", component, desired)
                with contextlib.suppress(ApiError):
                    await self.client.patch(
                        "configmaps", NAME, {"data": {f"{component}.observed": desired}}, NAMESPACE
                    )
