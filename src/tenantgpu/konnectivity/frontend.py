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
from tenantgpu.konnectivity.sender import PacketSender
from tenantgpu.konnectivity.transport import TunnelTransport

log = logging.getLogger(__name__)


class _Relay(asyncio.Protocol):
    """Bytes from the agent's side of one connection, passed on to the frontend stream."""

    def __init__(self, sender: PacketSender, connect_id: int) -> None:
        self._sender = sender
        self._connect_id = connect_id
        self.finished = asyncio.Event()
        self.may_write = asyncio.Event()
        self.may_write.set()

    def data_received(self, data: bytes) -> None:
        self._sender.send(wire.data(self._connect_id, data), len(data))

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._sender.send(wire.close_response(self._connect_id, str(exc) if exc else ""))
        self.finished.set()

    def pause_writing(self) -> None:
        self.may_write.clear()

    def resume_writing(self) -> None:
        self.may_write.set()


class ProxyFrontend(client_pb2_grpc.ProxyServiceServicer):
    """Serves upstream's frontend protocol: DIAL_REQ in, DIAL_RSP out, then DATA both ways, CLOSE.

    As in upstream, a failed dial is answered with DIAL_RSP carrying the error (e.g. "No agent
    available") rather than a gRPC error, and DIAL_CLS cancels a dial still in flight.
    """

    def __init__(self, egress: Egress) -> None:
        self._egress = egress

    async def Proxy(self, request_iterator: object, context: aio.ServicerContext) -> None:
        sender = PacketSender(context.write)
        sender.start()
        dialling: asyncio.Task[None] | None = None
        state: dict[str, TunnelTransport | _Relay] = {}
        try:
            reading = asyncio.ensure_future(context.read())
            while True:
                relay = state.get("relay")
                waiters: set[asyncio.Future[object]] = {reading}
                if isinstance(relay, _Relay):
                    finished = asyncio.ensure_future(relay.finished.wait())
                    waiters.add(finished)
                done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                if reading not in done:
                    break  # the agent's side closed; CLOSE_RSP is queued for the frontend
                for waiter in waiters - {reading}:
                    waiter.cancel()
                packet = reading.result()
                if packet is aio.EOF:
                    break
                assert isinstance(packet, pb.Packet)
                if packet.type == pb.DIAL_REQ and dialling is None:
                    dialling = asyncio.ensure_future(self._dial(packet.dialRequest, sender, state))
                elif packet.type == pb.DATA:
                    connection = state.get("connection")
                    if isinstance(connection, TunnelTransport):
                        if isinstance(relay, _Relay):
                            await relay.may_write.wait()
                        connection.write(packet.data.data)
                elif packet.type == pb.CLOSE_REQ:
                    connection = state.get("connection")
                    if isinstance(connection, TunnelTransport):
                        connection.close()
                        if isinstance(relay, _Relay):
                            await relay.finished.wait()
                    else:
                        sender.send(wire.close_response(packet.closeRequest.connectID, "unknown connectID"))
                    break
                elif packet.type == pb.DIAL_CLS and dialling is not None and not dialling.done():
                    dialling.cancel()
                    break
                reading = asyncio.ensure_future(context.read())
            if not reading.done():
                reading.cancel()
            if dialling is not None and not dialling.done():
                dialling.cancel()
            connection = state.get("connection")
            if isinstance(connection, TunnelTransport):
                connection.close()
            await sender.flush(timeout=2.0)
        finally:
            await sender.close()

    async def _dial(
        self, request: pb.DialRequest, sender: PacketSender, state: dict[str, TunnelTransport | _Relay]
    ) -> None:
        try:
            host, port = wire.split_address(request.address)
            connection = await self._egress.dial(host, port)
        except (DialError, ValueError) as exc:
            sender.send(wire.dial_response(request.random, error=str(exc)))
            return
        relay = _Relay(sender, connection.connect_id)
        state["connection"] = connection
        state["relay"] = relay
        # DIAL_RSP goes out before any DATA the relay forwards, because both share the sender's order.
        sender.send(wire.dial_response(request.random, connect_id=connection.connect_id))
        connection.attach(relay)
