"""`pods/exec` for clients that speak Kubernetes' WebSocket channel protocol.

kubectl 1.30 and newer and the official Python client open exec as a WebSocket (`v5.channel.k8s.io`,
`v4.channel.k8s.io`, older `v3`/`v2`/`channel.k8s.io`). Every binary message starts with its channel:
0 stdin, 1 stdout, 2 stderr, 3 the error channel, 4 terminal resize. From v4 on, the error channel
carries a `Status`: `Success`, or `Failure` with reason `NonZeroExitCode` and the exit code as the cause
`ExitCode`, from which kubectl takes its own exit code. Before v4 it carries the error's text only.

The simulated container's programs finish at once and read no input, so the command is run on the
kubelet before the upgrade: a container that does not run is an ordinary HTTP error, which kubectl shows
as it would show the kubelet's. SPDY/3.1 (kubectl 1.29 and older) is in `spdy`.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from aiohttp import WSMsgType, web

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.httputil import query_flag

if TYPE_CHECKING:
    from multidict import MultiMapping  # what aiohttp's `Request.query` is

PROTOCOLS = (
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
)
STDOUT, STDERR, ERROR, RESIZE = 1, 2, 3, 4
# Every streaming subresource of a pod (as kube-apiserver lists them).
STREAMS = frozenset({"exec", "attach", "portforward"})
CLOSE_SIGNAL = 255  # v5: the client closed one of its channels (its stdin)
CLIENT_GRACE_SECONDS = 1.0
CLIENT_QUIET_SECONDS = 0.05  # after the client's size (or stdin's end): this long without a message
# About what a container runtime takes to start an exec'd process; see _until_client_settled.
STREAM_SETUP_SECONDS = 0.1
_STATUS_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")


class CommandResult(Protocol):
    stdout: str
    stderr: str
    exit_code: int


@dataclass(frozen=True)
class ExecOptions:
    """The `PodExecOptions` of a request, from its query string."""

    container: str
    command: list[str]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool

    @classmethod
    def parse(cls, query: MultiMapping[str], pod: dict[str, Any], *, attach: bool = False) -> ExecOptions:
        """The options, with the container chosen as kube-apiserver chooses it; 400 when they are wrong.
        `attach` reads `PodAttachOptions`: the same, without a command."""
        name = (pod.get("metadata") or {}).get("name", "")
        spec = pod.get("spec") or {}
        containers = [c.get("name", "") for c in spec.get("containers") or []]
        init = [c.get("name", "") for c in spec.get("initContainers") or []]
        container = query.get("container", "")
        if not container:
            if len(containers) != 1:
                message = f"a container name must be specified for pod {name}"
                if containers:
                    message += f", choose one of: [{' '.join(containers)}]"
                if init:
                    message += f" or one of the init containers: [{' '.join(init)}]"
                raise errors.bad_request(message)
            container = containers[0]
        elif not has_container(pod, container):
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        command = [] if attach else query.getall("command", [])
        if not command and not attach:
            raise errors.bad_request("you must specify at least 1 command")
        flags = {key: query_flag(query, key) for key in ("stdin", "stdout", "stderr", "tty")}
        if not (flags["stdin"] or flags["stdout"] or flags["stderr"]):
            raise errors.bad_request("you must specify at least 1 of stdin, stdout, stderr")
        if not spec.get("nodeName"):
            raise errors.bad_request(f"pod {name} does not have a host assigned")
        return cls(container, list(command), **flags)


def has_container(pod: dict[str, Any], name: str) -> bool:
    """Whether the pod has a container of this name, regular, init or ephemeral (`kubectl debug`):
    exec and logs may name any of them."""
    spec = pod.get("spec") or {}
    return any(
        c.get("name") == name
        for group in ("containers", "initContainers", "ephemeralContainers")
        for c in spec.get(group) or []
    )


def wants_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


def error_status(protocol: str, command: list[str], result: CommandResult) -> bytes | None:
    """The error channel's message for a finished command (None: nothing to send)."""
    if result.exit_code == 0:
        return orjson.dumps({"metadata": {}, "status": "Success"}) if protocol in _STATUS_PROTOCOLS else None
    message = (
        f"command terminated with non-zero exit code: error executing command "
        f"[{' '.join(command)}], exit code {result.exit_code}"
    )
    if protocol not in _STATUS_PROTOCOLS:
        return message.encode()
    return orjson.dumps(
        {
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(result.exit_code)}]},
        }
    )


def terminal_output(result: CommandResult) -> str:
    """What a terminal shows: stderr merged into stdout, and \n turned into \r\n by its line discipline
    (kubectl has put the local terminal in raw mode, so a bare \n would not return the cursor)."""
    return (result.stdout + result.stderr).replace("\r\n", "\n").replace("\n", "\r\n")


def output_texts(options: ExecOptions, result: CommandResult) -> dict[str, str]:
    """What goes out on the stdout and stderr channels the client asked for (a terminal has no stderr:
    it shows both on stdout); the same over WebSocket and SPDY."""
    if options.tty:
        return {"stdout": terminal_output(result)} if options.stdout else {}
    texts = {"stdout": result.stdout, "stderr": result.stderr}
    return {role: text for role, text in texts.items() if getattr(options, role)}


def output_frames(options: ExecOptions, result: CommandResult) -> list[bytes]:
    """The stdout and stderr messages with something to say, each prefixed with its channel."""
    channels = {"stdout": STDOUT, "stderr": STDERR}
    return [
        bytes([channels[role]]) + text.encode()
        for role, text in output_texts(options, result).items()
        if text
    ]


async def stop_tasks(*tasks: asyncio.Future[Any]) -> None:
    """Cancel a streaming session's tasks and wait until they have ended (their own ends run first)."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def accept_websocket(request: web.Request, what: str) -> tuple[web.WebSocketResponse, str]:
    """Switch to a WebSocket with the newest channel protocol the client offers; the socket and that
    protocol (`channel.k8s.io` when it offered none)."""
    ws = web.WebSocketResponse(protocols=PROTOCOLS, autoping=True)
    if not ws.can_prepare(request).ok:
        raise errors.bad_request(f"the {what} request is not a valid WebSocket upgrade")
    await ws.prepare(request)
    return ws, ws.ws_protocol or "channel.k8s.io"


async def stream_result(
    request: web.Request, options: ExecOptions, result: CommandResult
) -> web.StreamResponse:
    """Upgrade to a WebSocket, send the command's output and its end, and close."""
    ws, protocol = await accept_websocket(request, "exec")
    await _until_client_settled(ws, options, protocol)
    for frame in output_frames(options, result):
        await ws.send_bytes(frame)
    status = error_status(protocol, options.command, result)
    if status is not None:
        await ws.send_bytes(bytes([ERROR]) + status)
    await ws.close()  # waits for the client's close, discarding the stdin or resize it still sends
    return ws


async def _until_client_settled(ws: web.WebSocketResponse, options: ExecOptions, protocol: str) -> None:
    """Wait (a moment at most) for what the client still sends at the start and end of its input.

    A client with a terminal sends its size first (v3 on), and a v5 client says when its piped stdin has
    ended. Closing before those arrive makes kubectl report the write it could no longer make. Output
    waits for them too: kubectl up to 1.33 reads the connection before it has set up its streams and
    drops what arrives for a stream not there yet ("Unknown stream id 1"); a client that has sent
    its size or its stdin has set them up.
    """
    want_size = options.tty and protocol not in ("v2.channel.k8s.io", "channel.k8s.io")
    want_stdin_end = options.stdin and not options.tty and protocol == "v5.channel.k8s.io"
    if not (want_size or want_stdin_end):
        if protocol in _STATUS_PROTOCOLS:
            # Such a client sends nothing that says its streams are set up: give it the moment a real
            # runtime takes to start the process (on a loaded machine kubectl 1.33 lost the whole output).
            await asyncio.sleep(STREAM_SETUP_SECONDS)
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CLIENT_GRACE_SECONDS
    settled = False
    while (left := deadline - loop.time()) > 0:
        try:
            # Once settled, wait only for the client to go quiet: a terminal may send its size again
            # as it sets up, and output that beats that write makes kubectl write after it has closed
            # ("websocket: close sent").
            message = await ws.receive(timeout=min(left, CLIENT_QUIET_SECONDS) if settled else left)
        except TimeoutError:
            return
        if message.type != WSMsgType.BINARY:
            return
        channel = message.data[:1]
        if channel == bytes([RESIZE]):
            want_size = False
        elif channel == bytes([CLOSE_SIGNAL]):
            want_stdin_end = False
        settled = not (want_size or want_stdin_end)
