"""The buffer a server's or a client pool's connections read into, one per owner.

A connection is an `asyncio.BufferedProtocol`: the event loop reads each arrival straight into this
buffer and hands it over at once, so the connections of one owner can share it. uvloop's TLS transport
gives a plain `asyncio.Protocol` a new 256 KiB `bytes` for every read, which glibc serves by a fresh
mapping once its mmap threshold is pinned (`lab.supervisor.tune_for_many_tenants`). The buffer is an
anonymous mapping, so only the pages a read has filled take memory.
"""

from __future__ import annotations

import mmap

READ_BUFFER_BYTES = 64 * 1024


class ReadBuffer:
    """`view` is what `get_buffer` returns; `received(n)` is the part the last read filled."""

    __slots__ = ("_map", "view")

    def __init__(self, size: int = READ_BUFFER_BYTES) -> None:
        self._map = mmap.mmap(-1, size)
        self.view = memoryview(self._map)

    def received(self, nbytes: int) -> memoryview:
        return self.view[:nbytes]
