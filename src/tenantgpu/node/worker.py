"""A simulated worker: registers its Node, renews its Lease, keeps Ready, runs device plugin and kubelet."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import platform
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tenantgpu import __version__
from tenantgpu.gpushare import SharingConfig
from tenantgpu.gpushare import annotations as ann
from tenantgpu.hami.device_plugin import DevicePlugin, GPUSpec
from tenantgpu.hami.install import DEVICE_PLUGIN, MONITOR_PORT
from tenantgpu.klog import ComponentLog
from tenantgpu.kubeclient import ApiError, KubeClient
from tenantgpu.kubeclient.ensure import covers
from tenantgpu.node import nodeconditions, portforward, sandbox
from tenantgpu.node.containerlog import component_of
from tenantgpu.node.kubelet import Kubelet
from tenantgpu.node.kubeletauth import KubeletAuth
from tenantgpu.node.logserver import KubeletServer
from tenantgpu.node.podstatus import rfc3339
from tenantgpu.node.release import FALLBACK_VERSION, KubeletRelease
from tenantgpu.node.vgpumonitor import VGPUMonitor

log = logging.getLogger(__name__)

NODE_LEASE_NAMESPACE = "kube-node-lease"
SIMULATED_ANNOTATION = "tenantgpu.io/simulated"


def _conditions_of(node: dict[str, Any]) -> list[dict[str, Any]]:
    return list((node.get("status") or {}).get("conditions") or [])


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Worker:
    """One worker: `start()` registers and serves; `stop()` stops renewing (the node goes NotReady later).

    `kubeconfig` is a path to a kubeconfig or a ready KubeClient (which the worker then does not close).
    The kubelet is of its API server's release (read from `/version` at start) unless `kubelet_version`
    names another. With `client_ca_pem` its HTTPS endpoint serves only clients with a certificate of that
    CA, authorised by SubjectAccessReviews (kubeadm's kubelet configuration); without it, everyone.
    """

    def __init__(
        self,
        kubeconfig: str | os.PathLike[str] | KubeClient,
        name: str,
        gpus: list[GPUSpec],
        sharing: SharingConfig | None = None,
        *,
        cpu: str = "32",
        memory: str = "256Gi",
        pods: int = 110,
        labels: dict[str, str] | None = None,
        host_ip: str = "127.0.0.1",
        kubelet_port: int = 0,
        lease_duration_seconds: int = 40,
        status_report_seconds: float = 60.0,
        container_start_seconds: float = 0.0,
        kubelet_version: str | None = None,
        runtime_handlers: Iterable[str] | None = None,
        device_plugin_client: KubeClient | None = None,
        component_logs: Mapping[tuple[str, str], ComponentLog] | None = None,
        device_plugin_log: ComponentLog | None = None,
        client_ca_pem: bytes | None = None,
        monitor_port: int | None = None,
    ) -> None:
        if isinstance(kubeconfig, KubeClient):
            self.client, self._owns_client = kubeconfig, False
        else:
            self.client, self._owns_client = KubeClient.from_kubeconfig(Path(kubeconfig)), True
        self.name = name
        self.gpus = list(gpus)
        self.sharing = sharing or SharingConfig()
        self.cpu, self.memory, self.max_pods = cpu, memory, pods
        self.labels = labels or {}
        self.host_ip = host_ip
        self.lease_duration_seconds = lease_duration_seconds
        self.status_report_seconds = status_report_seconds
        # HAMi's device plugin runs as a pod of its own, with its service account's credentials when given.
        self.device_plugin = DevicePlugin(
            device_plugin_client or self.client,
            name,
            self.gpus,
            self.sharing,
            kubelet_client=self.client,
            klog=device_plugin_log,
        )
        # the container runtime's handlers besides its default, which RuntimeClasses name
        self.runtime_handlers = tuple(
            sorted(
                set(
                    sandbox.default_handlers(bool(self.gpus))
                    if runtime_handlers is None
                    else runtime_handlers
                )
            )
        )
        self._kubelet_version = kubelet_version
        self.kubelet = Kubelet(
            self.client,
            name,
            self.sharing,
            self.device_plugin,
            host_ip=host_ip,
            container_start_seconds=container_start_seconds,
            release=KubeletRelease.parse(kubelet_version or FALLBACK_VERSION),
            runtime_handlers=self.runtime_handlers,
            component_logs=component_logs,
        )
        self.server = KubeletServer(
            self._read_log,
            host_ip,
            kubelet_port,
            follow_log=self._follow_log,
            run_command=self.kubelet.exec_in_container,
            read_previous=self._read_previous,
            list_pods=self.kubelet.informer.items,
            port_forward_target=self._port_forward_target,
            auth=None
            if client_ca_pem is None
            else KubeletAuth(name, client_ca_pem, self._review, release=lambda: self.kubelet.release),
        )
        # HAMi's vGPU monitor (the device plugin pod's `vgpu-monitor`), served when a port is given
        self.monitor = VGPUMonitor(name, self.gpus, self.device_plugin, self.kubelet)
        self._monitor_port = monitor_port
        # (component, containerPort) -> where that port of the component's pod is served on this machine:
        # the only ports of the simulated pod network that answer
        self.pod_listeners: dict[tuple[str, int], tuple[str, int]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._boot_id = str(uuid.uuid4())
        self.node_uid: str | None = None

    @property
    def release(self) -> KubeletRelease:
        return self.kubelet.release

    def pod_listener(self, ip: str, port: int) -> tuple[str, int] | None:
        """Where `ip:port` is served when `ip` is one of this node's pods whose component listens there."""
        for record in self.kubelet.pods.values():
            if record.pod_ip == ip and not record.finished:
                pod = self.kubelet.informer.get(record.namespace, record.name)
                return self.pod_listeners.get((component_of(pod), port)) if pod is not None else None
        return None

    def _port_forward_target(self, namespace: str, name: str, uid: str) -> portforward.Target | str | None:
        """A pod of this node as its runtime forwards ports to it: only the ports its component serves
        (`pod_listeners`) answer, as no other process listens in the simulated pods."""
        record = self.kubelet.record_of(namespace, name)
        if record is None or (uid and record.uid != uid):
            return None
        if record.finished or not record.pod_ip:
            return "sandbox container is not running"
        sandbox_id = sandbox.sandbox_id(record.uid)

        async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            pod = self.kubelet.informer.get(namespace, name)
            served = self.pod_listeners.get((component_of(pod), port)) if pod is not None else None
            if served is None or record.finished:
                raise portforward.PortForwardError(sandbox.port_refused(record.uid, port))
            return await asyncio.open_connection(*served)

        return portforward.Target(sandbox_id, connect)

    @property
    def kubelet_port(self) -> int:
        return self.server.port

    def _follow_log(
        self, ns: str, pod: str, container: str | None, tail: int | None, stamps: bool
    ) -> AsyncIterator[str]:
        return self.kubelet.follow_log(ns, pod, container, tail_lines=tail, timestamps=stamps)

    def _read_previous(
        self, ns: str, pod: str, container: str | None, tail: int | None, stamps: bool
    ) -> str | None:
        return self.kubelet.container_log(
            ns, pod, container, tail_lines=tail, timestamps=stamps, previous=True
        )

    async def _review(self, body: dict[str, Any]) -> dict[str, Any]:
        # the kubelet's webhook authorizer asks with the kubelet's own credentials
        answer = await self.client.request(
            "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body
        )
        return dict(answer.get("status") or {})

    def _read_log(
        self, ns: str, pod: str, container: str | None, tail: int | None, stamps: bool
    ) -> str | None:
        return self.kubelet.container_log(ns, pod, container, tail_lines=tail, timestamps=stamps)

    # --- the Node object ----------------------------------------------------------------------

    def _resources(self) -> dict[str, str]:
        base = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": str(self.max_pods),
            "ephemeral-storage": "100Gi",
        }
        base.update(self.device_plugin.resources())
        return base

    def node_status(self, previous: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The status the kubelet posts; `previous` are the Node's conditions now (None: a new node)."""
        resources = self._resources()
        status: dict[str, Any] = {
            "capacity": resources,
            "allocatable": resources,
            "conditions": nodeconditions.kubelet_conditions(previous, now=rfc3339()),
            "addresses": [
                {"type": "InternalIP", "address": self.host_ip},
                {"type": "Hostname", "address": self.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.server.port}},
            "nodeInfo": {
                "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, self.name).hex,
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_URL, self.name)),
                "bootID": self._boot_id,
                "kernelVersion": platform.release(),
                "osImage": f"tenantgpu simulated worker {__version__}",
                "containerRuntimeVersion": f"tenantgpu://{__version__}",
                "kubeletVersion": self.release.version,
                "kubeProxyVersion": self.release.kube_proxy_version,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        }
        if handlers := self.release.runtime_handlers(self.runtime_handlers):
            status["runtimeHandlers"] = handlers
        features = self.release.node_features
        if features:
            status["features"] = features
        return status

    def node_object(self) -> dict[str, Any]:
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
        }
        if self.gpus:
            labels["gpu"] = "on"  # the node selector of HAMi's device plugin DaemonSet
        labels.update(self.labels)
        annotations = {
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            SIMULATED_ANNOTATION: "true",
        }
        if self.device_plugin.devices:
            annotations[ann.NODE_REGISTER] = self.device_plugin.register_annotation()
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": annotations},
            "spec": {},
            "status": self.node_status(),
        }

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self._kubelet_version is None:
            self.kubelet.release = await self._server_release()
        await self.server.start()
        if self._monitor_port is not None:
            await self.monitor.start(self.host_ip, self._monitor_port)
            self.pod_listeners[(DEVICE_PLUGIN, MONITOR_PORT)] = (self.host_ip, self.monitor.port or 0)
        await self.register_node()
        self.device_plugin.log_start()
        await self._renew_lease()
        await self.kubelet.start()
        self._tasks = [
            asyncio.create_task(self._lease_loop(), name=f"lease-{self.name}"),
            asyncio.create_task(self._status_loop(), name=f"node-status-{self.name}"),
            asyncio.create_task(self.device_plugin.run(), name=f"device-plugin-{self.name}"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        await self.kubelet.stop()
        await self.server.stop()
        await self.monitor.stop()
        if self._owns_client:
            await self.client.close()

    async def _server_release(self) -> KubeletRelease:
        """The API server's release, the one a kubelet installed to match it runs."""
        try:
            version = await self.client.request("GET", "/version")
            return KubeletRelease.parse(str(version.get("gitVersion", "")))
        except (ApiError, ValueError) as err:
            log.warning("worker %s: the API server's version is unknown (%s), kubelet %s", self.name, err,
                        FALLBACK_VERSION)  # fmt: skip
            return KubeletRelease.parse(FALLBACK_VERSION)

    async def register_node(self, *, starting: bool = True) -> None:
        """Create the Node, or take over an existing one (a restarted worker keeps its node), and
        record what a kubelet records on its node when it starts (`starting`) and when a condition's
        status changes."""
        body = self.node_object()
        previous: list[dict[str, Any]] | None = None
        try:
            node = await self.client.create("nodes", body)
        except ApiError as err:
            existing = None
            if err.code == 403:
                # A tenant whose writes are limited (Kamaji's writePermissions) refuses the create before
                # the storage could say the Node exists; a worker restarted there takes its Node over.
                existing = await self.client.get_if_found("nodes", self.name)
            if err.reason != "AlreadyExists" and existing is None:
                raise
            meta = {"labels": body["metadata"]["labels"], "annotations": body["metadata"]["annotations"]}
            existing = existing or await self.client.get("nodes", self.name)
            # written only when they differ: an unchanged Node is not an update a limited tenant refuses
            node = (
                existing
                if covers(existing["metadata"], meta)
                else await self.client.patch("nodes", self.name, {"metadata": meta})
            )
            previous = _conditions_of(node)
        self.node_uid = node["metadata"].get("uid")
        # Status on create is not guaranteed to be kept by every API server: post it explicitly.
        status = self.node_status(previous)
        await self.client.patch("nodes", self.name, {"status": status}, subresource="status")
        changed = nodeconditions.transitions(previous, status["conditions"])
        # In a kubelet's order: it starts, its first status sync reports the pressures, the container
        # manager enforces allocatable, and the node turns Ready last.
        if starting:
            await self._record(nodeconditions.STARTING, nodeconditions.STARTING_MESSAGE)
        for event in changed:
            if event not in ("NodeReady", "NodeNotReady"):
                await self._record(event, nodeconditions.status_event_message(self.name, event))
        if starting:
            await self._record(
                nodeconditions.ALLOCATABLE_ENFORCED, nodeconditions.ALLOCATABLE_ENFORCED_MESSAGE
            )
        for event in changed:
            if event in ("NodeReady", "NodeNotReady"):
                await self._record(event, nodeconditions.status_event_message(self.name, event))

    async def _record(self, reason: str, message: str) -> None:
        """A Normal event on this node from its kubelet."""
        await self.kubelet.record_event(
            {}, reason, message, reference=nodeconditions.node_reference(self.name)
        )

    def _lease_body(self, existing: dict[str, Any] | None) -> dict[str, Any]:
        body = existing or {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": NODE_LEASE_NAMESPACE},
        }
        if self.node_uid and not body["metadata"].get("ownerReferences"):
            body["metadata"]["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": self.node_uid}
            ]
        body["spec"] = {
            **(body.get("spec") or {}),
            "holderIdentity": self.name,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "renewTime": _micro_time(),
        }
        return body

    async def _renew_lease(self) -> None:
        try:
            lease = await self.client.get("leases", self.name, NODE_LEASE_NAMESPACE)
        except ApiError as err:
            if err.code != 404:
                raise
            await self.client.create("leases", self._lease_body(None), NODE_LEASE_NAMESPACE)
            return
        await self.client.update("leases", self._lease_body(lease))

    async def _lease_loop(self) -> None:
        interval = self.lease_duration_seconds / 4  # the kubelet renews at 1/4 of the duration
        while True:
            await asyncio.sleep(interval)
            try:
                await self._renew_lease()
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log.warning("worker %s: lease renewal: %s", self.name, err)

    async def _status_loop(self) -> None:
        """Re-post Ready when someone (the node lifecycle controller) changed it, else heartbeat rarely."""
        last_post = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(min(10.0, self.status_report_seconds))
            try:
                node = await self.client.get("nodes", self.name)
                previous = _conditions_of(node)
                ready = next((c.get("status") for c in previous if c.get("type") == "Ready"), None)
                stale = asyncio.get_running_loop().time() - last_post >= self.status_report_seconds
                if ready != "True" or stale:
                    status = self.node_status(previous)
                    await self.client.patch("nodes", self.name, {"status": status}, subresource="status")
                    last_post = asyncio.get_running_loop().time()
                    for event in nodeconditions.transitions(previous, status["conditions"]):
                        await self._record(event, nodeconditions.status_event_message(self.name, event))
            except asyncio.CancelledError:
                raise
            except ApiError as err:
                if err.code == 404:  # the node was deleted: register again, as a kubelet does
                    with contextlib.suppress(Exception):
                        await self.register_node(starting=False)
                else:
                    log.warning("worker %s: node status: %s", self.name, err)
            except Exception as err:
                log.warning("worker %s: node status: %s", self.name, err)
