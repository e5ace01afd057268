"""The host that runs tenant API servers and their konnectivity servers inside this process, all on one
shared datastore."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from pathlib import Path
from ssl import SSLContext
from typing import Any

from tenantgpu.apiserver import errors as api_errors
from tenantgpu.apiserver import jsoncodec
from tenantgpu.apiserver.auth import SharedClientTrust
from tenantgpu.apiserver.hooks import Egress, NoEgress
from tenantgpu.apiserver.pki import CertificateAuthority, ServerPKI
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import Datastore
from tenantgpu.apiserver.watchcache import ResourceCache
from tenantgpu.controlplane.manager import ControlPlaneServices
from tenantgpu.kamaji.host import (
    ControlPlaneInstance,
    RunningInstance,
    TenantData,
    schema_taken,
)
from tenantgpu.kamaji.konnectivityagent import AgentSpec, apply_agent, remove_agent
from tenantgpu.kamaji.kubeadmconfig import KubeadmParameters
from tenantgpu.kamaji.kubeadmphases import apply_kubeadm_phases
from tenantgpu.kamaji.soot import WATCHED_KINDS, SootWatch
from tenantgpu.kamaji.writepermissions import ManagementNetwork
from tenantgpu.konnectivity import ProxyServer
from tenantgpu.kubeclient import KubeClient, KubeConfig
from tenantgpu.node.kubeletclient import KubeletClient

log = logging.getLogger(__name__)

_SERVICES_START_TIMEOUT = 10.0
SERVICES_RESTART_SECONDS = 1.0
SERVICES_RESTART_MAX_SECONDS = 30.0


class SwitchableEgress:
    """The API server's `cluster` egress: nothing until the konnectivity server is up, then its tunnel."""

    def __init__(self) -> None:
        self.target: Egress = NoEgress()

    async def open_connection(
        self, host: str, port: int, *, ssl: SSLContext | None = None, server_hostname: str | None = None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await self.target.open_connection(host, port, ssl=ssl, server_hostname=server_hostname)


@dataclass
class _Running:
    instance: ControlPlaneInstance
    server: APIServer
    egress: SwitchableEgress
    webhook_ca: bytes = b""  # the CA of Kamaji's webhook as this process serves it
    services: ControlPlaneServices | None = None
    services_task: asyncio.Task[None] | None = None
    proxy: ProxyServer | None = None
    agent: AgentSpec | None = None  # the konnectivity agent last written into the tenant
    agent_task: asyncio.Task[None] | None = None
    kubeadm: KubeadmParameters | None = None  # the configuration last written by Kamaji's kubeadm phases
    kubeadm_task: asyncio.Task[None] | None = None
    soot: SootWatch | None = None  # Kamaji's soot controllers' watch of what it wrote
    rewrite_task: asyncio.Task[None] | None = None
    rewrite_again: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)


def _at_revision(value: bytes) -> Callable[[int], bytes]:
    """An object copied to another store carries the revision it gets there as its resourceVersion."""

    def render(revision: int) -> bytes:
        try:
            obj = jsoncodec.loads(value)
        except ValueError:
            return value
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            return value
        obj["metadata"]["resourceVersion"] = str(revision)
        return jsoncodec.dumps(obj)

    return render


def trust_directory(datastore: Path) -> Path:
    """Where the process serving this SQLite file keeps the tenants' CAs its servers trust
    (`datastore.sqlite` → `datastore.sqlite.cas/`, see `SharedClientTrust`)."""
    return datastore.with_name(datastore.name + ".cas")


def key_prefix(schema: str) -> str:
    """Where a tenant's keys live in the shared datastore (the API server adds the leading slash)."""
    return schema


class InProcessHost:
    """Starts each tenant's API server (and, when asked, its konnectivity server) in this event loop."""

    def __init__(self, datastore: Datastore, client_trust: SharedClientTrust | None = None) -> None:
        self.datastore = datastore
        # Every server of the lab trusts every tenant's CA at the TLS layer, so a certificate from
        # another tenant gets a clean 401 from the server it does not belong to, not a failed handshake.
        self.client_trust = client_trust or SharedClientTrust()
        self._running: dict[str, _Running] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # the management cluster's network, where Kamaji's write-permission webhook answers
        self.network = ManagementNetwork()

    def _lock(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    def server(self, key: str) -> APIServer | None:
        running = self._running.get(key)
        return None if running is None else running.server

    async def start(self, instance: ControlPlaneInstance) -> RunningInstance:
        async with self._lock(instance.key):
            current = self._running.get(instance.key)
            if current is not None:
                if _same_identity(current.instance, instance):
                    return self._report(current)
                await self._stop(instance.key)
            pki = ServerPKI(
                CertificateAuthority(instance.ca.cert_pem, instance.ca.key_pem),
                instance.serving.cert_pem,
                instance.serving.key_pem,
                instance.service_account.key_pem,
            )
            egress = SwitchableEgress()
            # `kubectl logs`, `kubectl exec` and `nodes/proxy` reach the kubelet the way kube-apiserver does:
            # through the cluster egress.
            client = instance.kubelet_client
            kubelets = KubeletClient(
                egress=egress,
                error=api_errors.bad_request,
                client_certificate=None if client is None else (client.cert_pem, client.key_pem),
            )
            config = APIServerConfig(
                name=instance.name,
                datastore=self.datastore,
                pki=pki,
                key_prefix=key_prefix(instance.schema),
                kubernetes_version=instance.kubernetes_version or "v1.31.4",
                service_cidr=instance.service_cidr,
                host=instance.address,
                port=instance.port,
                egress=egress,
                control_plane_egress=self.network,
                log_source=kubelets,
                exec_source=kubelets,
                node_proxy=kubelets,
                client_trust=self.client_trust,
                # kube-apiserver runs it by default; Kamaji's admissionControllers only add to that set.
                service_account_admission=True,
            )
            server = APIServer(config)
            kubelets.node_lookup = _node_lookup(server)
            await server.start()
            running = _Running(instance, server, egress, webhook_ca=self.network.ca.cert_pem)
            # The API server answering is what makes the tenant Ready; its scheduler and controller-manager
            # come up right behind it, as they do in Kamaji's control-plane pod.
            running.services_task = asyncio.create_task(
                self._start_services(running), name=f"control-plane-services-{instance.name}"
            )
            self._running[instance.key] = running
            self._write_kubeadm(running, instance.kubeadm_parameters())
            running.soot = SootWatch(_watched_caches(server), lambda: _rewrite_soon(running))
            log.info("tenant %s/%s: API server on %s", instance.namespace, instance.name, server.url)
            return self._report(running)

    @staticmethod
    async def _start_services(running: _Running) -> None:
        """Start the tenant's kube-scheduler and controller-manager duties; when that fails, try again
        as the kubelet restarts a crashed container of Kamaji's control-plane pod: after 1 s, doubling
        up to 30 s, until it works or the tenant stops."""

        async def start() -> None:
            running.services = await _start_services(running.instance, running.server)

        await _until_done(running, "starting kube-scheduler/controller-manager", start)

    @staticmethod
    def _report(running: _Running) -> RunningInstance:
        return RunningInstance(running.server.port, running.proxy.port if running.proxy else 0)

    async def start_konnectivity(self, key: str, port: int, agent: AgentSpec | None = None) -> int:
        async with self._lock(key):
            running = self._running.get(key)
            if running is None:
                raise RuntimeError(f"no API server runs for {key}")
            if running.proxy is None:
                # A server started again (the add-on switched off and on) keeps its port: the agents
                # already running were pointed at it.
                await self._start_proxy(running, port or running.extra.get("konnectivity_port", 0))
            assert running.proxy is not None
            if agent is not None:
                self._write_agent(running, replace(agent, port=running.proxy.port))
            return running.proxy.port

    async def _start_proxy(self, running: _Running, port: int) -> None:
        instance = running.instance
        # Kamaji gives the konnectivity server the API server's certificate (--cluster-cert/--cluster-key).
        proxy = ProxyServer(
            token_verifier=_token_verifier(running.server),
            cert_pem=instance.serving.cert_pem,
            key_pem=instance.serving.key_pem,
            host=instance.address,
            port=port,
        )
        try:
            await proxy.start()
        except OSError:
            if port == 0:
                raise
            proxy = ProxyServer(
                token_verifier=_token_verifier(running.server),
                cert_pem=instance.serving.cert_pem,
                key_pem=instance.serving.key_pem,
                host=instance.address,
                port=0,
            )
            await proxy.start()
        running.proxy = proxy
        running.egress.target = proxy.egress
        log.info("tenant %s/%s: konnectivity server on %s", instance.namespace, instance.name, proxy.address)

    @staticmethod
    def _write_agent(running: _Running, agent: AgentSpec) -> None:
        """Kamaji's agent objects into the tenant, in the background (see `_behind_services`)."""
        if agent == running.agent:
            return
        running.agent = agent
        running.agent_task = _replaced(
            running.agent_task,
            _behind_services(running, "writing the konnectivity agent", lambda c: apply_agent(c, agent)),
            f"konnectivity-agent-{running.instance.name}",
        )

    async def apply_kubeadm(self, key: str, params: KubeadmParameters) -> None:
        """Kamaji's soot manager runs its kubeadm phases again when the TCP changes; unchanged
        parameters write nothing."""
        async with self._lock(key):
            running = self._running.get(key)
            if running is not None:
                self._write_kubeadm(running, params)

    @staticmethod
    def _write_kubeadm(running: _Running, params: KubeadmParameters) -> None:
        if params == running.kubeadm:
            return
        running.kubeadm = params
        server, ca_pem, webhook_ca = running.server.url, running.instance.ca.cert_pem, running.webhook_ca
        running.kubeadm_task = _replaced(
            running.kubeadm_task,
            _behind_services(
                running,
                "kubeadm's phases",
                lambda c: apply_kubeadm_phases(c, server, ca_pem, params, webhook_ca),
            ),
            f"kubeadm-phases-{running.instance.name}",
        )

    async def stop_konnectivity(self, key: str, *, remove_agent: bool = False) -> None:
        async with self._lock(key):
            running = self._running.get(key)
            if running is None:
                return
            await self._stop_proxy(running)
            if remove_agent:
                await self._remove_agent(running)

    @staticmethod
    async def _remove_agent(running: _Running) -> None:
        """The add-on switched off: its objects leave the tenant (those Kamaji labelled)."""
        running.agent = None
        if running.agent_task is not None:
            running.agent_task.cancel()
            running.agent_task = None
        if running.services is not None:
            try:
                await remove_agent(running.services.client)
            except Exception:  # the next reconcile tries again
                log.exception("tenant %s: removing the konnectivity agent failed", running.instance.name)

    @staticmethod
    async def _stop_proxy(running: _Running) -> None:
        if running.proxy is None:
            return
        running.egress.target = NoEgress()
        proxy, running.proxy = running.proxy, None
        running.extra["konnectivity_port"] = proxy.port
        await proxy.stop()

    async def stop(self, key: str) -> None:
        async with self._lock(key):
            await self._stop(key)

    async def _stop(self, key: str) -> None:
        running = self._running.pop(key, None)
        if running is None:
            return
        await self._stop_proxy(running)
        running.stopping.set()
        if running.soot is not None:
            running.soot.close()
        for task in (running.agent_task, running.kubeadm_task, running.rewrite_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if running.services_task is not None:
            # Let a start in progress finish rather than cancel it: an informer cancelled half-way keeps
            # a watch open, and the API server's shutdown would wait for it.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(running.services_task, _SERVICES_START_TIMEOUT)
        if running.services is not None:
            await running.services.stop()
            await running.services.client.close()
        await running.server.stop()
        log.info("tenant %s/%s: API server stopped", running.instance.namespace, running.instance.name)

    def running(self, key: str) -> RunningInstance | None:
        current = self._running.get(key)
        return None if current is None else self._report(current)

    async def purge(self, schema: str, datastore: str = "") -> None:
        if not schema:
            return
        await self.datastore.delete_prefix(f"/{key_prefix(schema)}/")

    async def export_tenant(self, schema: str, datastore: str = "") -> TenantData:
        """Every key of the tenant, and the store's revision (a migration's source)."""
        rows = await self.datastore.range(f"/{key_prefix(schema)}/")
        return TenantData(self.datastore.revision, [(kv.key, kv.value) for kv in rows])

    async def import_tenant(self, schema: str, data: TenantData, *, wipe: bool, datastore: str = "") -> None:
        """Take a migrating tenant's keys (a migration's target); its API server must not run here yet."""
        prefix = f"/{key_prefix(schema)}/"
        if await self.datastore.range(prefix):
            if not wipe:
                raise schema_taken(schema)
            await self.datastore.delete_prefix(prefix)
        await self.datastore.restore([(key, _at_revision(value)) for key, value in data.rows], data.revision)

    async def stop_all(self) -> None:
        for key in list(self._running):
            await self.stop(key)


def _replaced(
    old: asyncio.Task[None] | None, work: Coroutine[Any, Any, None], name: str
) -> asyncio.Task[None]:
    """A newer write of the same objects supersedes one still in progress."""
    if old is not None:
        old.cancel()
    return asyncio.create_task(work, name=name)


def _watched_caches(server: APIServer) -> dict[str, ResourceCache]:
    """The tenant API server's caches of the kinds Kamaji's soot controllers watch, by resource (each
    served at v1)."""
    registry = server.registry
    caches = {}
    for group, plural in WATCHED_KINDS:
        kind = registry.kinds.resource(group, "v1", plural)
        if kind is not None:
            caches[plural] = registry.cache(kind)
    return caches


def _rewrite_soon(running: _Running) -> None:
    """A watched object was deleted or changed: write Kamaji's objects again, once for a burst of changes
    (called from the API server's commit, so it only schedules)."""
    if running.stopping.is_set():
        return
    running.rewrite_again = True
    if running.rewrite_task is None or running.rewrite_task.done():
        running.rewrite_task = asyncio.get_running_loop().create_task(
            _rewrite(running), name=f"soot-{running.instance.name}"
        )


async def _rewrite(running: _Running) -> None:
    """Kamaji's soot controllers' reconcile: the kubeadm phases with the add-ons, and the konnectivity
    agent, as last asked for; after any first write still under way, and again while changes come."""
    while running.rewrite_again and not running.stopping.is_set():
        running.rewrite_again = False
        pending = {t for t in (running.kubeadm_task, running.agent_task) if t is not None and not t.done()}
        if pending:
            await asyncio.wait(pending)
        log.info("tenant %s: writing Kamaji's objects back after a change", running.instance.name)
        await _behind_services(running, "Kamaji's soot controllers", _soot_writes(running))


def _soot_writes(running: _Running) -> Callable[[KubeClient], Awaitable[None]]:
    params, agent = running.kubeadm, running.agent
    server, ca_pem = running.server.url, running.instance.ca.cert_pem

    async def write(client: KubeClient) -> None:
        if params is not None:
            await apply_kubeadm_phases(client, server, ca_pem, params, running.webhook_ca)
        if agent is not None:
            await apply_agent(client, agent)

    return write


async def _behind_services(
    running: _Running, what: str, write: Callable[[KubeClient], Awaitable[None]]
) -> None:
    """What Kamaji writes into a tenant needs the tenant's controller duties' client (the admin's
    rights), which comes up right behind the API server; written as Kamaji's reconciler writes it: tried
    again after a failure, 1 s doubling to 30 s."""
    if running.services_task is not None:
        await asyncio.shield(running.services_task)
    services = running.services
    if services is not None:
        await _until_done(running, what, lambda: write(services.client))


async def _until_done(running: _Running, what: str, attempt: Callable[[], Awaitable[None]]) -> None:
    """Run `attempt` until it succeeds or the tenant stops; after a failure wait 1 s, doubling up to
    30 s (as the kubelet restarts a crashed container, and Kamaji's reconciler requeues)."""
    delay = SERVICES_RESTART_SECONDS
    while not running.stopping.is_set():
        try:
            await attempt()
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("tenant %s: %s failed; again in %.0f s", running.instance.name, what, delay)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(running.stopping.wait(), delay)
        delay = min(delay * 2, SERVICES_RESTART_MAX_SECONDS)


async def _start_services(instance: ControlPlaneInstance, server: APIServer) -> ControlPlaneServices:
    """kube-scheduler and kube-controller-manager beside the API server, as in Kamaji's control-plane pod.
    They run in the API server's process here, so they reach it as its loopback client does (plain HTTP
    on 127.0.0.1 with a token minted in memory), not through two TLS sessions per watch."""
    # A member of system:masters, which the authorizer answers before any RBAC work: the controller duties'
    # writes (pod creates, bindings, status patches) are the lab's hot path.
    url, token = server.loopback("system:kube-controller-manager", ["system:masters"])
    # the CA goes along: the root CA publisher hands it to every namespace (kube-root-ca.crt)
    config = KubeConfig(server=url, token=token, ca_data=instance.ca.cert_pem)
    # The informers that only read take the server's own pod and node objects (inprocesswatch.py).
    client = KubeClient(config, user_agent="kube-controller-manager", in_process=server.in_process_watches)
    # the tenant's CA signs approved CertificateSigningRequests (kube-controller-manager's csrsigning)
    services = ControlPlaneServices(client, signing_ca=instance.ca)
    try:
        await services.start()
    except BaseException:
        with contextlib.suppress(Exception):
            await services.stop()
        await client.close()
        raise
    return services


def _token_verifier(server: APIServer):  # type: ignore[no-untyped-def]
    """The konnectivity server checks agent tokens against its own API server's signing key."""

    async def verify(token: str) -> str | None:
        user = server.signer.verify(token)
        return None if user is None else user.name

    return verify


def _node_lookup(server: APIServer):  # type: ignore[no-untyped-def]
    async def lookup(name: str) -> dict[str, Any] | None:
        nodes = server.kinds.resource("", "v1", "nodes")
        assert nodes is not None
        return server.registry.get_object(nodes, "", name)

    return lookup


def _same_identity(a: ControlPlaneInstance, b: ControlPlaneInstance) -> bool:
    # A port of 0 means "any"; an instance that already listens somewhere satisfies it.
    return (
        a.ca == b.ca
        and a.serving == b.serving
        and a.service_account == b.service_account
        and a.kubelet_client == b.kubelet_client
        and a.schema == b.schema
        and (b.port in (0, a.port) or a.port == 0)
    )
