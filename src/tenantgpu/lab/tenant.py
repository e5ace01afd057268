"""One tenant's data plane in the lab: konnectivity agents and workers that join the tenant's control plane,
and HAMi's scheduler and webhook installed into it — all talking to the tenant API over the wire."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import os
from collections.abc import Callable
from pathlib import Path

from tenantgpu.gpushare import SharingConfig, decode_node_register
from tenantgpu.gpushare import annotations as ann
from tenantgpu.hami.device_plugin import GPUSpec as DeviceGPUSpec
from tenantgpu.hami.install import (
    DEVICE_PLUGIN,
    DEVICE_PLUGIN_ACCOUNT,
    DEVICE_PLUGIN_CONTAINER,
    EXTENDER_CONTAINER,
    METRICS_PORT,
    SCHEDULER,
    SCHEDULER_ACCOUNT,
    WEBHOOK_CONTAINER_PORT,
    install_hami,
    install_identities,
)
from tenantgpu.hami.install import NAMESPACE as HAMI_NAMESPACE
from tenantgpu.hami.install import SERVICE as HAMI_SERVICE
from tenantgpu.hami.scheduler import HamiScheduler
from tenantgpu.hami.webhook import HamiWebhook
from tenantgpu.kamaji.konnectivityagent import AGENT_NAME, kamaji_labels
from tenantgpu.klog import ComponentLog
from tenantgpu.konnectivity import AgentIdentifiers, ProxyAgent
from tenantgpu.konnectivity.agent import DialPolicy, mapped_dial_policy
from tenantgpu.kubeclient import ApiError, KubeClient
from tenantgpu.kubeclient.ensure import read_or_create
from tenantgpu.kubeclient.serviceaccounttoken import ServiceAccountClient
from tenantgpu.lab.control import LabControl, Switch
from tenantgpu.lab.process import Progress, ProgressSink
from tenantgpu.lab.spec import QuotaSpec, TenantSpec, WorkerSpec
from tenantgpu.node.bootstrap import keep_certificate, kept_certificate, request_certificate
from tenantgpu.node.join import bootstrap_client, ca_cert_hash, create_token, discover
from tenantgpu.node.kubelet import POD_NETWORK
from tenantgpu.node.worker import Worker

log = logging.getLogger(__name__)

AGENT_NAMESPACE = "kube-system"
AGENT_SERVICE_ACCOUNT = "konnectivity-agent"
AGENT_AUDIENCE = "system:konnectivity-server"
WEBHOOK_SERVICE_PORT = 443
JOIN_TIMEOUT_SECONDS = 60.0


def device_specs(worker: WorkerSpec) -> list[DeviceGPUSpec]:
    """The worker's cards for its device plugin, with the UUIDs the lab spec declares (given or derived)."""
    uuids = [d.uuid for d in worker.devices()]
    specs: list[DeviceGPUSpec] = []
    for g in worker.gpus:
        mine, uuids = uuids[: g.count], uuids[g.count :]
        specs.append(DeviceGPUSpec(g.type, g.memory, g.count, g.numa, tuple(mine)))
    return specs


class TenantDataPlane:
    """Joins a tenant's workers and installs HAMi; `start()` returns once nodes are Ready and GPUs registered."""

    def __init__(
        self,
        spec: TenantSpec,
        sharing: SharingConfig,
        kubeconfig: Path,
        konnectivity_address: str,
        ca_pem: bytes,
        progress: ProgressSink,
        *,
        kubelet_pki: Callable[[str], Path] | None = None,
    ) -> None:
        self.spec = spec
        self.sharing = sharing
        self.kubeconfig = kubeconfig
        self.konnectivity_address = konnectivity_address
        self.ca_pem = ca_pem
        self.progress = progress
        self.client: KubeClient | None = None
        self.scheduler: HamiScheduler | None = None
        self.webhook: HamiWebhook | None = None
        self.agents: list[ProxyAgent] = []
        self.workers: list[Worker] = []
        self.control: LabControl | None = None
        self.identities: list[ServiceAccountClient] = []
        # Where each worker's kubelet keeps its client certificate; without it the kubelets join with the
        # lab's own (admin) credentials.
        self.kubelet_pki = kubelet_pki
        self.kubelet_clients: list[KubeClient] = []
        self._joining = asyncio.Lock()
        self._bootstrap: KubeClient | None = None

    async def start(self, timeout: float) -> None:
        if not self.spec.workers and not self.spec.quotas:
            return
        self.client = KubeClient.from_kubeconfig(
            self.kubeconfig, user_agent=f"tenantgpu-lab/{self.spec.name}"
        )
        await apply_quotas(self.client, self.spec, self.sharing)
        if not self.spec.workers:
            return
        await self._ensure_agent_account(self.client)
        # The components below act under RBAC, so they join once the API server's post-start hooks have
        # written the default roles (`/readyz`), as kubeadm join and the kubelet wait for a ready server.
        await wait_ready(self.client, timeout)
        # HAMi's components act as the chart's service accounts, under the chart's RBAC, as their pods
        # would with their projected tokens; the lab's own client (the tenant's admin) installs them.
        await install_identities(self.client)
        scheduler_client = await self._identity(SCHEDULER_ACCOUNT).start()
        device_plugin_client = await self._identity(DEVICE_PLUGIN_ACCOUNT).start()
        # HAMi's scheduler and webhook, which the chart runs as the one pod of its Deployment.
        # HAMi's extender (scheduler and webhook) logs to one container's log
        extender_log = ComponentLog()
        # its metrics (the chart's containerPort 9395) answer through the tunnel like the pod's other ports
        self.scheduler = HamiScheduler(
            scheduler_client, self.sharing, klog=extender_log, metrics_host="127.0.0.1", metrics_port=0
        )
        scheduler = self.scheduler
        self.webhook = HamiWebhook(self.sharing, quotas=lambda: scheduler.state.quotas, klog=extender_log)
        await self.webhook.start()
        # Every worker routes the webhook Service to where the webhook listens, as kube-proxy would.
        route = {
            (f"{HAMI_SERVICE}.{HAMI_NAMESPACE}.svc", WEBHOOK_SERVICE_PORT): ("127.0.0.1", self.webhook.port),
        }
        agent_logs = {worker.name: ComponentLog() for worker in self.spec.workers}
        for worker in self.spec.workers:
            agent = ProxyAgent(
                self.konnectivity_address,
                self.ca_pem,
                self._agent_token,
                agent_id=worker.name,
                identifiers=AgentIdentifiers(host=(worker.name,)),
                dial_policy=self._pod_network(mapped_dial_policy(route)),
                klog=agent_logs[worker.name],
            )
            await agent.start()
            self.agents.append(agent)
        kubelets = await asyncio.gather(*(self._kubelet_client(w.name) for w in self.spec.workers))
        if self._bootstrap is not None:  # every new kubelet holds its certificate now
            await self._bootstrap.close()
            self._bootstrap = None
        for worker, kubelet in zip(self.spec.workers, kubelets, strict=True):
            plugin_log = ComponentLog()
            # the containers standing for the components that run here show those components' output
            component_logs = {
                (SCHEDULER, EXTENDER_CONTAINER): extender_log,
                (DEVICE_PLUGIN, DEVICE_PLUGIN_CONTAINER): plugin_log,
                (AGENT_NAME, AGENT_NAME): agent_logs[worker.name],
            }
            node = Worker(
                kubelet,
                worker.name,
                device_specs(worker),
                self.sharing,
                cpu=worker.cpu,
                memory=worker.memory,
                pods=worker.pods,
                labels=dict(worker.labels),
                runtime_handlers=worker.runtime_handlers,
                device_plugin_client=device_plugin_client,
                component_logs=component_logs,
                device_plugin_log=plugin_log,
                # a worker joined the kubeadm way trusts the tenant CA's clients only (the kubelet-config)
                client_ca_pem=self.ca_pem if self.kubelet_pki is not None else None,
                # HAMi's device plugin pod, and its vGPU monitor, run on the GPU nodes only
                monitor_port=0 if worker.gpus else None,
            )
            await node.start()
            self.workers.append(node)
        await self.scheduler.start()
        for node in self.workers:  # the scheduler pod's ports, wherever the Deployment places it
            node.pod_listeners[(SCHEDULER, WEBHOOK_CONTAINER_PORT)] = ("127.0.0.1", self.webhook.port)
            node.pod_listeners[(SCHEDULER, METRICS_PORT)] = ("127.0.0.1", self.scheduler.metrics_port or 0)
        # The chart's Deployment and DaemonSet show HAMi in the cluster; the tenant's controllers make
        # their pods, while the components themselves are the ones started above.
        await install_hami(
            self.client,
            self.webhook.ca_bundle,
            sharing=self.sharing,
            cert=self.webhook.cert,
            runtime_class_name=self.sharing.runtime_class_name,
        )
        async with asyncio.timeout(timeout):
            for agent in self.agents:
                await agent.wait_connected(timeout)
            await self._wait_nodes(self.client)
        # Lets `tenantgpu validate` stop the scheduler or the tunnel agents for a moment (lab control).
        self.control = LabControl(self.client, self._switches())
        await self.control.start()

    def _pod_network(self, services: DialPolicy) -> DialPolicy:
        """What a worker's agent dials: the routed Services, then the ports of the tenant's pods that its
        components serve; any other address of the pod network refuses, as no pod listens there."""

        async def policy(host: str, port: int) -> tuple[str, int]:
            if not _in_pod_network(host):
                return await services(host, port)
            for node in self.workers:
                served = node.pod_listener(host, port)
                if served is not None:
                    return served
            raise ConnectionRefusedError(errno.ECONNREFUSED, os.strerror(errno.ECONNREFUSED))

        return policy

    async def _kubelet_client(self, node: str) -> KubeClient:
        """The worker's kubelet as `system:node:<node>`, with the client certificate it kept, or else the one
        its TLS bootstrap gets with the tenant's bootstrap token (kubeadm join)."""
        assert self.client is not None
        if self.kubelet_pki is None:
            return self.client
        pem = kept_certificate(self.kubelet_pki(node), node, self.ca_pem)
        if pem is None:
            pem = await request_certificate(await self._bootstrap_client(), node, JOIN_TIMEOUT_SECONDS)
            keep_certificate(self.kubelet_pki(node), pem)
        config = self.client.config.with_credentials(client_pem=pem)
        kubelet = KubeClient(config, user_agent=f"kubelet/{node}")
        self.kubelet_clients.append(kubelet)
        return kubelet

    async def _bootstrap_client(self) -> KubeClient:
        """What `kubeadm token create` and `kubeadm join`'s discovery give a new worker: a bootstrap
        token of the tenant, checked against the signed cluster-info, presented to the server it names.
        One token per start serves all of the tenant's new workers."""
        assert self.client is not None
        async with self._joining:
            if self._bootstrap is None:
                token = await create_token(self.client)
                cluster = await discover(
                    self.client.config, token, ca_cert_hash(self.ca_pem), JOIN_TIMEOUT_SECONDS
                )
                self._bootstrap = bootstrap_client(cluster, token)
            return self._bootstrap

    def _identity(self, account: str) -> ServiceAccountClient:
        assert self.client is not None
        identity = ServiceAccountClient(
            self.client, HAMI_NAMESPACE, account, user_agent=f"{account}/{self.spec.name}"
        )
        self.identities.append(identity)
        return identity

    def _switches(self) -> dict[str, Switch]:
        scheduler = self.scheduler
        assert scheduler is not None

        async def agents_down() -> None:
            for agent in self.agents:
                await agent.stop()

        async def agents_up() -> None:
            for agent in self.agents:
                await agent.start()
            for agent in self.agents:
                await agent.wait_connected(10.0)

        return {
            "hami-scheduler": Switch(scheduler.stop, scheduler.start),
            "konnectivity-agent": Switch(agents_down, agents_up),
        }

    async def _agent_token(self) -> str:
        """A fresh token of kube-system/konnectivity-agent for each (re)connect, as a projected token file."""
        assert self.client is not None
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": [AGENT_AUDIENCE], "expirationSeconds": 3600},
        }
        result = await self.client.request(
            "POST",
            f"/api/v1/namespaces/{AGENT_NAMESPACE}/serviceaccounts/{AGENT_SERVICE_ACCOUNT}/token",
            body=body,
        )
        return str(result["status"]["token"])

    async def _ensure_agent_account(self, client: KubeClient) -> None:
        """Kamaji's controller writes this ServiceAccount too, but in the background once the tenant's
        controller duties are up; the agents ask for its tokens as soon as they start, so the operator
        makes sure it is there, as Kamaji writes it (so that Kamaji's write changes nothing)."""
        labels = kamaji_labels(self.spec.name, "konnectivity-sa")
        account = {
            "metadata": {"name": AGENT_SERVICE_ACCOUNT, "namespace": AGENT_NAMESPACE, "labels": labels}
        }
        try:
            await client.create("serviceaccounts", account, AGENT_NAMESPACE)
        except ApiError as err:
            if err.code != 409:
                raise

    async def _wait_nodes(self, client: KubeClient) -> None:
        """Until every worker's Node is Ready and has registered all its GPUs with HAMi (list, then watch)."""
        pending = {w.name: len(w.devices()) for w in self.spec.workers}

        def check(node: dict) -> None:
            name = node["metadata"]["name"]
            gpus = pending.get(name)
            if gpus is not None and _node_ready(node) and _registered_gpus(node) >= gpus:
                del pending[name]
                detail = f"{gpus} GPU{'s' if gpus != 1 else ''}" if gpus else "no GPU"
                self.progress(Progress(f"node {self.spec.name}/{name}", "ready", detail))

        while pending:
            listing = await client.list("nodes")
            for node in listing["items"]:
                check(node)
            if not pending:
                return
            with contextlib.suppress(ApiError, OSError, asyncio.IncompleteReadError):
                async for event in client.watch(
                    "nodes", resource_version=listing["metadata"].get("resourceVersion"), timeout_seconds=30
                ):
                    if event.type in ("ADDED", "MODIFIED"):
                        check(event.object)
                    if not pending:
                        return

    async def stop(self) -> None:
        if self.control is not None:
            with contextlib.suppress(Exception):
                await self.control.stop()
            self.control = None
        for worker in self.workers:
            with contextlib.suppress(Exception):
                await worker.stop()
        self.workers = []
        if self.scheduler is not None:
            with contextlib.suppress(Exception):
                await self.scheduler.stop()
            self.scheduler = None
        if self.webhook is not None:
            await self.webhook.stop()
            self.webhook = None
        for agent in self.agents:
            with contextlib.suppress(Exception):
                await agent.stop()
        self.agents = []
        for kubelet in self.kubelet_clients:
            await kubelet.close()
        self.kubelet_clients = []
        if self._bootstrap is not None:
            await self._bootstrap.close()
            self._bootstrap = None
        for identity in self.identities:
            with contextlib.suppress(Exception):
                await identity.close()
        self.identities = []
        if self.client is not None:
            await self.client.close()
            self.client = None


async def wait_ready(client: KubeClient, timeout: float) -> None:
    """Until the API server's `/readyz` passes."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                await client.request("GET", "/readyz", decode=False)
                return
            except ApiError:
                await asyncio.sleep(READY_POLL_SECONDS)


READY_POLL_SECONDS = 0.05
QUOTA_NAME = "gpu-quota"


def quota_object(quota: QuotaSpec, sharing: SharingConfig) -> dict:
    """A ResourceQuota in HAMi's terms: `limits.<memory resource>` in MiB, `limits.<core resource>` in %."""
    hard: dict[str, str] = {}
    if quota.gpumem is not None:
        hard[f"limits.{sharing.resource_memory_name}"] = str(quota.gpumem)
    if quota.gpucores is not None:
        hard[f"limits.{sharing.resource_core_name}"] = str(quota.gpucores)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": QUOTA_NAME, "namespace": quota.namespace},
        "spec": {"hard": hard},
    }


async def apply_quotas(client: KubeClient, tenant: TenantSpec, sharing: SharingConfig) -> None:
    """The lab file's quotas as ResourceQuota objects (namespaces created as needed); the file wins."""
    for quota in tenant.quotas:
        # read first: a lab resumed with its quotas in place writes nothing (also where writes are limited)
        await read_or_create(client, "namespaces", {"metadata": {"name": quota.namespace}})
        body = quota_object(quota, sharing)
        current, created = await read_or_create(client, "resourcequotas", body)
        if created:
            continue
        if (current.get("spec") or {}).get("hard") != body["spec"]["hard"]:
            current["spec"] = body["spec"]
            await client.update("resourcequotas", current)


def _node_ready(node: dict) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _registered_gpus(node: dict) -> int:
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(ann.NODE_REGISTER)
    if not text:
        return 0
    try:
        return len(decode_node_register(text))
    except ValueError:
        return 0


def _in_pod_network(host: str) -> bool:
    try:
        return ipaddress.ip_address(host) in POD_NETWORK
    except ValueError:
        return False
