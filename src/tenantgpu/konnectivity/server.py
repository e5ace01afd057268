"""The proxy server beside a tenant API server: agents dial in over gRPC, the API server dials out."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random as _random
import ssl
import uuid
from collections.abc import Awaitable, Callable, Sequence

import grpc
from grpc import aio

from tenantgpu.konnectivity import wire
from tenantgpu.konnectivity._proto import client_pb2 as pb
from tenantgpu.konnectivity._proto import client_pb2_grpc
from tenantgpu.konnectivity.backends import (
    STRATEGY_DEFAULT,
    STRATEGY_DEST_HOST,
    AgentInfo,
    AgentSession,
    BackendManager,
)
from tenantgpu.konnectivity.egress import Egress
from tenantgpu.konnectivity.frontend import ProxyFrontend
from tenantgpu.konnectivity.h2grpc import H2GrpcServer, StreamContext, StreamMethod
from tenantgpu.konnectivity.metrics import ServerMetrics
from tenantgpu.konnectivity.sender import PacketSender
from tenantgpu.kubeclient.config import load_cert_chain

log = logging.getLogger(__name__)

# The agent's method on the wire: agent.proto declares no package, as upstream's.
AGENT_CONNECT_PATH = "/AgentService/Connect"

TokenVerifier = Callable[[str], Awaitable[str | None]]
"""Checks an agent's bearer token; returns the authenticated username, or None to refuse.

In a lab it is the tenant API server's own service-account token check (TokenReview semantics),
so a token minted by another tenant's signing key is refused.
"""


def service_account_username(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


class ProxyServer:
    """Konnectivity's proxy server for one tenant: the agent-facing gRPC `AgentService` plus an `Egress`.

    Agents authenticate with a bearer token that `token_verifier` must map to the username of the
    `agent_namespace/agent_service_account` service account (Kamaji: kube-system/konnectivity-agent).
    The verifier may be assigned after construction (`server.token_verifier = ...`), since the API
    server that verifies tokens is often built after its egress; until then every agent is refused.
    `authenticate_agents=False` accepts any agent (upstream without --agent-namespace; tests only).
    With `cert_pem`/`key_pem` the agent port speaks TLS; agents verify it against their CA.
    With `uds_path` it also serves upstream's frontend `ProxyService` on that Unix socket, for an
    API server in another process (`GrpcEgress`); in-process callers use `egress` directly.
    """

    def __init__(
        self,
        *,
        token_verifier: TokenVerifier | None = None,
        authenticate_agents: bool = True,
        cert_pem: bytes | None = None,
        key_pem: bytes | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        agent_namespace: str = "kube-system",
        agent_service_account: str = "konnectivity-agent",
        server_id: str | None = None,
        server_count: int = 1,
        proxy_strategies: Sequence[str] = (STRATEGY_DEST_HOST, STRATEGY_DEFAULT),
        dial_timeout: float = 10.0,
        uds_path: str | None = None,
        rng: _random.Random | None = None,
    ) -> None:
        if (cert_pem is None) != (key_pem is None):
            raise ValueError("cert_pem and key_pem go together")
        self.token_verifier = token_verifier
        self._authenticate_agents = authenticate_agents
        self._cert_pem = cert_pem
        self._key_pem = key_pem
        self._host = host
        self._requested_port = port
        self.port = 0
        self.expected_username = service_account_username(agent_namespace, agent_service_account)
        self.server_id = server_id or str(uuid.uuid4())
        self.server_count = server_count
        self.metrics = ServerMetrics()
        self.backends = BackendManager(proxy_strategies, rng, self.metrics)
        self.egress = Egress(self.backends, dial_timeout=dial_timeout, rng=rng)
        self.uds_path = uds_path
        self._server: H2GrpcServer | None = None
        self._frontend: aio.Server | None = None

    @property
    def address(self) -> str:
        """host:port agents dial (valid once started)."""
        return wire.join_address(self._host, self.port)

    @property
    def agents(self) -> list[AgentInfo]:
        return [session.info() for session in self.backends.sessions]

    async def start(self) -> None:
        service = _AgentService(self)
        server = H2GrpcServer(
            {AGENT_CONNECT_PATH: StreamMethod(service.serve, pb.Packet.FromString)},
            max_message_bytes=wire.MAX_MESSAGE_BYTES,
        )
        context = None
        if self._cert_pem is not None and self._key_pem is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            load_cert_chain(context, self._cert_pem, self._key_pem)
        try:
            self.port = await server.start(self._host, self._requested_port, context)
        except OSError as exc:
            bind = wire.join_address(self._host, self._requested_port)
            raise OSError(f"konnectivity server cannot listen on {bind}: {exc}") from exc
        self._server = server
        if self.uds_path is not None:
            # Kamaji's layout: kube-apiserver reaches its sidecar over a Unix socket (--uds-name).
            frontend = aio.server(options=wire.GRPC_OPTIONS)
            servicer = ProxyFrontend(self.egress, self.metrics)
            client_pb2_grpc.add_ProxyServiceServicer_to_server(servicer, frontend)
            if frontend.add_insecure_port(f"unix:{self.uds_path}") == 0:
                await server.stop(None)
                self._server = None
                raise OSError(f"konnectivity server cannot listen on unix:{self.uds_path}")
            await frontend.start()
            self._frontend = frontend

    async def stop(self, grace: float | None = 0.2) -> None:
        """Stop listening and drop every agent stream; agents reconnect to the next server."""
        if self._frontend is not None:
            frontend, self._frontend = self._frontend, None
            await frontend.stop(grace)
        if self._server is None:
            return
        server, self._server = self._server, None
        await server.stop(grace)

    async def wait_for_agents(self, count: int = 1, timeout: float = 10.0) -> None:
        """Wait until at least `count` agents are connected (raises TimeoutError)."""
        await self.backends.wait_for(lambda sessions: len(sessions) >= count, timeout)

    async def authenticate(self, metadata: dict[str, str]) -> str | None:
        """The agent's identity if its token is one of ours and belongs to the agent's service account."""
        if not self._authenticate_agents:
            return "system:anonymous"
        verify = self.token_verifier
        header = metadata.get(wire.AUTHORIZATION, "")
        if verify is None or not header.startswith(wire.BEARER_PREFIX):
            return None
        try:
            username = await verify(header[len(wire.BEARER_PREFIX) :].strip())
        except Exception:
            log.exception("agent token verification failed")
            return None
        if username != self.expected_username:
            return None
        return username


class _AgentService:
    """`AgentService.Connect`: one call per agent, held open for the agent's lifetime."""

    def __init__(self, proxy: ProxyServer) -> None:
        self._proxy = proxy

    async def serve(self, context: StreamContext) -> None:
        pairs = context.invocation_metadata() or ()
        metadata = {key.lower(): value for key, value in pairs if isinstance(value, str)}
        identity = await self._proxy.authenticate(metadata)
        if identity is None:
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                f"agent token is not a token of {self._proxy.expected_username} in this cluster",
            )
            return
        agent_id = metadata.get(wire.AGENT_ID) or "unknown"
        identifiers = wire.AgentIdentifiers.parse(metadata.get(wire.AGENT_IDENTIFIERS, ""))
        await context.send_initial_metadata(
            ((wire.SERVER_ID, self._proxy.server_id), (wire.SERVER_COUNT, str(self._proxy.server_count)))
        )
        connections = self._proxy.metrics.grpc_connections.labels("Connect")
        connections.inc()
        sender = PacketSender(context.write)
        sender.start()
        session = AgentSession(agent_id, identifiers, identity, sender, self._proxy.metrics)
        backends = self._proxy.backends
        await backends.add(session)
        log.info("agent %s connected (%s)", agent_id, identifiers.encode())
        error: Exception = ConnectionResetError("agent stream closed")
        try:
            while True:
                packet = await context.read()
                if packet is aio.EOF:
                    break
                was_draining = session.draining
                session.handle(packet)
                if session.draining and not was_draining:
                    log.info("agent %s is draining", agent_id)
                    await backends.notify()
        except asyncio.CancelledError:
            error = ConnectionResetError("proxy server stopping")
            raise
        except Exception as exc:
            error = exc
        finally:
            session.close(error)
            await sender.close()
            connections.dec()
            with contextlib.suppress(Exception):
                await backends.remove(session)
            log.info("agent %s disconnected", agent_id)
