"""One writer per gRPC stream: many tunnelled connections share it, and it tells them when to hold off."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable

from tenantgpu.konnectivity.wire import Packet

# A gRPC stream allows one writer at a time, so every connection's packets queue here. Above the
# high mark, writers are asked to pause (asyncio flow control); below the low mark they resume.
HIGH_WATER_BYTES = 4 * 1024 * 1024
LOW_WATER_BYTES = 1024 * 1024


class PacketSender:
    """Serialises packets onto one stream in the order they were sent, with byte-based flow control."""

    def __init__(self, write: Callable[[Packet], Awaitable[None]]) -> None:
        self._write = write
        self._queue: deque[tuple[Packet, int]] = deque()
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
        self._queue.append((packet, size))
        self._queued_bytes += size
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
                packet, size = self._queue.popleft()
                await self._write(packet)
                self._queued_bytes -= size
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
