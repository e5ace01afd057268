"""`pods/attach`: `kubectl attach` sees what the container's process writes from now on.

A real kubelet attaches the client to the running process's stdout and stderr; what the process wrote
before is only in its log. A simulated container's process writes what its log shows (the component it
stands for logs its klog lines, a container whose command ran shows that command's output), so attach
follows the container's log from its end, through the tunnel to the kubelet, until the container ends
or the client leaves. Then the error channel says `Success` (v4 and later) and the streams close, as
when an attached process exits. The simulated processes read no input: what a client sends on stdin or
as a terminal size is read and dropped. The same options as exec (`PodAttachOptions`, without a
command) and the same protocols: WebSocket channels (kubectl 1.30+, the Python client) or SPDY/3.1.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import orjson
from aiohttp import web

from tenantgpu.apiserver import podexec, spdy

Output = AsyncIterator[bytes]
SUCCESS = orjson.dumps({"metadata": {}, "status": "Success"})
_STATUS_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")


def shown(options: podexec.ExecOptions, chunk: bytes) -> bytes:
    """A terminal's line discipline turns \\n into \\r\\n (kubectl has the local terminal in raw mode)."""
    return chunk.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n") if options.tty else chunk


def output_role(options: podexec.ExecOptions) -> str | None:
    """Where the container's output goes: stdout, or stderr when only that was asked (none: neither)."""
    if options.stdout or options.tty:
        return "stdout" if options.stdout else None
    return "stderr" if options.stderr else None


async def stream_websocket(
    request: web.Request, options: podexec.ExecOptions, output: Output
) -> web.StreamResponse:
    ws, protocol = await podexec.accept_websocket(request, "attach")
    role = output_role(options)
    channel = {"stdout": podexec.STDOUT, "stderr": podexec.STDERR}.get(role or "")

    async def pump() -> None:
        async for chunk in output:
            if chunk and channel is not None:
                await ws.send_bytes(bytes([channel]) + shown(options, chunk))

    async def drain() -> None:
        async for _ in ws:
            pass  # stdin and terminal sizes: nothing reads them

    pumping, draining = asyncio.ensure_future(pump()), asyncio.ensure_future(drain())
    try:
        done, _ = await asyncio.wait({pumping, draining}, return_when=asyncio.FIRST_COMPLETED)
        client_left = draining in done
        await podexec.stop_tasks(pumping, draining)
        if not client_left and protocol in _STATUS_PROTOCOLS:  # the container ended: its process's end
            await ws.send_bytes(bytes([podexec.ERROR]) + SUCCESS)
    finally:
        await podexec.stop_tasks(pumping, draining)
        with contextlib.suppress(Exception):
            await ws.close()  # waits for the client's close, dropping what it still sends
    return ws


async def stream_spdy(
    request: web.Request, options: podexec.ExecOptions, output: Output
) -> web.StreamResponse:
    session = spdy.StreamSession(request, options)
    role = output_role(options)
    try:
        if not await session.open():
            return session.response

        async def pump() -> None:
            async for chunk in output:
                if chunk and role is not None:
                    session.send(role, shown(options, chunk), fin=False)

        pumping = asyncio.ensure_future(pump())
        leaving = asyncio.ensure_future(session.until_client_leaves(None))
        try:
            done, _ = await asyncio.wait({pumping, leaving}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await podexec.stop_tasks(pumping, leaving)
        if leaving not in done:  # the container ended: close the streams as an exiting process does
            for each in ("stdout", "stderr"):
                session.send(each, b"", fin=True)
            session.send("error", SUCCESS if session.protocol in _STATUS_PROTOCOLS else b"", fin=True)
            await session.until_client_leaves(spdy.CLOSE_TIMEOUT)
    finally:
        session.close()
    return session.response
