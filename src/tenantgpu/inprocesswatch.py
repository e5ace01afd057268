"""Watch events handed over inside one process, from an API server to the controllers beside it.

A tenant's controller duties run in its API server's process. Over their loopback connection every pod
and node event was encoded to JSON by the server and decoded again by the informer, once per event: at
2,000 pods that decoding was about a tenth of the lab process's CPU. Here the server hands over its own
stored object instead. The watch is still an HTTP request (authenticated, authorised, counted, ended
like any other); only its events travel beside the connection.

The objects are the server's: whoever receives them must never change them in place, as client-go's
informer caches must not be changed either. So only an informer whose readers promise that asks for it.

The handshake: the client opens an `InProcessWatch` under a secret key and sends the key in the
`IN_PROCESS_HEADER` of its watch request. A server of the same process claims it and accepts it before
it sends the response's headers; a server that does not (another process, a table, a 410 answer) writes
the events to the connection as usual, and the client reads them from there.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any

IN_PROCESS_HEADER = "X-Tenantgpu-In-Process-Watch"

# (event type, object), or None where the watch ends
Item = tuple[str, dict[str, Any]] | None


class InProcessWatch:
    """One watch's events on their way from the server's task to the client's, in order."""

    __slots__ = ("_items", "_on_close", "_waiter", "accepted", "closed", "limit")

    def __init__(self) -> None:
        self.accepted = False
        self.closed = False
        # A watcher that falls this far behind is ended, as the server ends a slow connection's watch.
        self.limit = 0
        self._items: list[Item] = []
        self._waiter: asyncio.Future[None] | None = None
        self._on_close: Callable[[], None] | None = None

    # the server's side

    def accept(self, on_close: Callable[[], None], limit: int) -> None:
        """The server will put this watch's events here, at most `limit` unread (its watcher's bound);
        `on_close` ends its watch when the client leaves."""
        self.accepted = True
        self.limit = limit
        self._on_close = on_close

    def put(self, kind: str, obj: dict[str, Any]) -> bool:
        """Hand over one event; False when the client has left or is too far behind (end the watch)."""
        if self.closed or len(self._items) >= self.limit:
            return False
        self._items.append((kind, obj))
        self._wake()
        return True

    def finish(self) -> None:
        """The watch has ended on the server's side."""
        self._items.append(None)
        self._wake()

    # the client's side

    async def next_batch(self) -> list[Item]:
        """Every event handed over so far, waiting for one; a None in it ends the watch."""
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        items, self._items = self._items, []
        return items

    def close(self) -> None:
        """The client stops reading: the server's watch ends at once."""
        if self.closed:
            return
        self.closed = True
        self._items = []
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class InProcessWatches:
    """Where a client's in-process watches wait for the server of their process to claim them."""

    def __init__(self) -> None:
        self._open: dict[str, InProcessWatch] = {}

    def open(self) -> tuple[str, InProcessWatch]:
        key = secrets.token_hex(16)
        watch = self._open[key] = InProcessWatch()
        return key, watch

    def claim(self, key: str) -> InProcessWatch | None:
        """The watch opened under `key`, once: a replayed request gets none."""
        return self._open.pop(key, None)

    def release(self, key: str) -> None:
        self._open.pop(key, None)

    def __len__(self) -> int:
        return len(self._open)
