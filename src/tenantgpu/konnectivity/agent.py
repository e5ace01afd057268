"""The proxy agent on a worker: dials out to its tenant's proxy server, opens local connections on request."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random as _random
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc
from grpc import aio

from tenantgpu.dialerrors import go_dial_error
from tenantgpu.klog import ComponentLog
from tenantgpu.konnectivity import wire
from tenantgpu.konnectivity._proto import agent_pb2_grpc
from tenantgpu.konnectivity._proto import client_pb2 as pb
from tenantgpu.konnectivity.sender import PacketSender

log = logging.getLogger(__name__)

DialPolicy = Callable[[str, int], Awaitable[tuple[str, int]]]
"""Maps a requested destination (e.g. `hami-scheduler.kube-system.svc`, 443) to the address the worker
actually dials; raise (any exception) to refuse, and its message goes back in DIAL_RSP.error."""

TokenSource = str | Callable[[], Awaitable[str]]
"""The service-account token, or a coroutine function read again before every (re)connect,
as the real agent re-reads its projected token file."""

READ_CHUNK_BYTES = 64 * 1024


async def dial_as_addressed(host: str, port: int) -> tuple[str, int]:
    """The default policy: dial exactly what was asked for."""
    return host, port


def mapped_dial_policy(
    mapping: dict[tuple[str, int], tuple[str, int]], *, pass_unmapped: bool = True
) -> DialPolicy:
    """A policy from a fixed table (e.g. `hami-scheduler.kube-system.svc:443` -> `127.0.0.1:9443`),
    standing in for the worker's cluster DNS and Service routing; other destinations are dialled
    as given, or refused when `pass_unmapped` is False."""
    table = {(host.lower(), port): target for (host, port), target in mapping.items()}

    async def policy(host: str, port: int) -> tuple[str, int]:
        target = table.get((host.lower(), port))
        if target is not None:
            return target
        if pass_unmapped:
            return host, port
        raise LookupError(f"{host}:{port} is not a destination this worker serves")

    return policy


@dataclass(frozen=True)
class Backoff:
    """Reconnect delays: exponential from `initial` up to `cap`, each stretched by up to `jitter`.

    Upstream's agent uses --sync-interval 1s and --sync-interval-cap 10s.
    """

    initial: float = 1.0
    cap: float = 10.0
    factor: float = 2.0
    jitter: float = 0.2

    def delay(self, attempt: int, rng: _random.Random) -> float:
        base = min(self.cap, self.initial * self.factor ** max(0, attempt))
        return base * (1.0 + self.jitter * rng.random())


class _LocalConnection:
    """One connection the agent opened on the worker, relayed under a connectID."""

    def __init__(self, connect_id: int, random_id: int, writer: asyncio.StreamWriter) -> None:
        self.connect_id = connect_id
        self.random_id = random_id
        self.writer = writer
        self.pump: asyncio.Task[None] | None = None
        self.closed_by_server = False


class ProxyAgent:
    """Konnectivity's proxy agent: one outbound `AgentService.Connect` stream, held open and re-dialled.

    `server_address` is host:port of the proxy server's agent port; `ca_pem` the CA that signed its
    serving certificate (None: plaintext, for tests only); `token` the kube-system/konnectivity-agent
    service-account token of this tenant; `identifiers` what the agent can reach directly
    (destHost routing); `dial_policy` where a requested destination is dialled on the worker.
    """

    def __init__(
        self,
        server_address: str,
        ca_pem: bytes | None,
        token: TokenSource,
        agent_id: str | None = None,
        identifiers: wire.AgentIdentifiers | None = None,
        dial_policy: DialPolicy = dial_as_addressed,
        *,
        server_name: str | None = None,
        backoff: Backoff | None = None,
        dial_timeout: float = 10.0,
        drain_timeout: float = 5.0,
        rng: _random.Random | None = None,
        klog: ComponentLog | None = None,
    ) -> None:
        self.server_address = server_address
        # what the agent's container prints at Kamaji's `-v=8` (`kubectl logs … ds/konnectivity-agent`)
        self.klog = klog or ComponentLog()
        self._ca_pem = ca_pem
        self._token = token
        self.agent_id = agent_id or str(uuid.uuid4())
        self.identifiers = identifiers or wire.AgentIdentifiers()
        self._dial_policy = dial_policy
        self._server_name = server_name
        self.backoff = backoff or Backoff()
        self._dial_timeout = dial_timeout
        self._drain_timeout = drain_timeout
        self._rng = rng or _random.Random()
        self.server_id: str | None = None
        self.last_error: str | None = None
        self.connect_count = 0
        # The most recent waits between attempts, for status displays and tests.
        self.reconnect_delays: deque[float] = deque(maxlen=64)
        self._connected = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._call: aio.StreamStreamCall | None = None
        self._sender: PacketSender | None = None
        self._connections: dict[int, _LocalConnection] = {}
        self._dials: dict[int, asyncio.Task[None]] = {}
        self._next_connect_id = 1
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    async def start(self) -> None:
        """Begin connecting in the background; see `wait_connected`."""
        if self._task is None:
            self._stopping.clear()
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def wait_connected(self, timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            await self._connected.wait()

    async def stop(self) -> None:
        """Announce DRAIN, let open connections finish (up to the drain timeout), then disconnect."""
        if self._task is None:
            return
        self._stopping.set()
        sender = self._sender
        if self.connected and sender is not None:
            self.klog.info(
                "client.go:574", "drain agent client", serverID=self.server_id, agentID=self.agent_id
            )
            sender.send(wire.drain())
            await sender.flush(timeout=1.0)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._drain_timeout):
                    await self._idle.wait()
        task, self._task = self._task, None
        if self._call is not None:
            self._call.cancel()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    def _log_connected(self) -> None:
        klog = self.klog
        klog.info("client.go:227", "Connect to server", serverID=self.server_id)
        klog.info(
            "clientset.go:286",
            "successfully connected to new proxy server",
            serverID=self.server_id,
            newServerCount=1,
        )
        klog.info("client.go:338", "Start serving", serverID=self.server_id, agentID=self.agent_id)
        klog.started()

    # --- the connection loop -------------------------------------------------------------------
    async def _run(self) -> None:
        attempt = 0
        while not self._stopping.is_set():
            try:
                if await self._serve_once():
                    attempt = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                self.klog.error("clientset.go:238", self.last_error, "cannot connect once")
            if self._stopping.is_set():
                break
            delay = self.backoff.delay(attempt, self._rng)
            attempt += 1
            self.reconnect_delays.append(delay)
            log.info("agent %s reconnecting in %.2fs (%s)", self.agent_id, delay, self.last_error)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stopping.wait()

    async def _serve_once(self) -> bool:
        """One stream's life; True if it got as far as being connected."""
        token = self._token if isinstance(self._token, str) else await self._token()
        metadata = (
            (wire.AGENT_ID, self.agent_id),
            (wire.AGENT_IDENTIFIERS, self.identifiers.encode()),
            (wire.AUTHORIZATION, wire.BEARER_PREFIX + token),
        )
        options = list(wire.GRPC_OPTIONS)
        if self._ca_pem is not None:
            if self._server_name:
                options.append(("grpc.ssl_target_name_override", self._server_name))
            credentials = grpc.ssl_channel_credentials(root_certificates=self._ca_pem)
            channel = aio.secure_channel(self.server_address, credentials, options=options)
        else:
            channel = aio.insecure_channel(self.server_address, options=options)
        try:
            stub = agent_pb2_grpc.AgentServiceStub(channel)
            call = stub.Connect(metadata=metadata)
            self._call = call
            header = dict(await call.initial_metadata() or ())
            if wire.SERVER_ID not in header:
                code = await call.code()
                details = await call.details()
                self.last_error = f"{code.name}: {details}"
                return False
            self.server_id = str(header[wire.SERVER_ID])
            sender = PacketSender(call.write)
            sender.start()
            self._sender = sender
            self.connect_count += 1
            self.last_error = None
            self._connected.set()
            log.info("agent %s connected to server %s", self.agent_id, self.server_id)
            self._log_connected()
            try:
                await self._read_loop(call, sender)
            except aio.AioRpcError as exc:
                self.last_error = f"{exc.code().name}: {exc.details()}"
            finally:
                self._connected.clear()
                self._sender = None
                self._drop_everything()
                await sender.close()
            return True
        finally:
            self._call = None
            await channel.close(grace=None)

    async def _read_loop(self, call: aio.StreamStreamCall, sender: PacketSender) -> None:
        while True:
            packet = await call.read()
            if packet is aio.EOF:
                self.last_error = "stream closed by the server"
                self.klog.info(
                    "client.go:352", "received EOF, exit", serverID=self.server_id, agentID=self.agent_id
                )
                return
            kind = packet.type
            if kind == pb.DATA:
                self.klog.info("client.go:514", "received DATA", connectionID=packet.data.connectID)
                connection = self._connections.get(packet.data.connectID)
                if connection is not None:
                    connection.writer.write(packet.data.data)
                else:
                    sender.send(wire.close_response(packet.data.connectID, "unknown connectID"))
            elif kind == pb.DIAL_REQ:
                request = packet.dialRequest
                self.klog.info(
                    "client.go:378",
                    "Received DIAL_REQ",
                    serverID=self.server_id,
                    agentID=self.agent_id,
                    dialID=request.random,
                    dialAddress=request.address,
                )
                task = asyncio.get_running_loop().create_task(
                    self._dial(sender, request.random, request.address, request.protocol)
                )
                self._dials[request.random] = task
                task.add_done_callback(lambda _t, r=request.random: self._dials.pop(r, None))
            elif kind == pb.CLOSE_REQ:
                connect_id = packet.closeRequest.connectID
                self.klog.info("client.go:541", "received CLOSE_REQ", connectionID=connect_id)
                connection = self._connections.get(connect_id)
                if connection is None:
                    sender.send(wire.close_response(connect_id, "unknown connectID"))
                else:
                    connection.closed_by_server = True
                    self._close_local(connection)
                    sender.send(wire.close_response(connect_id))
            elif kind == pb.DIAL_CLS:
                self._cancel_dial(packet.closeDial.random)

    # --- connections on the worker -------------------------------------------------------------
    async def _dial(self, sender: PacketSender, random_id: int, address: str, protocol: str) -> None:
        try:
            if protocol not in ("", "tcp"):
                raise ValueError(f"protocol {protocol!r} is not supported")
            host, port = await self._dial_policy(*wire.split_address(address))
            async with asyncio.timeout(self._dial_timeout):
                reader, writer = await asyncio.open_connection(host, port)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = go_dial_error(address, exc) if isinstance(exc, OSError) else f"dial {address}: {exc}"
            self.klog.info(
                "client.go:457", "error dialing backend", error=error, dialID=random_id, dialAddress=address
            )
            sender.send(wire.dial_response(random_id, error=error))
            return
        connect_id = self._next_connect_id
        self._next_connect_id += 1
        connection = _LocalConnection(connect_id, random_id, writer)
        self._connections[connect_id] = connection
        self._idle.clear()
        self.klog.info(
            "client.go:485",
            "Endpoint connection established",
            dialID=random_id,
            connectionID=connect_id,
            dialAddress=address,
        )
        sender.send(wire.dial_response(random_id, connect_id=connect_id))
        connection.pump = asyncio.get_running_loop().create_task(self._pump(sender, connection, reader))

    async def _pump(
        self, sender: PacketSender, connection: _LocalConnection, reader: asyncio.StreamReader
    ) -> None:
        """Local bytes to the server until EOF; then CLOSE_RSP, as upstream agents announce a remote close."""
        error = ""
        try:
            while True:
                chunk = await reader.read(READ_CHUNK_BYTES)
                if not chunk:
                    break
                sender.send_data(connection.connect_id, chunk)
                if sender.over_high_water:
                    await sender.wait_writable()
        except asyncio.CancelledError:
            return
        except OSError as exc:
            error = str(exc)
        if not error:
            self.klog.info("client.go:603", "remote connection EOF", connectionID=connection.connect_id)
        if not connection.closed_by_server and connection.connect_id in self._connections:
            sender.send(wire.close_response(connection.connect_id, error))
            self._close_local(connection)

    def _close_local(self, connection: _LocalConnection) -> None:
        self._connections.pop(connection.connect_id, None)
        if connection.pump is not None and connection.pump is not asyncio.current_task():
            connection.pump.cancel()
        connection.writer.close()
        if not self._connections:
            self._idle.set()

    def _cancel_dial(self, random_id: int) -> None:
        task = self._dials.pop(random_id, None)
        if task is not None:
            task.cancel()
            return
        for connection in list(self._connections.values()):
            if connection.random_id == random_id:
                connection.closed_by_server = True
                self._close_local(connection)

    def _drop_everything(self) -> None:
        for task in list(self._dials.values()):
            task.cancel()
        self._dials.clear()
        for connection in list(self._connections.values()):
            connection.closed_by_server = True
            self._close_local(connection)
        self._idle.set()
