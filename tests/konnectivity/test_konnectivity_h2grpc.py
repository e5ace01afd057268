"""The agent port's gRPC server (HTTP/2 on asyncio) as grpcio's own clients see it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import pytest
from grpc import aio

from tenantgpu.konnectivity import wire
from tenantgpu.konnectivity._proto import agent_pb2_grpc
from tenantgpu.konnectivity._proto import client_pb2 as pb
from tenantgpu.konnectivity.h2grpc import H2GrpcServer, StreamContext, StreamMethod, grpc_message

CONNECT = "/AgentService/Connect"


async def _echo(context: StreamContext) -> None:
    """Sends back every DATA packet; a CLOSE_REQ aborts the call, with its connectID in the details."""
    await context.send_initial_metadata([("serverid", "echo")])
    while True:
        packet = await context.read()
        if packet is aio.EOF:
            return
        if packet.type == pb.CLOSE_REQ:
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, f"no entry: {packet.closeRequest.connectID} ü"
            )
        await context.write(packet)


async def _refuse_before_answering(context: StreamContext) -> None:
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, "agent token is not one of ours")


@contextlib.asynccontextmanager
async def _serving(handler: Callable[[StreamContext], Awaitable[None]]) -> AsyncIterator[aio.Channel]:
    """A server whose Connect is `handler`, and a grpcio channel to it."""
    server = H2GrpcServer(
        {CONNECT: StreamMethod(handler, pb.Packet.FromString)}, max_message_bytes=wire.MAX_MESSAGE_BYTES
    )
    port = await server.start("127.0.0.1", 0, None)
    try:
        async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel
    finally:
        await server.stop(None)


@pytest.fixture
async def server() -> AsyncIterator[H2GrpcServer]:
    server = H2GrpcServer(
        {CONNECT: StreamMethod(_echo, pb.Packet.FromString)}, max_message_bytes=wire.MAX_MESSAGE_BYTES
    )
    await server.start("127.0.0.1", 0, None)
    yield server
    await server.stop(None)


async def test_messages_larger_than_a_frame_and_a_window_go_both_ways_intact(server: H2GrpcServer) -> None:
    async with aio.insecure_channel(f"127.0.0.1:{server.port}", options=wire.GRPC_OPTIONS) as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        assert dict(await call.initial_metadata())["serverid"] == "echo"
        # 16 KiB frames and a 64 KiB initial window: a 1 MiB packet needs both flow control and chunking
        for size in (0, 10, 70_000, 1024 * 1024):
            payload = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
            await call.write(wire.data(7, payload))
            echoed = await call.read()
            assert echoed.type == pb.DATA and echoed.data.connectID == 7 and echoed.data.data == payload
        await call.done_writing()
        assert await call.read() is aio.EOF
        assert await call.code() == grpc.StatusCode.OK


async def test_an_abort_after_the_headers_reaches_the_client_as_status_and_details(
    server: H2GrpcServer,
) -> None:
    async with aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        await call.write(wire.close_request(42))
        with pytest.raises(aio.AioRpcError) as refused:
            await call.read()
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert refused.value.details() == "no entry: 42 ü"


async def test_a_refusal_before_any_answer_is_a_trailers_only_response() -> None:
    async with _serving(_refuse_before_answering) as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        assert await call.code() == grpc.StatusCode.UNAUTHENTICATED
        assert await call.details() == "agent token is not one of ours"
        assert not dict(await call.initial_metadata())


async def test_an_unknown_method_is_unimplemented(server: H2GrpcServer) -> None:
    async with aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        other = channel.stream_stream("/ProxyService/Proxy")
        call = other()
        with pytest.raises(aio.AioRpcError) as refused:
            await call.read()
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_stopping_the_server_ends_the_clients_call(server: H2GrpcServer) -> None:
    async with aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        await call.initial_metadata()
        await server.stop(None)
        with pytest.raises(aio.AioRpcError) as ended:
            await call.read()
        assert ended.value.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)


def test_grpc_message_percent_encodes_what_http2_headers_cannot_carry() -> None:
    assert grpc_message("plain text: ok") == "plain text: ok"
    assert grpc_message("100% ü\n") == "100%25 %C3%BC%0A"


async def _read_until_it_fails(context: StreamContext) -> None:
    """As the proxy server's servicer does: a failed read ends its loop, not the call with an error."""
    await context.send_initial_metadata([])
    with contextlib.suppress(Exception):
        while await context.read() is not aio.EOF:
            pass


async def test_a_request_message_that_is_not_a_packet_fails_the_call_with_its_reason() -> None:
    async with _serving(_read_until_it_fails) as channel:
        call = channel.stream_stream(CONNECT)()  # no serializer: the bytes go out as they are
        await call.write(b"\xff\xff\xff")
        assert await call.code() == grpc.StatusCode.UNKNOWN
        assert "cannot parse request message" in (await call.details() or "")


async def test_stop_returns_after_the_servicers_have_cleaned_up() -> None:
    cleaned = asyncio.Event()

    async def holds_on(context: StreamContext) -> None:
        await context.send_initial_metadata([])
        try:
            await context.read()
        finally:
            await asyncio.sleep(0.01)  # clean-up that itself waits, as removing an agent session does
            cleaned.set()

    server = H2GrpcServer(
        {CONNECT: StreamMethod(holds_on, pb.Packet.FromString)}, max_message_bytes=wire.MAX_MESSAGE_BYTES
    )
    port = await server.start("127.0.0.1", 0, None)
    async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        await call.initial_metadata()
        await server.stop(None)
        assert cleaned.is_set()
