"""How a server process keeps CPython's cyclic garbage collector from pausing requests.

An API server's heap is mostly long-lived and acyclic: modules, kind tables, and the watch cache's
decoded objects, which reference counting frees. A full collection walks all of it, so its pause grows
with the cache (about 8 tracked objects per pod: tens of milliseconds at tens of thousands of pods),
and every request in flight waits that long. `CollectorPolicy` moves what has survived a full collection
into the permanent generation (`gc.freeze()`), so the next full collection only walks what is newer;
an object frozen that later becomes unreachable in a cycle can only be collected after `gc.unfreeze()`,
so every `thaw_interval` seconds the heap is thawed and the next full collection sees it all again.
"""

from __future__ import annotations

import asyncio
import gc


class CollectorPolicy:
    """Freezes the survivors of each full collection; thaws the heap now and then to reclaim cycles."""

    def __init__(self, *, check_interval: float = 1.0, thaw_interval: float = 600.0) -> None:
        self._check_interval = check_interval
        self._thaw_every = max(1, round(thaw_interval / check_interval))
        self._timer: asyncio.TimerHandle | None = None
        self._full_collections = 0
        self._ticks = 0

    def start(self) -> None:
        """After start-up: collect once, freeze what is left (it lives as long as the process)."""
        gc.collect()
        gc.freeze()
        self._full_collections = _full_collections()
        self._schedule()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        gc.unfreeze()

    def _schedule(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._check_interval, self._tick)

    def _tick(self) -> None:
        self._ticks += 1
        if self._ticks % self._thaw_every == 0:
            gc.unfreeze()
        else:
            done = _full_collections()
            if done != self._full_collections:
                # Survivors of the last full collection are live; young objects are first sorted by a
                # cheap collection of the younger generations, so little garbage gets frozen.
                gc.collect(1)
                gc.freeze()
        self._full_collections = _full_collections()
        self._schedule()


def _full_collections() -> int:
    return int(gc.get_stats()[2]["collections"])
