"""One writer per gRPC stream: many tunnelled connections share it, and it tells them when to hold off.

A gRPC write completes only after several turns of the event loop, and a stream takes one write at a
time, so on a busy loop a stream carries only a few packets per second. Bytes a connection sends while
its previous DATA packet still waits in the queue therefore join that packet instead of queueing
behind it: fewer, fuller packets, and a TLS handshake or an HTTP exchange is not starved by the
packet count of its neighbours.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable

from tenantgpu.konnectivity import wire
from tenantgpu.konnectivity._proto import client_pb2 as pb
from tenantgpu.konnectivity.wire import Packet

# A gRPC stream allows one writer at a time, so every connection's packets queue here. Above the
# high mark, writers are asked to pause (asyncio flow control); below the low mark they resume.
HIGH_WATER_BYTES = 4 * 1024 * 1024
LOW_WATER_BYTES = 1024 * 1024


class PacketSender:
    """Serialises packets onto one stream in the order they were sent, with byte-based flow control."""

    def __init__(self, write: Callable[[Packet], Awaitable[None]]) -> None:
        self._write = write
        self._queue: deque[_Entry] = deque()
        # The queued, not yet written DATA packet of each connection that later bytes may join.
        self._open_data: dict[int, _Entry] = {}
        self._ready = asyncio.Event()
        self._queued_bytes = 0
        self._writable = asyncio.Event()
        self._writable.set()
        self._on_writable: list[Callable[[], None]] = []
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    @property
    def queued_bytes(self) -> int:
        return self._queued_bytes

    @property
    def over_high_water(self) -> bool:
        return self._queued_bytes > HIGH_WATER_BYTES

    def send(self, packet: Packet, size: int = 0) -> None:
        """Queue `packet`; `size` is the payload size that counts toward flow control."""
        if self._closed:
            return
        kind = packet.type
        if kind == pb.DATA:
            self._open_data.pop(packet.data.connectID, None)
        elif kind == pb.CLOSE_REQ:
            self._open_data.pop(packet.closeRequest.connectID, None)
        elif kind == pb.CLOSE_RSP:
            self._open_data.pop(packet.closeResponse.connectID, None)
        self._enqueue(_Entry(packet, size))

    def send_data(self, connect_id: int, payload: bytes) -> None:
        """Queue bytes of one connection, joining its DATA packet still waiting in the queue if any.

        Nothing of that connection was queued after that packet (a close ends the joining), so the
        connection's bytes and its close keep their order; other connections' packets are independent.
        """
        if self._closed or not payload:
            return
        entry = self._open_data.get(connect_id)
        if entry is not None and entry.size + len(payload) <= wire.DATA_CHUNK_BYTES:
            entry.packet.data.data += payload
            entry.size += len(payload)
            self._queued_bytes += len(payload)
            if self._queued_bytes > HIGH_WATER_BYTES:
                self._writable.clear()
            return
        entry = _Entry(wire.data(connect_id, payload), len(payload))
        self._open_data[connect_id] = entry
        self._enqueue(entry)

    def _enqueue(self, entry: _Entry) -> None:
        self._queue.append(entry)
        self._queued_bytes += entry.size
        if self._queued_bytes > HIGH_WATER_BYTES:
            self._writable.clear()
        self._ready.set()

    def call_when_writable(self, callback: Callable[[], None]) -> None:
        """Run `callback` once, when the queue has drained below the low mark."""
        self._on_writable.append(callback)

    async def wait_writable(self) -> None:
        await self._writable.wait()

    async def close(self) -> None:
        """Stop writing; packets still queued are dropped (the stream is going away)."""
        self._closed = True
        self._queue.clear()
        self._open_data.clear()
        self._release_writers()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def flush(self, timeout: float) -> None:
        """Wait until everything queued so far has been written, or `timeout` passes."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self._queue and not self._closed and self.failure is None:
            if asyncio.get_running_loop().time() > deadline:
                return
            await asyncio.sleep(0.005)

    async def _run(self) -> None:
        try:
            while True:
                if not self._queue:
                    self._ready.clear()
                    await self._ready.wait()
                    continue
                entry = self._queue.popleft()
                if entry.packet.type == pb.DATA:
                    connect_id = entry.packet.data.connectID
                    if self._open_data.get(connect_id) is entry:
                        del self._open_data[connect_id]  # being written: later bytes go in a new packet
                await self._write(entry.packet)
                self._queued_bytes -= entry.size
                if self._queued_bytes < LOW_WATER_BYTES and not self._writable.is_set():
                    self._release_writers()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the stream broke; the reader side sees it too and cleans up
            self.failure = exc
            self._closed = True
            self._release_writers()

    def _release_writers(self) -> None:
        self._writable.set()
        callbacks, self._on_writable = self._on_writable, []
        for callback in callbacks:
            callback()


class _Entry:
    """A queued packet and the payload bytes it counts toward flow control."""

    __slots__ = ("packet", "size")

    def __init__(self, packet: Packet, size: int) -> None:
        self.packet = packet
        self.size = size
