"""An informer: list, then watch from the list's resourceVersion, keeping a cache and calling handlers."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from tenantgpu.kubeclient.client import KubeClient, sleep_backoff
from tenantgpu.kubeclient.errors import ApiError
from tenantgpu.kubeclient.resources import ResourceKind, resource_kind

log = logging.getLogger(__name__)

# handler(event_type, obj, old): event_type is ADDED, MODIFIED or DELETED; old is the previous cached object.
Handler = Callable[[str, dict[str, Any], dict[str, Any] | None], Awaitable[None] | None]
Key = tuple[str, str]


def object_key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class Informer:
    """Keeps `cache` (namespace/name → object) in step with the API; `await start()` returns once synced."""

    def __init__(
        self,
        client: KubeClient,
        resource: str | ResourceKind,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        read_only: bool = False,
    ) -> None:
        self.client = client
        # client-go's SetTransform: applied to each object before it is cached and handed on
        self.transform = transform
        # Whoever reads this informer's objects never changes them in place (client-go's rule for every
        # informer cache), so a server of this process may hand over its own (inprocesswatch.py).
        self.read_only = read_only
        self.resource = resource_kind(resource)
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.cache: dict[Key, dict[str, Any]] = {}
        self.resource_version: str | None = None
        self._handlers: list[Handler] = []
        # A flag and a future made only while someone waits: an asyncio.Event keeps a deque of 760
        # bytes, and a lab tenant has some twenty-five informers.
        self._synced = False
        self._sync_waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.relists = 0

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.cache.get((namespace or "", name))

    def items(self) -> list[dict[str, Any]]:
        return list(self.cache.values())

    @property
    def synced(self) -> bool:
        return self._synced

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"informer-{self.resource.plural}")
        if self._synced:
            return
        if self._sync_waiter is None:
            self._sync_waiter = asyncio.get_running_loop().create_future()
        task = self._task
        done, _ = await asyncio.wait({self._sync_waiter, task}, return_when=asyncio.FIRST_COMPLETED)
        if task in done and not self._synced:
            task.result()  # re-raise why the informer died before syncing

    async def stop(self) -> None:
        """Stop watching; a later `start()` lists afresh, as a new informer would."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        self._synced = False
        self.cache = {}
        self.resource_version = None

    async def _run(self) -> None:
        attempt = 0
        need_list = True
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                async for event in self.client.watch(
                    self.resource,
                    self.namespace,
                    resource_version=self.resource_version,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    shared=self.read_only,
                ):
                    attempt = 0
                    await self._apply(event.type, event.object, event.shared)
            except asyncio.CancelledError:
                raise
            except ApiError as err:
                if err.code == 410:
                    need_list = True  # our resourceVersion is too old: start over from a fresh list
                    continue
                log.warning("informer %s: %s", self.resource.plural, err)
                await sleep_backoff(attempt)
                attempt += 1
            except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as err:
                log.debug("informer %s: connection: %s", self.resource.plural, err)
                # After a dropped connection relist too: events may have been compacted meanwhile.
                need_list = True
                await sleep_backoff(attempt)
                attempt = min(attempt + 1, 6)

    async def _relist(self) -> None:
        listing = await self.client.list(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        )
        self.relists += 1
        items = listing["items"]
        if self.transform is not None:
            items = [self.transform(o) for o in items]
        fresh = {object_key(o): o for o in items}
        old_cache = self.cache
        self.cache = dict(fresh)
        self.resource_version = (listing.get("metadata") or {}).get("resourceVersion")
        for key, obj in fresh.items():
            old = old_cache.get(key)
            if old is None:
                await self._notify("ADDED", obj, None)
            elif _rv(old) != _rv(obj):
                await self._notify("MODIFIED", obj, old)
        for key, old in old_cache.items():
            if key not in fresh:
                await self._notify("DELETED", old, old)
        self._synced = True
        if self._sync_waiter is not None:
            self._sync_waiter.set_result(None)
            self._sync_waiter = None

    async def _apply(self, kind: str, obj: dict[str, Any], shared: bool = False) -> None:
        rv = _rv(obj)
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        # The server's own objects are not transformed: they may not be changed, and they are kept
        # once already (the transforms here share equal parts, as the server's cache does).
        if self.transform is not None and not shared:
            obj = self.transform(obj)
        key = object_key(obj)
        old = self.cache.get(key)
        if kind == "DELETED":
            self.cache.pop(key, None)
        else:
            self.cache[key] = obj
        if rv:
            self.resource_version = rv
        if kind == "ADDED" and old is not None:
            kind = "MODIFIED"
        await self._notify(kind, obj, old)

    async def _notify(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        for handler in self._handlers:
            try:
                result = handler(kind, obj, old)
                if result is not None and inspect.isawaitable(result):  # most handlers are plain functions
                    await result
            except Exception:  # a faulty handler must not stop the informer
                log.exception("informer %s handler failed", self.resource.plural)


def _rv(obj: dict[str, Any]) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion")
