"""An asyncio transport whose bytes travel as DATA packets over an agent's stream (one connectID)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tenantgpu.konnectivity import wire
from tenantgpu.konnectivity.sender import HIGH_WATER_BYTES, LOW_WATER_BYTES, PacketSender


class _Buffering(asyncio.Protocol):
    """Stand-in until the caller's protocol is attached; the agent may send data before that."""


class TunnelTransport(asyncio.Transport):
    """A connection the agent opened on the caller's behalf, seen as an ordinary asyncio transport.

    It is `start_tls` compatible, so TLS (a webhook's HTTPS) runs end to end through the tunnel and
    the proxy server only ever sees ciphertext.
    """

    _start_tls_compatible = True

    def __init__(
        self,
        sender: PacketSender,
        connect_id: int,
        peer: tuple[str, int],
        agent_id: str,
        on_forget: Callable[[int], None],
    ) -> None:
        super().__init__()
        self._sender = sender
        self.connect_id = connect_id
        self.agent_id = agent_id
        self._peer = peer
        self._on_forget = on_forget
        self._protocol: asyncio.BaseProtocol = _Buffering()
        self._loop = asyncio.get_running_loop()
        self._reading_paused = True  # until a real protocol is attached
        self._pending: list[bytes] = []
        self._remote_closed = False
        self._closing = False
        self._lost = False
        self._writing_paused = False

    # --- asyncio.BaseTransport ---------------------------------------------------------------
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        extras = {"peername": self._peer, "agent_id": self.agent_id, "connect_id": self.connect_id}
        return extras.get(name, default)

    def is_closing(self) -> bool:
        return self._closing or self._lost

    def close(self) -> None:
        if self._closing or self._lost:
            return
        self._closing = True
        if not self._remote_closed:
            # Queued after every DATA already written, so the agent flushes them before closing.
            self._sender.send(wire.close_request(self.connect_id))
        self._loop.call_soon(self._lose, None)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._protocol = protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol

    # --- asyncio.ReadTransport ---------------------------------------------------------------
    def is_reading(self) -> bool:
        return not self._reading_paused and not self.is_closing()

    def pause_reading(self) -> None:
        self._reading_paused = True

    def resume_reading(self) -> None:
        if not self._reading_paused:
            return
        self._reading_paused = False
        pending, self._pending = self._pending, []
        for chunk in pending:
            if self._reading_paused or self._lost:
                self._pending.append(chunk)
                continue
            self._deliver(chunk)
        if self._remote_closed and not self._pending and not self._lost:
            self._finish_remote_close()

    # --- asyncio.WriteTransport --------------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or self._lost or self._remote_closed or not data:
            return
        if len(data) <= wire.DATA_CHUNK_BYTES:
            self._sender.send_data(self.connect_id, data if isinstance(data, bytes) else bytes(data))
        else:
            view = memoryview(data)
            for start in range(0, len(view), wire.DATA_CHUNK_BYTES):
                self._sender.send_data(self.connect_id, bytes(view[start : start + wire.DATA_CHUNK_BYTES]))
        if self._sender.over_high_water and not self._writing_paused:
            self._writing_paused = True
            self._protocol.pause_writing()
            self._sender.call_when_writable(self._resume_writing)

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def can_write_eof(self) -> bool:
        return False  # Konnectivity has no half-close

    def write_eof(self) -> None:
        raise NotImplementedError("the Konnectivity tunnel cannot half-close a connection")

    def abort(self) -> None:
        self.close()

    def _force_close(self, error: Exception | None) -> None:
        # asyncio's SSL protocol calls this private hook on a fatal error (e.g. a bad certificate).
        if self._lost:
            return
        if not self._closing and not self._remote_closed:
            self._closing = True
            self._sender.send(wire.close_request(self.connect_id))
        self._loop.call_soon(self._lose, error)

    def get_write_buffer_size(self) -> int:
        return self._sender.queued_bytes

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return LOW_WATER_BYTES, HIGH_WATER_BYTES

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        """Limits are per stream (shared by all its connections), so a per-connection limit is ignored."""

    # --- fed by the stream's reader ----------------------------------------------------------
    def attach(self, protocol: asyncio.BaseProtocol) -> None:
        """Hand the connection to its real protocol and deliver whatever arrived meanwhile."""
        self._protocol = protocol
        self.resume_reading()

    def data_received(self, chunk: bytes) -> None:
        if self._lost or self._closing:
            return
        if self._reading_paused or self._pending:
            self._pending.append(chunk)
        else:
            self._deliver(chunk)

    def remote_closed(self) -> None:
        """The agent closed its end (CLOSE_RSP unasked, or CLOSE_REQ): end of stream for the reader."""
        self._remote_closed = True
        if self._closing or self._lost:
            self._on_forget(self.connect_id)
            return
        if not self._pending and not self._reading_paused:
            self._finish_remote_close()

    def stream_lost(self, error: Exception) -> None:
        """The agent's stream is gone; nothing more will arrive or leave."""
        self._remote_closed = True
        self._lose(error)

    def _deliver(self, chunk: bytes) -> None:
        try:
            self._feed(chunk)
        except Exception as exc:
            # One connection's protocol failing must not take down the agent's shared stream.
            self._force_close(exc)

    def _feed(self, chunk: bytes) -> None:
        protocol = self._protocol
        if not isinstance(protocol, asyncio.BufferedProtocol):
            protocol.data_received(chunk)  # type: ignore[attr-defined]
            return
        # asyncio's own SSL protocol is a BufferedProtocol: fill the buffers it hands out.
        view = memoryview(chunk)
        while view:
            buffer = memoryview(protocol.get_buffer(len(view)))
            size = min(len(buffer), len(view))
            if size == 0:
                raise RuntimeError("protocol offered an empty buffer")
            buffer[:size] = view[:size]
            protocol.buffer_updated(size)
            view = view[size:]

    def _finish_remote_close(self) -> None:
        if isinstance(self._protocol, asyncio.Protocol):
            # Whatever eof_received answers, there is no half-close: the connection is over.
            self._protocol.eof_received()
        self._lose(None)

    def _lose(self, error: Exception | None) -> None:
        if self._lost:
            return
        self._lost = True
        self._pending.clear()
        if self._remote_closed:
            self._on_forget(self.connect_id)
        self._protocol.connection_lost(error)

    def _resume_writing(self) -> None:
        if self._writing_paused and not self._lost:
            self._writing_paused = False
            self._protocol.resume_writing()
