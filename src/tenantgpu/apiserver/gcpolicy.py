"""How a server process keeps CPython's cyclic garbage collector from pausing requests.

An API server's heap is mostly long-lived and acyclic: modules, kind tables, and the watch cache's
decoded objects, which reference counting frees. A full collection walks all of it, so its pause grows
with the cache (about 8 tracked objects per pod: tens of milliseconds at tens of thousands of pods),
and every request in flight waits that long. `CollectorPolicy` moves what has survived a cheap
collection of the youngest generation into the permanent generation (`gc.freeze()`) every
`check_interval` seconds, so a full collection only ever walks what the last second added (measured
with the API server under 3,000 creates/s: full-collection pauses of 9–17 ms of CPU every 2–3 s when
only the survivors of full collections were frozen, none above 2 ms with this). An object frozen that
later becomes unreachable in a cycle can only be collected after `gc.unfreeze()`, so every
`thaw_interval` seconds the heap is thawed and collected in full, and what survives is frozen again:
one pause every ten minutes, about 0.1 s per quarter of a million objects on this host (a lab process
after a 2,000-pod burst holds some 400,000). Before, the thawed heap waited for a full collection that
CPython's thresholds seldom start (thawed objects count as old, not as pending), and the next tick froze
its dead cycles again: a closed connection's or a failed task's cycle was never reclaimed.

The tick collects the youngest generation alone, not the middle one as well: what has already survived
a young collection is almost never garbage. During `bench/lab`'s burst a tick's collection of both
found nothing to free in either process, and took 10–22 ms of CPU each second (about 2 % of the
workers' process); the youngest alone takes 1–3 ms. A cycle that dies after surviving a young
collection waits for the next thaw.

The youngest generation is collected after 10,000 net allocations instead of CPython's 700: a server
allocates and frees thousands of short-lived dicts per request, and a young collection that comes later
finds most of them already freed by reference counting. Measured with `gc.callbacks` during
`bench/lab`: the lab process spent 1.6 s of its 29 s of CPU in collections with the default, 0.73-0.85 s
with this (the worker process 0.83 s of 17.6 s, then 0.44 s).
"""

from __future__ import annotations

import asyncio
import gc


class CollectorPolicy:
    """Freezes what survives young collections each tick; thaws the heap now and then to reclaim cycles."""

    def __init__(
        self, *, check_interval: float = 1.0, thaw_interval: float = 600.0, young_threshold: int = 10_000
    ) -> None:
        self._young_threshold = young_threshold
        self._thresholds: tuple[int, int, int] | None = None
        self._check_interval = check_interval
        self._thaw_every = max(1, round(thaw_interval / check_interval))
        self._timer: asyncio.TimerHandle | None = None
        self._ticks = 0

    def start(self) -> None:
        """After start-up: collect once, freeze what is left (it lives as long as the process)."""
        self._thresholds = gc.get_threshold()
        gc.set_threshold(self._young_threshold, *self._thresholds[1:])
        gc.collect()
        gc.freeze()
        self._schedule()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        gc.unfreeze()
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None

    def _schedule(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._check_interval, self._tick)

    def _tick(self) -> None:
        self._ticks += 1
        if self._ticks % self._thaw_every == 0:
            # A full collection now: left to itself CPython would not run one soon (the objects thawed
            # count as old, not as pending), and the next tick would freeze the dead cycles again.
            gc.unfreeze()
            gc.collect()
        else:
            # Young garbage is reclaimed by the cheap collection first, so little of it gets frozen.
            gc.collect(0)
        gc.freeze()
        self._schedule()
