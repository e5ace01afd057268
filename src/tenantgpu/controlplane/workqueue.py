"""The queue a controller syncs its objects from, as client-go's work queue: a key is queued at most
once however many events name it, and a sync that fails is tried again a second later."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from tenantgpu.kubeclient import ApiError

log = logging.getLogger(__name__)

Key = tuple[str, str]
K = TypeVar("K", bound=tuple[str, ...])
# Pods a controller created that its watch has not shown yet count as present this long at most.
EXPECTATION_SECONDS = 30.0


def object_key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class WorkQueue(Generic[K]):
    """Runs `sync(key)` for each queued key, one at a time. A key is any hashable tuple: most
    controllers queue (namespace, name); the garbage collector queues what to do with what."""

    def __init__(self, name: str, sync: Callable[[K], Awaitable[None]]) -> None:
        self.name = name
        self._sync = sync
        # Made when a key comes and dropped when the last one is taken: an idle lab tenant has some thirty
        # queues, and an asyncio.Queue holds four deques of 760 bytes each even when empty.
        self._keys: deque[K] | None = None
        self._queued: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._worker: asyncio.Task[None] | None = None
        self._waiter: asyncio.Future[None] | None = None

    def add(self, key: K) -> None:
        if key not in self._queued:
            self._queued.add(key)
            if self._keys is None:
                self._keys = deque()
            self._keys.append(key)
            waiter = self._waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    async def _next(self) -> K:
        while not self._keys:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        key = self._keys.popleft()
        if not self._keys:
            self._keys = None
        return key

    def add_after(self, key: K, delay: float) -> None:
        """Queue `key` in `delay` seconds; a later call for the same key replaces the earlier one."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._timers[key] = asyncio.get_running_loop().call_later(max(delay, 0.0), self.add, key)

    def start(self) -> None:
        self._worker = asyncio.create_task(self._work(), name=self.name)

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    async def _work(self) -> None:
        while True:
            key = await self._next()
            self._queued.discard(key)
            try:
                await self._sync(key)
            except ApiError as err:
                if err.code != 404:  # a conflict or a refusal: look again with fresher objects
                    log.info("%s %s: %s; retrying", self.name, "/".join(key), err)
                    self.add_after(key, 1.0)
            except Exception:
                log.exception("%s %s: sync failed", self.name, "/".join(key))
                self.add_after(key, 5.0)


@dataclass
class Expectations:
    """Objects a controller created that its watch has not shown yet (client-go's expectations), so
    that a sync running before the watch catches up does not create them twice.

    The watch handler reports what it sees (`observe`), as client-go's handlers lower expectations: a
    pod added and deleted again between two syncs is then not awaited until the expectation expires.
    """

    pending: dict[str, float] = field(default_factory=dict)
    # Names the watch showed before their create returned (the event can beat the response).
    early: dict[str, float] = field(default_factory=dict)

    def expect(self, name: str, now: float) -> None:
        if self.early.pop(name, None) is None:
            self.pending[name] = now

    def observe(self, name: str, now: float) -> None:
        """The watch showed `name` being added or deleted."""
        if self.pending.pop(name, None) is not None:
            return
        self.early[name] = now
        if len(self.early) > 64:
            for stale in [n for n, at in self.early.items() if now - at > EXPECTATION_SECONDS]:
                del self.early[stale]

    def count(self, seen: set[str], now: float) -> int:
        """How many are still awaited, given the names the watch shows now."""
        for name in [n for n, at in self.pending.items() if n in seen or now - at > EXPECTATION_SECONDS]:
            del self.pending[name]
        return len(self.pending)


def observe_event(
    expectations: dict[str, Expectations], owner_uid: str, event: str, obj: dict[str, Any], now: float
) -> None:
    """Report a watch event of an owned object to its owner's expectations. The owner's sync made the
    entry before it created the object, so only an add or a delete counts, not a change."""
    expected = expectations.get(owner_uid)
    if expected is not None and event != "MODIFIED":
        expected.observe((obj.get("metadata") or {}).get("name", ""), now)
