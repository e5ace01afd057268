"""The konnectivity-client side: an egress that reaches a proxy server's `ProxyService` (e.g. over UDS)."""

from __future__ import annotations

import asyncio
import contextlib
import random as _random

import grpc
from grpc import aio

from tenantgpu.konnectivity import wire
from tenantgpu.konnectivity._proto import client_pb2 as pb
from tenantgpu.konnectivity._proto import client_pb2_grpc
from tenantgpu.konnectivity.backends import DialError, NoAgentAvailable
from tenantgpu.konnectivity.egress import Dialler
from tenantgpu.konnectivity.sender import PacketSender
from tenantgpu.konnectivity.transport import TunnelTransport


class GrpcEgress(Dialler):
    """An API server's egress through a proxy server in another process, as kube-apiserver's
    EgressSelectorConfiguration `proxyProtocol: GRPC` does: one `Proxy` stream per connection.

    `target` is a gRPC target: `unix:/run/konnectivity/konnectivity-server.socket` (Kamaji's choice)
    or `host:port` with `credentials`. Same faces as `Egress`: open_connection, create_connection,
    connector().
    """

    def __init__(
        self,
        target: str,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        dial_timeout: float = 10.0,
        rng: _random.Random | None = None,
    ) -> None:
        self.target = target
        self._credentials = credentials
        self.dial_timeout = dial_timeout
        self._rng = rng or _random.Random()
        self._channel: aio.Channel | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def _stub(self) -> client_pb2_grpc.ProxyServiceStub:
        if self._channel is None:
            if self._credentials is None:
                self._channel = aio.insecure_channel(self.target, options=wire.GRPC_OPTIONS)
            else:
                self._channel = aio.secure_channel(self.target, self._credentials, options=wire.GRPC_OPTIONS)
        return client_pb2_grpc.ProxyServiceStub(self._channel)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._channel is not None:
            await self._channel.close(grace=None)
            self._channel = None

    async def dial(self, host: str, port: int) -> TunnelTransport:
        call = self._stub().Proxy()
        random_id = self._rng.getrandbits(62) + 1
        try:
            async with asyncio.timeout(self.dial_timeout):
                await call.write(wire.dial_request(wire.join_address(host, port), random_id))
                answer = await call.read()
        except TimeoutError:
            with contextlib.suppress(Exception):
                await call.write(wire.close_dial(random_id))
            call.cancel()
            raise DialError(f"dial {host}:{port} through {self.target} timed out") from None
        except aio.AioRpcError as exc:
            raise DialError(f"proxy server {self.target}: {exc.code().name}: {exc.details()}") from None
        if answer is aio.EOF or answer.type != pb.DIAL_RSP:
            call.cancel()
            raise DialError(f"proxy server {self.target} closed the stream before DIAL_RSP")
        response = answer.dialResponse
        if response.error:
            call.cancel()
            if response.error.startswith(wire.NO_AGENT_AVAILABLE):
                raise NoAgentAvailable(f"{host}:{port}")
            raise DialError(response.error)
        sender = PacketSender(call.write)
        sender.start()
        finished = asyncio.Event()
        connection = TunnelTransport(
            sender, response.connectID, (host, port), agent_id="", on_forget=lambda _id: finished.set()
        )
        task = asyncio.get_running_loop().create_task(self._receive(call, sender, connection, finished))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return connection

    async def _receive(
        self,
        call: aio.StreamStreamCall,
        sender: PacketSender,
        connection: TunnelTransport,
        finished: asyncio.Event,
    ) -> None:
        try:
            while not finished.is_set():
                packet = await call.read()
                if packet is aio.EOF:
                    connection.stream_lost(ConnectionResetError("proxy server closed the stream"))
                    return
                if packet.type == pb.DATA:
                    connection.data_received(packet.data.data)
                elif packet.type == pb.CLOSE_RSP:
                    connection.remote_closed()
                    return
        except aio.AioRpcError as exc:
            connection.stream_lost(ConnectionResetError(f"proxy stream: {exc.code().name}"))
        finally:
            await sender.flush(timeout=1.0)
            await sender.close()
            with contextlib.suppress(Exception):
                await call.done_writing()
            call.cancel()
