"""`ProxyService.Proxy`: the frontend an API server in another process uses, one stream per connection."""

from __future__ import annotations

import asyncio
import logging

from grpc import aio

from tenantgpu.konnectivity import wire
from tenantgpu.konnectivity._proto import client_pb2 as pb
from tenantgpu.konnectivity._proto import client_pb2_grpc
from tenantgpu.konnectivity.backends import DialError
from tenantgpu.konnectivity.egress import Egress
from tenantgpu.konnectivity.metrics import ServerMetrics
from tenantgpu.konnectivity.sender import PacketSender
from tenantgpu.konnectivity.transport import TunnelTransport

log = logging.getLogger(__name__)


class _Relay(asyncio.Protocol):
    """Bytes from the agent's side of one connection, passed on to the frontend stream."""

    def __init__(self, sender: PacketSender, connect_id: int, finished: asyncio.Event) -> None:
        self._sender = sender
        self._connect_id = connect_id
        self._finished = finished
        self.may_write = asyncio.Event()
        self.may_write.set()

    def data_received(self, data: bytes) -> None:
        self._sender.send_data(self._connect_id, data)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._sender.send(wire.close_response(self._connect_id, str(exc) if exc else ""))
        self._finished.set()

    def pause_writing(self) -> None:
        self.may_write.clear()

    def resume_writing(self) -> None:
        self.may_write.set()


class _FrontendStream:
    """One `Proxy` call: at most one dial, then the connection it opened, until either side closes."""

    def __init__(self, egress: Egress, context: aio.ServicerContext, sender: PacketSender) -> None:
        self._egress = egress
        self._context = context
        self._sender = sender
        self._connection: TunnelTransport | None = None
        self._relay: _Relay | None = None
        self._dialling: asyncio.Task[None] | None = None
        self._finished = asyncio.Event()

    async def run(self) -> None:
        reading = asyncio.ensure_future(self._read_packets())
        finished = asyncio.ensure_future(self._finished.wait())
        try:
            # Ends when the frontend closes (EOF, CLOSE_REQ, DIAL_CLS) or the agent's side closes.
            await asyncio.wait({reading, finished}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reading, finished, self._dialling):
                if task is not None and not task.done():
                    task.cancel()
            if self._connection is not None:
                self._connection.close()
        await self._sender.flush(timeout=2.0)

    async def _read_packets(self) -> None:
        while True:
            packet = await self._context.read()
            if packet is aio.EOF:
                return
            assert isinstance(packet, pb.Packet)
            if packet.type == pb.DIAL_REQ and self._dialling is None:
                self._dialling = asyncio.ensure_future(self._dial(packet.dialRequest))
            elif packet.type == pb.DATA and self._connection is not None:
                if self._relay is not None and not self._relay.may_write.is_set():
                    await self._relay.may_write.wait()
                self._connection.write(packet.data.data)
            elif packet.type == pb.CLOSE_REQ:
                if self._connection is None:
                    self._sender.send(wire.close_response(packet.closeRequest.connectID, "unknown connectID"))
                    return
                self._connection.close()
                await self._finished.wait()  # CLOSE_RSP is queued by the relay
                return
            elif packet.type == pb.DIAL_CLS:
                if self._dialling is not None and not self._dialling.done():
                    self._dialling.cancel()
                return

    async def _dial(self, request: pb.DialRequest) -> None:
        try:
            host, port = wire.split_address(request.address)
            connection = await self._egress.dial(host, port)
        except (DialError, ValueError) as exc:
            self._sender.send(wire.dial_response(request.random, error=str(exc)))
            return
        self._relay = _Relay(self._sender, connection.connect_id, self._finished)
        self._connection = connection
        # DIAL_RSP goes out before any DATA the relay forwards, because both share the sender's order.
        self._sender.send(wire.dial_response(request.random, connect_id=connection.connect_id))
        connection.attach(self._relay)


class ProxyFrontend(client_pb2_grpc.ProxyServiceServicer):
    """Serves upstream's frontend protocol: DIAL_REQ in, DIAL_RSP out, then DATA both ways, CLOSE.

    As in upstream, a failed dial is answered with DIAL_RSP carrying the error (e.g. "No agent
    available") rather than a gRPC error, and DIAL_CLS cancels a dial still in flight.
    """

    def __init__(self, egress: Egress, metrics: ServerMetrics) -> None:
        self._egress = egress
        self._connections = metrics.grpc_connections.labels("Proxy")

    async def Proxy(self, request_iterator: object, context: aio.ServicerContext) -> None:
        self._connections.inc()
        sender = PacketSender(context.write)
        sender.start()
        try:
            await _FrontendStream(self._egress, context, sender).run()
        finally:
            self._connections.dec()
            await sender.close()
