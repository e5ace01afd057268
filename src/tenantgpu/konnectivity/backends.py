"""The proxy server's backends: one session per connected agent stream, and the choice among them."""

from __future__ import annotations

import asyncio
import errno
import random as _random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tenantgpu.konnectivity import metrics as m
from tenantgpu.konnectivity import wire
from tenantgpu.konnectivity._proto import client_pb2 as pb
from tenantgpu.konnectivity.sender import PacketSender
from tenantgpu.konnectivity.transport import TunnelTransport

# Upstream's --proxy-strategies names. The lab defaults to destHost then default, because a kubelet
# is only reachable through its own node's agent while a Service is reachable through any agent.
STRATEGY_DEFAULT = "default"
STRATEGY_DEST_HOST = "destHost"
STRATEGY_DEFAULT_ROUTE = "defaultRoute"
KNOWN_STRATEGIES = (STRATEGY_DEFAULT, STRATEGY_DEST_HOST, STRATEGY_DEFAULT_ROUTE)


class DialError(ConnectionError):
    """The agent could not open the destination, or the dial was abandoned."""

    def __init__(self, message: str) -> None:
        # errno + strerror, so that wrappers such as aiohttp's ClientConnectorError show the message.
        super().__init__(errno.EHOSTUNREACH, message)

    def __str__(self) -> str:
        return str(self.strerror)


class _BackendClosed(DialError):
    """DIAL_CLS from the agent (counted apart from an error in DIAL_RSP)."""


class NoAgentAvailable(DialError):
    """No connected agent can take the dial; the message is upstream's "No agent available"."""

    def __init__(self, address: str = "") -> None:
        detail = f" for {address}" if address else ""
        super().__init__(f"{wire.NO_AGENT_AVAILABLE}{detail}")


@dataclass(frozen=True)
class AgentInfo:
    """What the server knows of one connected agent stream."""

    agent_id: str
    identifiers: wire.AgentIdentifiers
    draining: bool
    identity: str
    open_connections: int


class AgentSession:
    """One agent's stream as the server sees it: pending dials, open connections, drain state."""

    def __init__(
        self,
        agent_id: str,
        identifiers: wire.AgentIdentifiers,
        identity: str,
        sender: PacketSender,
        metrics: m.ServerMetrics | None = None,
    ) -> None:
        self.agent_id = agent_id
        self._metrics = metrics or m.ServerMetrics()
        self.identifiers = identifiers
        self.identity = identity
        self.draining = False
        self._sender = sender
        self._dials: dict[int, tuple[asyncio.Future[TunnelTransport], tuple[str, int]]] = {}
        self._connections: dict[int, TunnelTransport] = {}
        self._closed_error: Exception | None = None

    @property
    def pending_dials(self) -> int:
        return len(self._dials)

    @property
    def established_connections(self) -> int:
        return len(self._connections)

    def info(self) -> AgentInfo:
        return AgentInfo(
            self.agent_id, self.identifiers, self.draining, self.identity, len(self._connections)
        )

    async def dial(self, host: str, port: int, random_id: int, timeout: float) -> TunnelTransport:
        """Ask the agent to open host:port; the transport it returns is paused until attached."""
        if self._closed_error is not None:
            raise DialError(f"agent {self.agent_id} disconnected")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[TunnelTransport] = loop.create_future()
        self._dials[random_id] = (future, (host, port))
        self._sender.send(wire.dial_request(wire.join_address(host, port), random_id))
        started = loop.time()
        try:
            connection = await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            self._abandon(random_id)
            self._metrics.dial_failures.labels(m.FAILURE_BACKEND_DIAL_TIMEOUT).inc()
            raise DialError(f"dial {host}:{port} through agent {self.agent_id} timed out") from None
        except asyncio.CancelledError:
            self._abandon(random_id)
            self._metrics.dial_failures.labels(m.FAILURE_FRONTEND_CLOSE).inc()
            raise
        except _BackendClosed:
            raise
        except DialError:
            self._metrics.dial_failures.labels(m.FAILURE_ERROR_RESPONSE).inc()
            raise
        self._metrics.dial_duration.observe(loop.time() - started)
        return connection

    def handle(self, packet: pb.Packet) -> None:
        """Dispatch one packet the agent sent."""
        kind = packet.type
        if kind == pb.DATA:
            connection = self._connections.get(packet.data.connectID)
            if connection is not None:
                connection.data_received(packet.data.data)
            elif packet.data.connectID:
                # Data for a connection we no longer know: tell the agent to drop it.
                self._sender.send(wire.close_request(packet.data.connectID))
        elif kind == pb.DIAL_RSP:
            self._dial_answered(packet.dialResponse)
        elif kind in (pb.CLOSE_RSP, pb.CLOSE_REQ):
            connect_id = (
                packet.closeResponse.connectID if kind == pb.CLOSE_RSP else packet.closeRequest.connectID
            )
            connection = self._connections.get(connect_id)
            if connection is not None:
                connection.remote_closed()
            if kind == pb.CLOSE_REQ:
                self._sender.send(wire.close_response(connect_id))
        elif kind == pb.DIAL_CLS:
            entry = self._dials.pop(packet.closeDial.random, None)
            if entry is not None and not entry[0].done():
                self._metrics.dial_failures.labels(m.FAILURE_BACKEND_CLOSE).inc()
                entry[0].set_exception(_BackendClosed("dial closed by the agent"))
        elif kind == pb.DRAIN:
            self.draining = True

    def close(self, error: Exception) -> None:
        """The stream ended: every pending dial fails and every open connection is reset."""
        self._closed_error = error
        for future, _ in self._dials.values():
            if not future.done():
                future.set_exception(DialError(f"agent {self.agent_id} disconnected: {error}"))
        self._dials.clear()
        for connection in list(self._connections.values()):
            connection.stream_lost(ConnectionResetError(f"agent {self.agent_id} disconnected"))
        self._connections.clear()

    def _dial_answered(self, response: pb.DialResponse) -> None:
        entry = self._dials.pop(response.random, None)
        if entry is None:
            if not response.error and response.connectID:
                # The dialler gave up before the answer came: do not leak the agent's connection.
                self._sender.send(wire.close_request(response.connectID))
            return
        future, peer = entry
        if future.done():
            return
        if response.error:
            future.set_exception(DialError(response.error))
            return
        connection = TunnelTransport(self._sender, response.connectID, peer, self.agent_id, self._forget)
        # Registered before the dialler resumes, so DATA arriving right behind DIAL_RSP is kept.
        self._connections[response.connectID] = connection
        future.set_result(connection)

    def _abandon(self, random_id: int) -> None:
        entry = self._dials.pop(random_id, None)
        if entry is None:
            return
        future = entry[0]
        if future.done() and not future.cancelled() and future.exception() is None:
            future.result().close()
        else:
            self._sender.send(wire.close_dial(random_id))

    def _forget(self, connect_id: int) -> None:
        self._connections.pop(connect_id, None)


class BackendManager:
    """The connected agents of one proxy server, and which of them takes a dial."""

    def __init__(
        self,
        strategies: Sequence[str],
        rng: _random.Random | None = None,
        metrics: m.ServerMetrics | None = None,
    ) -> None:
        unknown = [s for s in strategies if s not in KNOWN_STRATEGIES]
        if unknown or not strategies:
            raise ValueError(f"proxy strategies must be among {KNOWN_STRATEGIES}, got {list(strategies)}")
        self.strategies = tuple(strategies)
        self._rng = rng or _random.Random()
        self._sessions: list[AgentSession] = []
        self._changed = asyncio.Condition()
        self.metrics = metrics or m.ServerMetrics()
        self.metrics.observe_backends(
            ready=lambda: len(self._sessions),
            pending=lambda: sum(s.pending_dials for s in self._sessions),
            established=lambda: sum(s.established_connections for s in self._sessions),
        )

    @property
    def sessions(self) -> list[AgentSession]:
        return list(self._sessions)

    async def add(self, session: AgentSession) -> None:
        self._sessions.append(session)
        async with self._changed:
            self._changed.notify_all()

    async def remove(self, session: AgentSession) -> None:
        if session in self._sessions:
            self._sessions.remove(session)
        async with self._changed:
            self._changed.notify_all()

    async def notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[list[AgentSession]], bool], timeout: float) -> None:
        """Wait until `predicate(sessions)` holds, or raise TimeoutError."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: predicate(list(self._sessions)))

    def pick(self, host: str) -> AgentSession:
        """The agent for a dial to `host`, following the strategies in order; prefers non-draining."""
        for strategy in self.strategies:
            candidates = self._candidates(strategy, host)
            if not candidates:
                continue
            ready = [s for s in candidates if not s.draining]
            return self._rng.choice(ready or candidates)
        raise NoAgentAvailable()

    def _candidates(self, strategy: str, host: str) -> list[AgentSession]:
        if strategy == STRATEGY_DEST_HOST:
            return [s for s in self._sessions if s.identifiers.serves_host(host)]
        if strategy == STRATEGY_DEFAULT_ROUTE:
            return [s for s in self._sessions if s.identifiers.default_route]
        return list(self._sessions)
