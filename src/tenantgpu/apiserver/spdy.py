"""`pods/exec` for clients that speak SPDY/3.1: kubectl 1.29 and older, and newer kubectl's fallback.

After `101 Switching Protocols` (`Upgrade: SPDY/3.1`, `X-Stream-Protocol-Version` chosen from what the
client offers), the client opens one SPDY stream per channel with SYN_STREAM, each answered with
SYN_REPLY, in a fixed order: error, stdin (if asked), stdout (if asked), stderr (if asked and no
terminal), resize (with a terminal, from v3 on). The streams are told apart by that order, so the
client's header blocks need not be read (`spdyframes` has the framing).

The command has already run (see `podexec`): its stdout and stderr go out on their streams, then the
error stream carries the end (a `Status` from v4 on), and each stream is closed with FIN. Frames the
client sends (stdin, resize, SETTINGS, WINDOW_UPDATE) are read and dropped; a PING is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from aiohttp import web

from tenantgpu.apiserver import errors, podexec
from tenantgpu.apiserver.httputil import header_list
from tenantgpu.spdyframes import GOAWAY, PING, SYN_STREAM, FrameReader, FrameWriter

__all__ = ["SPDY", "StreamSession", "choose_protocol", "stream_result", "stream_roles", "wants_spdy"]

SPDY = "SPDY/3.1"
# Over SPDY the channel protocols end at v4 (v5 adds a WebSocket close signal).
PROTOCOLS = ("v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io")
STREAMS_TIMEOUT = 30.0  # client-go waits as long for each SYN_REPLY
CLOSE_TIMEOUT = 10.0


def wants_spdy(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == SPDY.lower()


def choose_protocol(offered: Sequence[str]) -> str:
    """The newest channel protocol both sides speak; 400 when there is none."""
    for protocol in PROTOCOLS:
        if protocol in offered:
            return protocol
    raise errors.bad_request(
        f"unable to upgrade: none of the stream protocols {list(offered)} is supported (supported: {list(PROTOCOLS)})"
    )


def stream_roles(options: podexec.ExecOptions, protocol: str) -> list[str]:
    """The channels in the order client-go opens their streams."""
    roles = ["error"]
    if options.stdin:
        roles.append("stdin")
    if options.stdout:
        roles.append("stdout")
    if options.stderr and not options.tty:
        roles.append("stderr")
    if options.tty and protocol != "v2.channel.k8s.io" and protocol != "channel.k8s.io":
        roles.append("resize")
    return roles


class StreamSession:
    """One upgraded SPDY connection of exec or attach: its protocol, its streams by role, and the frames
    still to read."""

    def __init__(self, request: web.Request, options: podexec.ExecOptions) -> None:
        self.request = request
        self.options = options
        self.protocol = choose_protocol(header_list(request, "X-Stream-Protocol-Version"))
        self.response = web.StreamResponse(
            status=101,
            headers={"Connection": "Upgrade", "Upgrade": SPDY, "X-Stream-Protocol-Version": self.protocol},
        )
        self.reader = FrameReader()
        self.streams: dict[str, int] = {}
        self.writer: FrameWriter | None = None

    async def open(self) -> bool:
        """Switch protocols and answer the client's streams; False when it went away or never opened
        them all."""
        await self.response.prepare(self.request)
        transport = self.request.transport
        assert transport is not None
        # The bytes after the upgrade are SPDY frames, not HTTP: they go to the frame reader from here on.
        self.request.protocol.set_parser(self.reader)  # type: ignore[arg-type]
        self.request.protocol.keep_alive(False)
        self.writer = writer = FrameWriter(transport)
        roles = stream_roles(self.options, self.protocol)
        try:
            async with asyncio.timeout(STREAMS_TIMEOUT):
                while len(self.streams) < len(roles):
                    frame = await self.reader.frames.get()
                    if frame is None:
                        return False  # the client went away before asking for its streams
                    if frame.control and frame.kind == SYN_STREAM:
                        self.streams[roles[len(self.streams)]] = frame.stream_id
                        writer.syn_reply(frame.stream_id)
                    elif frame.control and frame.kind == PING:
                        writer.control(PING, 0, frame.payload)
        except TimeoutError:
            return False  # a client that never opened its streams
        return True

    def send(self, role: str, data: bytes, *, fin: bool) -> None:
        if role in self.streams and self.writer is not None:
            self.writer.data(self.streams[role], data, fin=fin)

    async def until_client_leaves(self, timeout: float | None) -> None:
        """Read the client's frames (answering its pings) until it closes, says GOAWAY, or `timeout`."""
        assert self.writer is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while (frame := await self.reader.frames.get()) is not None:
                    if frame.control and frame.kind == PING:
                        self.writer.control(PING, 0, frame.payload)
                    elif frame.control and frame.kind == SYN_STREAM:
                        # a stream this side did not expect: answered and ended, so the client need not wait
                        self.writer.syn_reply(frame.stream_id)
                        self.writer.data(frame.stream_id, b"", fin=True)
                    elif frame.control and frame.kind == GOAWAY:
                        break

    def close(self) -> None:
        if self.request.transport is not None:
            self.request.transport.close()


async def stream_result(
    request: web.Request, options: podexec.ExecOptions, result: podexec.CommandResult
) -> web.StreamResponse:
    """Upgrade to SPDY/3.1, answer the client's streams, send the command's output and end, and close."""
    session = StreamSession(request, options)
    try:
        if await session.open():
            outputs = podexec.output_texts(options, result)
            for role in ("stdout", "stderr"):
                session.send(role, outputs.get(role, "").encode(), fin=True)
            status = podexec.error_status(session.protocol, options.command, result)
            session.send("error", status or b"", fin=True)
            # The client closes the connection once it has read the streams' ends.
            await session.until_client_leaves(CLOSE_TIMEOUT)
    finally:
        session.close()
    return session.response
