"""The simulated kubelet: watches pods bound to its node and runs them through their lifecycle.

Admission calls the device plugin's Allocate for GPU pods (HAMi's env, bind-phase, lock release), then
Pending/ContainerCreating → Running → Succeeded/Failed as the GPU runtime model decides. Deletion is
graceful: containers are stopped, then the pod object is removed with grace period 0, as the real
kubelet's status manager does. Container logs are kept in memory for `kubectl logs` (rebuilt when a
restarted kubelet adopts a running pod).

A container's command (`command` + `args`; see `_command`) runs the simulated programs when it
starts (`nvidia-smi`, `echo`, `sh -c '… && sleep 30'`; see node/programs.py): its output goes to the
log and the container ends when the command does, with its status. The `tenantgpu.io/run-for` and
`gpu-work` annotations, when given, set the run time instead; a command the simulation does not know
runs until deleted.

A container whose command ends is restarted per the pod's restartPolicy (Always, OnFailure), with
the kubelet's CrashLoopBackOff back-off; the run-time annotations and a failing GPU workload end the
pod whatever the policy. Simplifications: init containers complete at once, and probes are not run.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import math
import random
import time
import zlib
from collections.abc import AsyncIterator, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp

from tenantgpu import eager
from tenantgpu.apiserver.sharing import share_workload_object
from tenantgpu.gpushare import SharingConfig, allocate_env, decode_pod_devices, volumes
from tenantgpu.gpushare import annotations as ann
from tenantgpu.hami.device_plugin import (
    AllocateError,
    Allocation,
    DevicePlugin,
    allocate,
    gpu_containers,
    is_binding_pod,
    report_allocation,
)
from tenantgpu.klog import ComponentLog
from tenantgpu.kubeclient import ApiError, Informer, KubeClient
from tenantgpu.node import (
    activedeadline,
    admission,
    containerenv,
    criticalpods,
    podstatus,
    programs,
    resize,
    runtimestatus,
    sandbox,
    volumesources,
)
from tenantgpu.node import gpu_runtime as rt
from tenantgpu.node.containerlog import (
    AnyContainerLog,
    ComponentContainerLog,
    ContainerLog,
    component_of,
    log_stamp,
)
from tenantgpu.node.release import FALLBACK_VERSION, KubeletRelease
from tenantgpu.node.staticpods import MIRROR_POD_ANNOTATION, owned_by_node

log = logging.getLogger(__name__)

_REMOVE_ATTEMPTS = 12  # about 15 s of backoff
# the pod network the kubelets take their pods' addresses from (a /24 of it per node), kubeadm's default
POD_NETWORK_PREFIX = "10.244"
POD_NETWORK = ipaddress.ip_network(f"{POD_NETWORK_PREFIX}.0.0/16")
# A pod whose containers cannot be configured yet (a ConfigMap or Secret they need is missing) is tried
# again after the kubelet's pod-sync back-off: 10 s, plus up to half of it as jitter.
CONFIG_RETRY_SECONDS = 10.0
# A ConfigMap or Secret a volume needs, once read, serves the pods that start in the next seconds.
_MOUNT_OBJECT_SECONDS = 2.0
_MOUNT_OBJECTS_KEPT = 256  # entries before the expired ones are dropped
MIRROR_RECREATE_SECONDS = 0.5  # a deleted mirror pod comes back on the kubelet's next sync, not at once


@dataclass
class PodRecord:
    """What the kubelet knows about one pod it runs."""

    uid: str
    namespace: str
    name: str
    pod_ip: str | None = None
    start_time: str | None = None
    started_at: str | None = None
    task: asyncio.Future[None] | None = None
    terminating: bool = False
    finished: bool = False
    envs: dict[str, dict[str, str]] = field(default_factory=dict)  # container → all it sees (`env`)
    shown_envs: dict[str, dict[str, str]] = field(default_factory=dict)  # … of its spec and HAMi's (its log)
    logs: dict[str, AnyContainerLog] = field(default_factory=dict)
    gpus: dict[str, list[str]] = field(default_factory=dict)  # container → GPU UUIDs
    caps: dict[str, int | None] = field(default_factory=dict)  # container → SM cap
    gpu_used_mib: dict[str, int] = field(default_factory=dict)  # container → what nvidia-smi shows in use
    seq: int = 0  # when the kubelet first saw the pod: the order of `Kubelet.pods`
    previous_logs: dict[str, AnyContainerLog] = field(default_factory=dict)  # container → its last run's log
    # container → its status entry while restarts are supervised (state, lastState, restartCount, ready)
    container_states: dict[str, dict[str, Any]] = field(default_factory=dict)
    # ephemeral container (`kubectl debug`) → its env and its `ephemeralContainerStatuses` entry
    ephemeral_envs: dict[str, dict[str, str]] = field(default_factory=dict)
    ephemeral: dict[str, dict[str, Any]] = field(default_factory=dict)
    ephemeral_tasks: set[asyncio.Task[None]] = field(default_factory=set)
    ephemeral_writes: asyncio.Lock = field(default_factory=asyncio.Lock)
    init_containers: tuple[str, ...] = ()  # their logs are in `logs` too: kept after they complete
    sidecars: tuple[str, ...] = ()  # the init containers with restartPolicy Always: they run with the pod
    # the pod's spec as its containers were created: the resources and identities the runtime reports
    spec: dict[str, Any] = field(default_factory=dict)
    # once admitted: what the pod charges the node (None before, and for a pod refused) and its host ports
    requests: admission.Requests | None = None
    host_ports: list[tuple[str, str, int]] = field(default_factory=list)
    # in-place resize (1.33): the PodResizePending/PodResizeInProgress conditions the pod shows, and
    # whether a resize is being worked on (a spec change meanwhile is looked at when it is done)
    resize_conditions: dict[str, dict[str, Any]] = field(default_factory=dict)
    resizing: bool = False
    resize_again: bool = False
    pending_resize: dict[str, Any] | None = None  # the resources a waiting resize asks for


def _marked_not_ready(pod: dict[str, Any]) -> bool:
    """Ready=False without the kubelet's own reason (ContainersNotReady) while every container is ready:
    the node lifecycle controller's MarkPodsNotReady."""
    status = pod.get("status") or {}
    for condition in status.get("conditions") or ():
        if condition.get("type") == "Ready":
            return (
                condition.get("status") == "False"
                and not condition.get("reason")
                and all(cs.get("ready") for cs in status.get("containerStatuses") or ())
            )
    return False


def _declared_env(container: dict[str, Any]) -> dict[str, str]:
    """The variables a container's spec gives it by value (`env[].value`)."""
    return {e["name"]: str(e.get("value", "")) for e in container.get("env") or [] if "name" in e}


def _container_reference(record: PodRecord, group: str, name: str) -> dict[str, Any]:
    """The involvedObject of an event about one container: the pod, with the container's field path."""
    return {
        "kind": "Pod", "namespace": record.namespace, "name": record.name, "uid": record.uid,
        "apiVersion": "v1", "fieldPath": f"spec.{group}{{{name}}}",
    }  # fmt: skip


def _is_static(pod: Mapping[str, Any]) -> bool:
    """A static pod, seen through its mirror pod (kube's IsStaticPod / IsMirrorPod)."""
    return MIRROR_POD_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def _meta(pod: dict[str, Any]) -> dict[str, Any]:
    return pod.get("metadata") or {}


def _with_resize_conditions(conditions: list[dict[str, Any]], record: PodRecord) -> list[dict[str, Any]]:
    """The pod's conditions with the resize conditions the kubelet holds for it, and no others."""
    kept = [c for c in conditions if c.get("type") not in (resize.PENDING, resize.IN_PROGRESS)]
    return kept + list(record.resize_conditions.values())


class Kubelet:
    """Runs the pods bound to `node_name`; `start()` returns once the pod informer is synced."""

    def __init__(
        self,
        client: KubeClient,
        node_name: str,
        cfg: SharingConfig,
        device_plugin: DevicePlugin,
        *,
        host_ip: str = "127.0.0.1",
        container_start_seconds: float = 0.0,
        release: KubeletRelease | None = None,
        runtime_handlers: Iterable[str] = (sandbox.RUNC,),
        component_logs: Mapping[tuple[str, str], ComponentLog] | None = None,
    ) -> None:
        self.client = client
        # (component, container) → the klog output of a component this process runs, which is the log
        # of the container standing for it (see `component_of`)
        self.component_logs = component_logs or {}
        # The worker sets it from its API server's version before `start()`.
        self.release = release or KubeletRelease.parse(FALLBACK_VERSION)
        self.node_name = node_name
        self.cfg = cfg
        self.device_plugin = device_plugin
        self.host_ip = host_ip
        self.container_start_seconds = container_start_seconds
        self.runtime_handlers = frozenset(runtime_handlers)
        self.config_retry_seconds = CONFIG_RETRY_SECONDS
        # The Services, for the variables containers get (kubelet's serviceLister): the `kubernetes`
        # Service's always, the others of the pod's namespace unless the pod turns service links off.
        self.service_informer = Informer(client, "services")
        self.service_informer.add_handler(self._on_service)
        self._services_seen = False  # whether the Services could be listed (a real cluster may refuse)
        # (namespace, links) → the variables, worked out once until a Service changes
        self._service_envs: dict[tuple[str, bool], dict[str, str]] = {}
        self.pods: dict[str, PodRecord] = {}
        # what the admitted pods charge the node, kept as they come and go (`_recount`): the predicate
        # admission of each new pod then reads totals instead of walking every pod on the node
        self._usage = admission.NodeUsage()
        self._charged: dict[str, tuple[admission.Requests, tuple[admission.HostPort, ...]]] = {}
        self._by_key: dict[tuple[str, str], str] = {}
        self._seen = 0
        # GPU UUID → the pods whose containers use it (by uid), so a GPU's sharers are found without
        # walking every pod on the node
        self._gpu_users: dict[str, dict[str, PodRecord]] = {}
        self._ip_users: dict[str, set[str]] = {}  # pod IP → uids of the pods given it
        self._subnet = zlib.crc32(node_name.encode()) % 250 + 1
        self._next_ip = 2
        self._admit_lock = asyncio.Lock()  # HAMi's Allocate is serialised by a mutex
        self._deferred: set[str] = set()  # uids of pods whose resize waits for room (Deferred)
        self._deadlines: set[str] = set()  # uids of pods with an activeDeadlineSeconds, until they end
        self._deadline_loop: asyncio.Task[None] | None = None
        # (kind, namespace, name) → a ConfigMap or Secret a volume takes files from, and when it was read
        self._mount_objects: dict[tuple[str, str, str], tuple[dict[str, Any], float]] = {}
        # Writes beside the pods' own tasks (re-creating a deleted mirror pod, writing Ready back), which
        # `stop()` cancels.
        self._side_tasks: set[asyncio.Task[None]] = set()
        # Every tenant's system pods repeat the same specs: one instance of equal parts per process.
        self.informer = Informer(
            client, "pods", field_selector=f"spec.nodeName={node_name}", transform=share_workload_object
        )
        self.informer.add_handler(self._on_pod)
        # Its own Node, watched: the device plugin releases HAMi's lock with a fresh resourceVersion.
        self.node_informer = Informer(client, "nodes", field_selector=f"metadata.name={node_name}")

    async def start(self) -> None:
        """Sync with the API; pods already running here are adopted (also after a `stop()`)."""
        self.pods.clear()
        self._usage = admission.NodeUsage()
        self._charged.clear()
        self._by_key.clear()
        self._gpu_users.clear()
        self._ip_users.clear()
        await self._watch_services()
        await self.node_informer.start()
        await self.informer.start()

    async def _watch_services(self) -> None:
        # kube's kubelet waits for its Service informer before it builds an environment. A cluster that
        # refuses this node the list (an informer would retry it for ever) leaves its containers without
        # service variables, and the kubelet runs on.
        try:
            await self.client.list("services")
        except ApiError as err:
            if err.code in (401, 403):
                log.warning("kubelet %s: cannot list Services for containers' env: %s", self.node_name, err)
                self._services_seen = False
                return
        except (OSError, TimeoutError, aiohttp.ClientError) as err:  # the API not up yet: the informer waits
            log.debug("kubelet %s: Services not listed yet: %s", self.node_name, err)
        await self.service_informer.start()
        self._services_seen = True

    def service_env(self, namespace: str, links: bool = True) -> dict[str, str]:
        """The Service variables of a container in `namespace` (kubelet's getServiceEnvVarMap): the
        `kubernetes` Service of `default` always, and with `enableServiceLinks` the Services of the pod's
        own namespace, one of which may be named `kubernetes` too and then wins. Services without a
        cluster IP (headless, ExternalName) give none."""
        if not self._services_seen:
            return {}
        known = self._service_envs.get((namespace, links))
        if known is not None:
            return known
        chosen: dict[str, dict[str, Any]] = {}
        for (ns, name), service in self.service_informer.cache.items():
            if ns == "default" and name == "kubernetes":
                chosen.setdefault(name, service)
            elif ns == namespace and links:
                chosen[name] = service
        env: dict[str, str] = {}
        for service in chosen.values():
            env.update(containerenv.service_variables(service))
        self._service_envs[(namespace, links)] = env
        return env

    def _on_service(self, kind: str, service: dict[str, Any], old: dict[str, Any] | None) -> None:
        self._service_envs.clear()

    async def stop(self) -> None:
        await self.informer.stop()
        await self.node_informer.stop()
        await self.service_informer.stop()
        for side in list(self._side_tasks):
            side.cancel()
        if self._deadline_loop is not None:
            self._deadline_loop.cancel()
        tasks = [r.task for r in self.pods.values() if r.task and not r.task.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # --- logs ---------------------------------------------------------------------------------

    def container_log(
        self,
        namespace: str,
        pod: str,
        container: str | None,
        *,
        tail_lines: int | None = None,
        timestamps: bool = False,
        previous: bool = False,
    ) -> str | None:
        """The log of one container (the only one when `container` is None); None if unknown.
        `previous`: the log of its run before the last restart (None if it has not restarted)."""
        uid = self._by_key.get((namespace, pod))
        record = self.pods.get(uid) if uid else None
        if record is None:
            return None
        if container is None:
            if len(record.envs) != 1:
                return None
            container = next(iter(record.envs))
        clog = (record.previous_logs if previous else record.logs).get(container)
        return None if clog is None else clog.render(tail_lines=tail_lines, timestamps=timestamps)

    def record_of(self, namespace: str, pod: str) -> PodRecord | None:
        """The kubelet's record of a pod it runs here, by name."""
        uid = self._by_key.get((namespace, pod))
        return self.pods.get(uid) if uid else None

    def exec_in_container(
        self, namespace: str, pod: str, container: str, command: list[str]
    ) -> programs.ExecResult | None:
        """Run `command` in a running container of a pod here (`kubectl exec`); None if there is none."""
        uid = self._by_key.get((namespace, pod))
        record = self.pods.get(uid) if uid else None
        if record is None or record.finished or record.started_at is None:
            return None
        if container not in record.envs and "running" not in record.ephemeral.get(container, {}).get(
            "state", {}
        ):
            return None
        return programs.run(command, self._container_view(record, container))

    def _container_view(
        self, record: PodRecord, container: str, gpus: list[rt.GpuView] | None = None
    ) -> programs.ContainerView:
        """What a program in one of the pod's containers sees: the pod's name as hostname, the
        container's env, its GPUs (`gpus` when the caller has them already) and their memory in use."""
        env = record.envs[container] if container in record.envs else record.ephemeral_envs[container]
        if gpus is None:
            gpus = rt.visible_gpus(env, self._device_table())
        return programs.ContainerView(record.name, env, gpus, record.gpu_used_mib.get(container, 0))

    async def follow_log(
        self, namespace: str, pod: str, container: str | None, *, tail_lines: int | None = None,
        timestamps: bool = False, poll_seconds: float = 0.1,
    ) -> AsyncIterator[str]:  # fmt: skip
        """`kubectl logs -f`: what is there, then new lines until the container ends or the pod goes."""
        uid = self._by_key.get((namespace, pod))
        record = self.pods.get(uid) if uid else None
        if record is None:
            return
        if container is None and len(record.envs) == 1:
            container = next(iter(record.envs))
        clog = record.logs.get(container or "")
        if clog is None:
            return
        yield clog.render(tail_lines=tail_lines, timestamps=timestamps)
        sent = clog.count()
        while True:
            if clog.count() > sent:
                fresh = clog.render_from(sent, timestamps=timestamps)
                sent = clog.count()
                yield fresh
            elif (
                record.finished
                or self.pods.get(uid or "") is not record
                or record.logs.get(container or "") is not clog
                or "terminated" in record.ephemeral.get(container or "", {}).get("state", {})
            ):
                return  # the container ended: the pod finished, went, or the container was restarted
            await asyncio.sleep(poll_seconds)

    # --- events -------------------------------------------------------------------------------

    def _on_pod(self, kind: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = _meta(pod)
        uid = meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"
        if (pod.get("spec") or {}).get("nodeName") != self.node_name:
            return
        record = self.pods.get(uid)
        if kind == "DELETED" and _is_static(pod):
            self._side_task(self._recreate_mirror(pod))
        if kind == "DELETED":
            if record is not None:
                if (
                    record.started_at
                    and not record.finished
                    and not record.terminating
                    and not _is_static(pod)
                ):
                    # A force deletion: the object went at once; the kubelet still stops the containers.
                    self._side_task(self._announce_stops(pod, record))
                if record.task and not record.task.done():
                    record.task.cancel()
                for task in list(record.ephemeral_tasks):
                    task.cancel()
                self.pods.pop(uid, None)
                self._recount(record)
                if self._by_key.get((record.namespace, record.name)) == uid:
                    self._by_key.pop((record.namespace, record.name), None)
                self._forget_gpus(record)
                self._deferred.discard(uid)
                self._retry_deferred()
            return
        if activedeadline.deadline_seconds(pod) is not None and (record is None or not record.finished):
            self._track_deadline(uid)
        if record is None:
            phase = (pod.get("status") or {}).get("phase")
            self._seen += 1
            record = PodRecord(uid, meta.get("namespace", ""), meta.get("name", ""), seq=self._seen)
            self.pods[uid] = record
            self._by_key[(record.namespace, record.name)] = uid
            if meta.get("deletionTimestamp"):
                record.terminating = True
                self._charge(record, pod)  # it holds its room until it is gone
                record.task = asyncio.create_task(self._terminate(pod, record))
            elif phase in ("Succeeded", "Failed"):
                self._finish(record)
            elif phase == "Running":
                self._charge(record, pod)  # admitted by this kubelet before it restarted, or static
                record.task = asyncio.create_task(self._adopt(pod, record))
            else:
                # started at once: a GPU pod's Allocate and its report (which frees the node lock for
                # the next pod) go out in this loop turn
                record.task = eager.start(self._run(pod, record))
            return
        if meta.get("deletionTimestamp") and not record.terminating:
            record.terminating = True
            if record.task and not record.task.done():
                record.task.cancel()
            record.task = asyncio.create_task(self._terminate(pod, record))
            return
        if record.started_at and not record.finished and not record.terminating and _marked_not_ready(pod):
            self._side_task(self._restore_ready(record))
        self._start_ephemeral(pod, record)
        if self.release.reports_container_runtime:
            if record.started_at and not record.finished and not record.terminating:
                self._consider_resize(record, pod)
            if self._deferred and (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                self._retry_deferred()

    def _side_task(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    async def _restore_ready(self, record: PodRecord) -> None:
        """The node controller marked a pod this kubelet runs not Ready while the node was silent; the
        kubelet's status manager, finding the API's status unlike its own, writes Ready back."""
        condition = {
            "type": "Ready",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": podstatus.rfc3339(),
        }
        with contextlib.suppress(ApiError):
            await self.client.patch(
                "pods",
                record.name,
                {"status": {"conditions": [condition]}},
                record.namespace,
                patch_type="strategic",
                subresource="status",
                decode=False,
            )

    async def _recreate_mirror(self, pod: dict[str, Any]) -> None:
        """Put a deleted mirror pod back, as the kubelet does while its static pod is configured.

        Not when the node itself is gone: the pod garbage collector removes pods of deleted nodes.
        """
        await asyncio.sleep(MIRROR_RECREATE_SECONDS)
        meta = _meta(pod)
        node = self.node_informer.get(None, self.node_name)
        if node is None:
            return
        kept = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
        fresh = owned_by_node(
            {"apiVersion": "v1", "kind": "Pod", "metadata": kept, "spec": pod.get("spec") or {}},
            self.node_name,
            _meta(node).get("uid", ""),
        )
        try:
            await self.client.create("pods", fresh, meta.get("namespace"))
        except ApiError as err:
            if err.reason != "AlreadyExists":
                log.warning(
                    "kubelet %s: re-creating mirror pod %s: %s", self.node_name, meta.get("name"), err
                )
        except (OSError, aiohttp.ClientError) as err:
            log.warning("kubelet %s: re-creating mirror pod %s: %r", self.node_name, meta.get("name"), err)

    # --- lifecycle ----------------------------------------------------------------------------

    def _allocate_ip(self) -> str:
        """The next free address of the node's /24 (skipping those of pods it runs, e.g. after adoption)."""
        for _ in range(253):
            ip = f"{POD_NETWORK_PREFIX}.{self._subnet}.{self._next_ip}"
            self._next_ip = self._next_ip + 1 if self._next_ip < 254 else 2
            if not self._ip_in_use(ip):
                return ip
        return ip  # more than 253 live pods on one node: addresses are shared, as a full CIDR would fail

    def _ip_in_use(self, ip: str) -> bool:
        """Whether a pod the kubelet runs, not finished, has this address (forgetting those that went)."""
        users = self._ip_users.get(ip)
        if not users:
            return False
        for uid in list(users):
            record = self.pods.get(uid)
            if record is None or record.pod_ip != ip:
                users.discard(uid)
            elif not record.finished:
                return True
        return False

    def _claim_ip(self, record: PodRecord, ip: str | None) -> None:
        record.pod_ip = ip
        if ip:
            self._ip_users.setdefault(ip, set()).add(record.uid)

    async def _patch_status(self, record: PodRecord, status: dict[str, Any]) -> bool:
        status = self.release.pod_status(status)
        if record.resize_conditions and "conditions" in status and status.get("phase") == "Running":
            status = {**status, "conditions": _with_resize_conditions(status["conditions"], record)}
        if self.release.reports_container_runtime and record.spec:
            status = runtimestatus.with_runtime_fields(status, record.spec)
        try:
            await self.client.patch(
                "pods", record.name, {"status": status}, record.namespace, subresource="status", decode=False
            )
            return True
        except ApiError as err:
            if err.code == 404:
                return False
            raise

    async def record_event(
        self,
        involved: dict[str, Any],
        reason: str,
        message: str,
        *,
        warning: bool = False,
        reference: dict[str, Any] | None = None,
    ) -> None:
        """An event from this node's kubelet on a pod (or, with `reference`, on what it names, such as
        the node); best effort, like client-go's recorder."""
        try:
            await self.client.create_event(
                involved, reason=reason, message=message, type="Warning" if warning else "Normal",
                component="kubelet", host=self.node_name, reference=reference, decode=False,
            )  # fmt: skip
        except Exception as err:  # a lost event must not stop the status it tells of from being written
            log.debug("event %s on %s: %s", reason, _meta(involved).get("name"), err)

    def _charge(self, record: PodRecord, pod: dict[str, Any]) -> None:
        record.requests = admission.pod_requests(pod)
        record.host_ports = admission.host_ports(pod)
        self._recount(record)

    def _finish(self, record: PodRecord) -> None:
        record.finished = True  # its room is free from here
        self._recount(record)

    def _recount(self, record: PodRecord) -> None:
        """Keep the node's usage in step with what `record` charges: its requests and host ports while it
        is admitted, not finished, and one of this kubelet's pods."""
        old = self._charged.pop(record.uid, None)
        if old is not None:
            self._usage.remove(*old)
        if record.requests is not None and not record.finished and self.pods.get(record.uid) is record:
            charge = (record.requests, tuple(record.host_ports))
            self._charged[record.uid] = charge
            self._usage.add(*charge)

    async def _admit(self, pod: dict[str, Any], record: PodRecord) -> Allocation | None:
        """kube's admit handlers in their order: the device plugin's Allocate for a GPU pod, then the
        predicate check against the node and the pods admitted before (`admission.admit`). A refused
        pod fails with the handler's reason, and None is returned."""
        allocation = await self._allocate(pod, record)
        if allocation is None:
            return None
        node = self.node_informer.get(None, self.node_name)
        if node is not None:
            rejection = await self._predicate_admit(pod, record, node)
            if rejection is not None:
                await self._reject(pod, record, rejection.reason, rejection.message)
                return None
        self._charge(record, pod)
        return allocation

    async def _predicate_admit(
        self, pod: dict[str, Any], record: PodRecord, node: dict[str, Any]
    ) -> admission.Rejection | None:
        """kube's predicate admit handler with its critical pod handler: the OS checks, then every reason
        the node cannot take the pod beside the pods admitted before; a critical pod refused only for
        want of resources is admitted once the pods `criticalpods` chooses are evicted. Pods already
        being deleted count as using their room but are not chosen: they are on their way out. Nor are
        the mirror pods of the node's own components, which the lab runs outside any container."""
        refused = admission.os_rejection(pod, node)
        if refused is not None:
            return refused
        found = admission.failures(pod, node, self._usage_beside(record), static=_is_static(pod))
        if not found:
            return None
        others = self._admitted_others(record)
        candidates, running = [], []
        for other in others:
            current = self.informer.get(other.namespace, other.name) or {"spec": other.spec}
            if not other.terminating and not _is_static(current):
                candidates.append(other)
                running.append(criticalpods.Running(current))
        outcome = criticalpods.handle_failure(
            criticalpods.Running(pod, static=_is_static(pod)), found, running
        )
        if isinstance(outcome, admission.Rejection):
            return outcome
        for index in outcome.victims:
            await self._preempt(candidates[index], dict(running[index].pod))
        return None

    async def _preempt(self, victim: PodRecord, pod: dict[str, Any]) -> None:
        """killPodNow for a pod evicted to make room for a critical one: a `Preempting` Warning on it, its
        containers stopped, and the status kube's statusFn gives it (Failed, reason `Preempting`, the
        DisruptionTarget condition). The pod object stays, as a Failed pod."""
        condition = podstatus.disruption_condition(
            criticalpods.DISRUPTION_REASON, criticalpods.DISRUPTION_MESSAGE
        )
        await self._fail_running(
            victim,
            pod,
            criticalpods.PREEMPTING,
            criticalpods.PREEMPTED_MESSAGE,
            warning=True,
            condition=condition,
        )

    async def _fail_running(
        self,
        record: PodRecord,
        pod: dict[str, Any],
        reason: str,
        message: str,
        *,
        warning: bool = False,
        condition: dict[str, Any] | None = None,
    ) -> None:
        """The kubelet ends a pod for a reason of its own: an event with the reason and message (Normal, or
        Warning), its containers stopped (`Killing`), and it stays as a Failed pod with the reason and
        message (and the condition, first, if one is given)."""
        await self.record_event(pod, reason, message, warning=warning)
        if record.task is not None and not record.task.done() and record.task is not asyncio.current_task():
            record.task.cancel()
        status = await self._stop_containers(pod, record, phase="Failed", exit_code=137)
        status["reason"], status["message"] = reason, message
        if condition is not None:
            status["conditions"].insert(0, condition)
        await self._patch_status(record, status)

    async def _stop_containers(
        self, pod: dict[str, Any], record: PodRecord, *, phase: str | None = None, exit_code: int = 0
    ) -> dict[str, Any]:
        """Stop the pod's running containers as the kubelet's kill does (`Killing` events); the pod is
        finished from here, and the status that reports them terminated is returned (its phase as given,
        else from the exit codes). A deleted pod's simulated processes end on SIGTERM with status 0; a pod
        the kubelet fails for a reason of its own shows exit code 137 (reason `Error`), as `sleep` and the
        other processes that ignore SIGTERM as a container's PID 1 end, which `kubectl get pods` shows."""
        if record.started_at:
            await self._announce_stops(pod, record)
        codes = {name: exit_code for name in record.envs} or {
            c.get("name", ""): exit_code for c in (pod.get("spec") or {}).get("containers") or []
        }
        line = f"process exited with code {exit_code}" if exit_code else "received SIGTERM, exiting"
        for name in record.logs:
            if name not in record.init_containers:
                record.logs[name].write(line)
        status = podstatus.terminated_status(
            pod,
            self.host_ip,
            record.pod_ip,
            record.start_time or podstatus.rfc3339(),
            record.started_at or "",
            codes,
            phase=phase,
        )
        self._finish(record)
        self._stop_remaining(record, status)
        return status

    def _track_deadline(self, uid: str) -> None:
        """Watch a pod with `activeDeadlineSeconds` in a one-second loop while there is any, as kube's
        sync loop asks its activeDeadlineHandler."""
        self._deadlines.add(uid)
        if self._deadline_loop is None or self._deadline_loop.done():
            self._deadline_loop = asyncio.create_task(self._enforce_deadlines())

    async def _enforce_deadlines(self) -> None:
        while self._deadlines:
            await asyncio.sleep(activedeadline.SYNC_SECONDS)
            now = datetime.now(UTC)
            for uid in list(self._deadlines):
                record = self.pods.get(uid)
                pod = None if record is None else self.informer.get(record.namespace, record.name)
                if record is None or pod is None or record.finished or record.terminating:
                    self._deadlines.discard(uid)
                    continue
                started = record.start_time or (pod.get("status") or {}).get("startTime")
                if activedeadline.past_deadline(pod, started, now):
                    self._deadlines.discard(uid)
                    try:
                        await self._fail_running(record, pod, activedeadline.REASON, activedeadline.MESSAGE)
                    except (ApiError, OSError, aiohttp.ClientError) as err:  # the loop serves other pods too
                        log.warning(
                            "kubelet %s: deadline of %s/%s: %r",
                            self.node_name,
                            record.namespace,
                            record.name,
                            err,
                        )

    async def _reject(self, pod: dict[str, Any], record: PodRecord, reason: str, message: str) -> None:
        """kube's rejectPod: a Warning event from the kubelet, then the Failed status."""
        self._finish(record)
        await self.record_event(pod, reason, message, warning=True)
        await self._patch_status(record, podstatus.rejected_status(reason, message))

    async def _allocate(self, pod: dict[str, Any], record: PodRecord) -> Allocation | None:
        """Run Allocate for a GPU pod; on failure fail the pod and return None."""
        if not gpu_containers(pod, self.cfg):
            return Allocation()
        annotations = _meta(pod).get("annotations") or {}
        if annotations.get(ann.BIND_PHASE) == ann.BIND_PHASE_SUCCESS and annotations.get(ann.VGPU_NODE) == (
            self.node_name
        ):
            return self._allocation_from_annotations(pod)  # allocated before a kubelet restart
        async with self._admit_lock:
            try:
                outcome: Allocation | AllocateError = allocate(pod, self.node_name, self.cfg)
            except AllocateError as err:
                outcome = err
            except ValueError as err:  # an undecodable to-allocate annotation
                outcome = AllocateError(str(err))
            self.device_plugin.log_allocate(pod, outcome)
            # A pod HAMi never bound is not HAMi's to mark; every other outcome is reported on the pod.
            if is_binding_pod(pod, self.node_name):
                node = self.node_informer.get(None, self.node_name)
                plugin = self.device_plugin.client
                try:
                    await report_allocation(plugin, pod, self.node_name, outcome, node=node)
                except ApiError as err:
                    if isinstance(outcome, AllocateError):
                        raise
                    # HAMi's Allocate fails when it cannot write the pod's annotations (its credentials
                    # may not, say): it marks the pod failed if it can, and the kubelet rejects the pod.
                    outcome = AllocateError(err.message or str(err))
                    with contextlib.suppress(ApiError):
                        await report_allocation(plugin, pod, self.node_name, outcome, node=node)
        if isinstance(outcome, AllocateError):
            message = podstatus.admission_failed_message(str(outcome))
            await self._reject(pod, record, podstatus.UNEXPECTED_ADMISSION_ERROR, message)
            return None
        return outcome

    def _allocation_from_annotations(self, pod: dict[str, Any]) -> Allocation:
        """Allocate's result again, from `hami.io/vgpu-devices-allocated` (the env is a pure function of it)."""
        meta = _meta(pod)
        allocated = (meta.get("annotations") or {}).get(ann.DEVICES_ALLOCATED) or ""
        allocation = Allocation()
        try:
            segments = [s for s in decode_pod_devices(allocated) if s]
        except ValueError:
            segments = []
        for (name, _), devices in zip(gpu_containers(pod, self.cfg), segments, strict=False):
            allocation.envs[name] = allocate_env(
                devices, self.cfg, pod_uid=meta.get("uid", ""), container=name
            )
            allocation.devices[name] = devices
        return allocation

    def _runtime(self, record: PodRecord, pod: dict[str, Any]) -> containerenv.PodRuntime:
        node = self.node_informer.get(None, self.node_name) or {}
        links = (pod.get("spec") or {}).get("enableServiceLinks") is not False
        return containerenv.PodRuntime(
            pod_ip=record.pod_ip or "",
            host_ip=self.host_ip,
            allocatable=(node.get("status") or {}).get("allocatable") or {},
            service_env=self.service_env(record.namespace, links),
            minor=self.release.minor,
        )

    async def _sources(self, pod: dict[str, Any]) -> containerenv.Sources:
        """The ConfigMaps and Secrets the pod's containers reference (None for those not found): most
        pods reference none, and then nothing is asked of the API."""
        spec = pod.get("spec") or {}
        config_maps: set[str] = set()
        secrets: set[str] = set()
        for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            more_maps, more_secrets = containerenv.references(container)
            config_maps |= more_maps
            secrets |= more_secrets
        sources = containerenv.Sources()
        namespace = _meta(pod).get("namespace")
        for resource, names, into in (
            ("configmaps", config_maps, sources.config_maps),
            ("secrets", secrets, sources.secrets),
        ):
            for name in sorted(names):
                try:
                    into[name] = await self.client.get(resource, name, namespace)
                except ApiError as err:
                    if err.code != 404:
                        raise containerenv.ContainerConfigError(err.message) from err
                    into[name] = None
                except OSError as err:  # the API out of reach: tried again after the back-off
                    raise containerenv.ContainerConfigError(str(err)) from err
        return sources

    def _environments(
        self,
        pod: dict[str, Any],
        record: PodRecord,
        sources: containerenv.Sources | None = None,
        *,
        lenient: bool = False,
    ) -> dict[str, containerenv.Environment]:
        """Each container's environment, init containers first; ContainerConfigError names the first that
        fails. `lenient` is for containers that run already (a kubelet restart, `kubectl debug`): ephemeral
        containers are included, and one whose references are gone keeps the values of its spec."""
        spec = pod.get("spec") or {}
        runtime = self._runtime(record, pod)
        built: dict[str, containerenv.Environment] = {}
        groups = ("initContainers", "containers", *(("ephemeralContainers",) if lenient else ()))
        for group in groups:
            for container in spec.get(group) or []:
                name = container.get("name", "")
                try:
                    built[name] = containerenv.build(
                        pod, container, runtime, sources or containerenv.Sources()
                    )
                except containerenv.ContainerConfigError as err:
                    if not lenient:
                        err.container = (group, name)
                        raise
                    declared = _declared_env(container)
                    built[name] = containerenv.Environment({**declared, **runtime.service_env}, declared)
        return built

    def _full_env(
        self, record: PodRecord, hami: dict[str, str], env: containerenv.Environment
    ) -> dict[str, str]:
        # The runtime sets HOSTNAME; the device plugin's variables come before the container's own, which
        # win on a clash, as the kubelet hands them to the runtime.
        return {"HOSTNAME": record.name, **hami, **env.variables}

    def _prepare_containers(
        self,
        pod: dict[str, Any],
        record: PodRecord,
        allocation: Allocation,
        built: dict[str, containerenv.Environment] | None = None,
    ) -> None:
        """Each container's environment (`built`; by default from the pod alone), GPUs and log."""
        if built is None:
            built = self._environments(pod, record, lenient=True)
        record.spec = pod.get("spec") or {}
        inits = record.spec.get("initContainers") or []
        record.init_containers = tuple(c.get("name", "") for c in inits)
        record.sidecars = tuple(c.get("name", "") for c in inits if podstatus.is_sidecar(c))
        for container in inits:
            self._log_init_container(record, container, allocation, built)
        for container in (pod.get("spec") or {}).get("containers") or []:
            name = container.get("name", "")
            hami = allocation.envs.get(name, {})
            record.shown_envs[name] = {**hami, **built[name].declared}
            env = record.envs[name] = self._full_env(record, hami, built[name])
            record.gpus[name] = [d.uuid for d in allocation.devices.get(name, [])]
            record.caps[name] = rt.sm_limit(env) if record.gpus[name] else None
            record.logs.setdefault(name, ContainerLog())
            for uuid in record.gpus[name]:
                self._gpu_users.setdefault(uuid, {})[record.uid] = record

    def _log_init_container(
        self,
        record: PodRecord,
        container: dict[str, Any],
        allocation: Allocation,
        built: dict[str, containerenv.Environment],
    ) -> None:
        """An init container completes at once (exit 0) in the simulation, but its log stays readable, as a
        kubelet keeps it: its environment (with HAMi's for a GPU init container) and its command's output.
        A sidecar's log stays open: it runs until the pod ends."""
        name = container.get("name", "")
        if name in record.logs:
            return
        out = record.logs[name] = ContainerLog()
        hami = allocation.envs.get(name, {})
        env = self._full_env(record, hami, built[name])
        gpus = rt.visible_gpus(env, self._device_table())
        if podstatus.is_sidecar(container) and allocation.devices.get(name):
            # a GPU sidecar runs beside the app containers, so it takes its part of their cards' compute
            record.gpus[name] = [d.uuid for d in allocation.devices[name]]
            record.caps[name] = rt.sm_limit(env)
            for uuid in record.gpus[name]:
                self._gpu_users.setdefault(uuid, {})[record.uid] = record
        now = log_stamp()
        out.write(f"tenantgpu simulated init container {name} on node {self.node_name}", now)
        out.write("environment:", now)
        for line in rt.container_env_lines({**hami, **built[name].declared}):
            out.write(f"  {line}", now)
        command = containerenv.expanded_command(container, env)
        main = programs.main_command(command, programs.ContainerView(record.name, env, gpus, 0))
        if main is not None:
            out.command(command, main.output, now)
        if not podstatus.is_sidecar(container):
            out.write("process exited with code 0", now)

    def _forget_gpus(self, record: PodRecord) -> None:
        for uuids in record.gpus.values():
            for uuid in uuids:
                users = self._gpu_users.get(uuid)
                if users is not None and users.get(record.uid) is record:
                    del users[record.uid]

    def _device_table(self) -> dict[str, tuple[str, int]]:
        return {d.id: (d.type, d.devmem) for d in self.device_plugin.devices}

    def _share(self, record: PodRecord, container: str) -> float:
        """The container's compute share on its busiest GPU, given the other running containers there."""
        best = 1.0
        for uuid in record.gpus.get(container, []):
            caps: dict[str, int | None] = {}
            # the pods using this GPU, in the order of self.pods (the shares' float sums depend on it)
            users = sorted(self._gpu_users.get(uuid, {}).values(), key=lambda r: r.seq)
            for other in users:
                if self.pods.get(other.uid) is not other:
                    continue
                if other is not record and (other.finished or other.terminating or other.started_at is None):
                    continue
                for cname, uuids in other.gpus.items():
                    if uuid in uuids:
                        caps[f"{other.uid}/{cname}"] = other.caps.get(cname)
            caps[f"{record.uid}/{container}"] = record.caps.get(container)
            best = min(best, rt.compute_shares(caps)[f"{record.uid}/{container}"])
        return best

    async def _run(self, pod: dict[str, Any], record: PodRecord) -> None:
        try:
            allocation = await self._admit(pod, record)
            if allocation is None:
                return
            creating = podstatus.creating_status(pod, self.host_ip)
            record.start_time = creating["startTime"]
            if not await self._patch_status(record, creating):
                return
            await self._mount_volumes(pod, record)
            await self._pull_secrets(pod, record)
            if not await self._create_sandbox(pod, record):
                return
            if self.container_start_seconds:
                await asyncio.sleep(self.container_start_seconds)
            if (pod.get("spec") or {}).get("hostNetwork"):
                record.pod_ip = self.host_ip  # in the node's network namespace: the node's address
            else:
                self._claim_ip(record, self._allocate_ip())
            configured = await self._configure(pod, record)
            if configured is None:
                return
            pod, built = configured
            self._prepare_containers(pod, record, allocation, built)
            running = podstatus.running_status(pod, self.host_ip, record.pod_ip, record.start_time)
            record.started_at = (
                running["containerStatuses"][0]["state"]["running"]["startedAt"]
                if running["containerStatuses"]
                else record.start_time
            )
            if not await self._patch_status(record, running):
                return
            # `kubectl debug` may have added a container while the pod was starting
            self._start_ephemeral(self.informer.get(record.namespace, record.name) or pod, record)
            await self._workload(pod, record, elapsed=0.0)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("kubelet %s: pod %s/%s", self.node_name, record.namespace, record.name)

    async def _create_sandbox(self, pod: dict[str, Any], record: PodRecord) -> bool:
        """kube's createPodSandbox: the pod's RuntimeClass gives the runtime handler, which this node's
        runtime must have. Until both hold the pod stays in ContainerCreating with a Warning
        `FailedCreatePodSandBox` per attempt, tried again after the pod-sync back-off; False when the pod
        is deleted meanwhile. The class is read when a pod names one (a real kubelet keeps an informer;
        a GET costs a pod without a class nothing)."""
        while (error := await self._sandbox_error(pod)) is not None:
            await self.record_event(
                pod, sandbox.FAILED_CREATE_POD_SANDBOX, sandbox.failed_message(error), warning=True
            )
            await asyncio.sleep(self.config_retry_seconds * (1 + random.random() / 2))
            current = self.informer.get(record.namespace, record.name)
            if current is None or record.terminating or _meta(current).get("uid") != record.uid:
                return False
            pod = current
        return True

    async def _sandbox_error(self, pod: dict[str, Any]) -> str | None:
        name = (pod.get("spec") or {}).get("runtimeClassName") or ""
        if not name:
            return None
        try:
            runtime_class = await self.client.get("runtimeclasses", name)
        except ApiError as err:
            if err.code == 404:
                return sandbox.runtime_class_not_found(name)
            return sandbox.lookup_failed(name, err.message or err.reason)
        except (OSError, aiohttp.ClientError) as err:
            return sandbox.lookup_failed(name, str(err))
        return sandbox.handler_error(str(runtime_class.get("handler") or ""), self.runtime_handlers)

    async def _mount_volumes(self, pod: dict[str, Any], record: PodRecord) -> None:
        """kube's WaitForAttachAndMount: first every claim the pod uses must be bound (`_claims_ready`), then
        each volume that takes files from a ConfigMap or Secret must be set up. Until then the pod stays in
        ContainerCreating, with a Warning `FailedMount` per such volume and attempt, retried with the volume
        manager's back-off (a deleted pod's task is cancelled meanwhile)."""
        attempt = 0
        while not await self._claims_ready(pod, record):
            attempt += 1
            await asyncio.sleep(volumesources.retry_delay(attempt))
        needs = volumesources.volume_needs(pod.get("spec") or {})
        attempt = 0
        while needs:
            try:
                found: dict[tuple[str, str], dict[str, Any] | None] = {}
                for volume in needs:
                    for source in volume.sources:
                        if (source.kind, source.name) not in found:
                            found[source.kind, source.name] = await self._mount_object(
                                source.kind, record.namespace, source.name
                            )
                failing = [
                    (volume.volume, error)
                    for volume in needs
                    if (error := volumesources.setup_error(volume, lambda k, n, f=found: f.get((k, n))))
                    is not None
                ]
            except (ApiError, OSError, aiohttp.ClientError) as err:
                failing = [(volume.volume, str(err)) for volume in needs]
            if not failing:
                return
            attempt += 1
            for volume_name, error in failing:
                await self.record_event(
                    pod,
                    volumesources.FAILED_MOUNT,
                    volumesources.failed_mount_message(volume_name, error),
                    warning=True,
                )
            await asyncio.sleep(volumesources.retry_delay(attempt))

    async def _claims_ready(self, pod: dict[str, Any], record: PodRecord) -> bool:
        """kube's desired-state populator for `persistentVolumeClaim` volumes: each claim must exist and
        be bound to a volume whose claimRef names it. Until then the pod waits in ContainerCreating; kube
        1.33 records no event for it (the scheduler binds no pod whose claims are not bound, so only a
        pod given a nodeName directly meets this)."""
        for name in volumes.pod_claim_names(pod):
            try:
                claim = await self.client.get("persistentvolumeclaims", name, record.namespace)
                volume_name = (claim.get("spec") or {}).get("volumeName") or ""
                if not volume_name:
                    return False
                volume = await self.client.get("persistentvolumes", volume_name)
            except (ApiError, OSError, aiohttp.ClientError):
                return False
            if not volumes.is_bound_to(volume, claim) or not (
                (volume.get("spec") or {}).get("claimRef") or {}
            ).get("uid"):
                return False
        return True

    async def _pull_secrets(self, pod: dict[str, Any], record: PodRecord) -> None:
        """kube's getPullSecretsForPod: the pod's `imagePullSecrets` are looked up before its images are
        pulled; those missing are named in a Warning, and the pod starts all the same (the simulated
        images need no credentials)."""
        missing = []
        for reference in (pod.get("spec") or {}).get("imagePullSecrets") or ():
            name = reference.get("name") if isinstance(reference, dict) else None
            if not name:
                continue  # validation lets empty names through; kube skips them without a warning
            try:
                found = await self._mount_object("secret", record.namespace, name)
            except (ApiError, OSError, aiohttp.ClientError):
                found = None
            if found is None:
                missing.append(name)
        if missing:
            await self.record_event(
                pod,
                "FailedToRetrieveImagePullSecret",
                f"Unable to retrieve some image pull secrets ({', '.join(missing)}); attempting to pull the "
                "image may not succeed.",
                warning=True,
            )

    async def _mount_object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The ConfigMap or Secret, None when there is none. What was found is used again for a couple of
        seconds, so that the pods of a burst do not each ask for their namespace's `kube-root-ca.crt`
        (kube's kubelet watches each object its pods reference for the same reason); what was missing
        is asked for again at once."""
        key = (kind, namespace, name)
        now = time.monotonic()
        cached = self._mount_objects.get(key)
        if cached is not None and now - cached[1] < _MOUNT_OBJECT_SECONDS:
            return cached[0]
        try:
            found = await self.client.get("configmaps" if kind == "configmap" else "secrets", name, namespace)
        except ApiError as err:
            if err.code != 404:
                raise
            self._mount_objects.pop(key, None)
            return None
        if len(self._mount_objects) >= _MOUNT_OBJECTS_KEPT:
            self._mount_objects = {
                k: v for k, v in self._mount_objects.items() if now - v[1] < _MOUNT_OBJECT_SECONDS
            }
        self._mount_objects[key] = (found, now)
        return found

    async def _configure(
        self, pod: dict[str, Any], record: PodRecord
    ) -> tuple[dict[str, Any], dict[str, containerenv.Environment]] | None:
        """The containers' environments once the ConfigMaps and Secrets they need are there. Until then
        the container waits in CreateContainerConfigError with kube's message and a `Failed` event, and
        the pod is tried again after the back-off; None when it is deleted meanwhile."""
        written = ""
        while True:
            try:
                built = self._environments(pod, record, await self._sources(pod))
            except containerenv.ContainerConfigError as err:
                message, failed = str(err), err.container
            else:
                for env in built.values():
                    for kind, source, keys in env.skipped:
                        await self.record_event(pod, "InvalidEnvironmentVariableNames", (
                            f"Keys [{', '.join(keys)}] from the EnvFrom {kind} {source} were skipped since "
                            "they are considered invalid environment variable names."), warning=True)  # fmt: skip
                return pod, built
            group, container = failed
            reference = _container_reference(record, group, container)
            await self.record_event(pod, "Failed", f"Error: {message}", warning=True, reference=reference)
            if written != f"{failed}{message}":  # the status stays as it is while the reason does
                status = podstatus.config_error_status(
                    pod, self.host_ip, record.pod_ip or "", record.start_time or "", failed, message
                )
                if not await self._patch_status(record, status):
                    return None
                written = f"{failed}{message}"
            await asyncio.sleep(self.config_retry_seconds * (1 + random.random() / 2))
            current = self.informer.get(record.namespace, record.name)
            if current is None or record.terminating or _meta(current).get("uid") != record.uid:
                return None
            pod = current

    async def _adopt(self, pod: dict[str, Any], record: PodRecord) -> None:
        """Pick up a pod that was Running before this kubelet (re)started: rebuild env and timers."""
        status = pod.get("status") or {}
        self._claim_ip(record, status.get("podIP"))
        record.start_time = status.get("startTime")
        started = None
        for cs in status.get("containerStatuses") or []:
            started = ((cs.get("state") or {}).get("running") or {}).get("startedAt") or started
        record.started_at = started or record.start_time
        try:
            sources = await self._sources(pod)
        except containerenv.ContainerConfigError:
            sources = None
        built = self._environments(pod, record, sources, lenient=True)
        self._prepare_containers(pod, record, self._allocation_from_annotations(pod), built)
        if self.release.reports_container_runtime:
            # what was allocated before the restart, and the resize it was working on
            allocated = {
                name: resources
                for name, resources in resize.allocated_from_status(pod).items()
                if name in resize.resizable(record.spec)
            }
            record.spec = resize.with_resources(record.spec, allocated)
            record.requests = admission.pod_requests({"spec": record.spec})
            self._recount(record)
            record.resize_conditions = {
                c["type"]: c
                for c in status.get("conditions") or ()
                if c.get("type") in (resize.PENDING, resize.IN_PROGRESS)
            }
            self._consider_resize(record, pod)
        self._adopt_ephemeral(pod, record)
        self._start_ephemeral(pod, record)  # added while the kubelet was down
        if _marked_not_ready(pod):  # by the node controller while this kubelet was away
            await self._restore_ready(record)
        elapsed = 0.0
        if record.started_at:
            begun = datetime.fromisoformat(record.started_at.replace("Z", "+00:00"))
            elapsed = max(0.0, (datetime.now(UTC) - begun).total_seconds())
        try:
            await self._workload(pod, record, elapsed=elapsed, adopted=True)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("kubelet %s: adopting %s/%s", self.node_name, record.namespace, record.name)

    async def _workload(
        self, pod: dict[str, Any], record: PodRecord, *, elapsed: float, adopted: bool = False
    ) -> None:
        specs = {c.get("name", ""): c for c in (pod.get("spec") or {}).get("containers") or []}
        # container → (the seconds it runs, None for until deleted; the status it exits with)
        fates: dict[str, tuple[float | None, int]] = {}
        by_command: dict[str, bool] = {}
        for name in record.envs:
            runs_for, code, by_command[name] = self._start_container(pod, record, name, adopted=adopted)
            fates[name] = (runs_for, code)
        policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
        if (
            policy != "Never"
            and fates
            and all(by_command.values())
            and any(runs_for is not None for runs_for, _ in fates.values())
        ):
            await self._supervise(pod, record, fates, policy, elapsed, specs)
            return
        if any(code and not runs_for for runs_for, code in fates.values()):
            pass  # a container that failed at start (a CUDA OOM, a command's status) ends the pod at once
        elif any(runs_for is None for runs_for, _ in fates.values()) or not fates:
            await asyncio.Event().wait()  # runs until deleted
        else:
            await asyncio.sleep(max(0.0, max(runs_for or 0.0 for runs_for, _ in fates.values()) - elapsed))
        codes = {name: code for name, (_, code) in fates.items()}
        for name, code in codes.items():
            record.logs[name].write(f"process exited with code {code}")
        status = podstatus.terminated_status(
            pod, self.host_ip, record.pod_ip, record.start_time or "", record.started_at or "", codes
        )
        self._finish(record)
        self._stop_remaining(record, status)
        await self._patch_status(record, status)

    def _start_container(
        self, pod: dict[str, Any], record: PodRecord, name: str, *, adopted: bool = False
    ) -> tuple[float | None, int, bool]:
        """Write a container's start-up output and run its command. Returns how long it runs (None:
        until deleted), the status it exits with, and whether its command decides that end (rather
        than the run-time annotations or a failed GPU workload, which end the pod whatever its
        restartPolicy, as the issue's `tenantgpu.io/run-for` has it)."""
        component = self.component_logs.get((component_of(pod), name)) if self.component_logs else None
        if component is not None:
            # the component runs in this process already: the container's log is its output, and the
            # container runs until deleted, as the component's process would
            record.logs[name] = ComponentContainerLog(component)
            return None, 0, False
        annotations = _meta(pod).get("annotations") or {}
        spec = next((c for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name") == name), {})
        env = record.envs[name]
        gpus = rt.visible_gpus(env, self._device_table())
        plan = rt.plan_workload(annotations, env, gpus, self._share(record, name))
        out = record.logs[name]
        now = log_stamp()  # the container's start-up output is written at one instant
        if adopted:  # logs live in memory; env and nvidia-smi are deterministic, so rebuild them
            out.write("(log rebuilt after a kubelet restart)", now)
        out.write(f"tenantgpu simulated container {name} on node {self.node_name}", now)
        out.write("environment:", now)
        for line in rt.container_env_lines(record.shown_envs.get(name, env)):
            out.write(f"  {line}", now)
        if gpus:
            out.write("$ nvidia-smi", now)
            used = int(float(annotations.get(rt.GPU_MEMORY_USED, "0") or 0))
            record.gpu_used_mib[name] = 0 if plan.fails else used
            out.write(rt.nvidia_smi(gpus, used_mib=record.gpu_used_mib[name]), now)
        for line in plan.log_lines:
            out.write(line, now)
        runs_for, code = plan.runs_for, plan.exit_code
        command = containerenv.expanded_command(spec, env)
        main = (
            None if plan.fails else programs.main_command(command, self._container_view(record, name, gpus))
        )
        if main is not None:
            out.command(command, main.output, now)
            code = main.output.exit_code
            if not plan.timed:
                runs_for = None if math.isinf(main.runs_for) else main.runs_for
        if runs_for is None:
            out.write("running until deleted", now)
        return runs_for, code, main is not None and not plan.timed

    async def _supervise(
        self,
        pod: dict[str, Any],
        record: PodRecord,
        fates: dict[str, tuple[float | None, int]],
        policy: str,
        elapsed: float,
        specs: dict[str, dict[str, Any]],
    ) -> None:
        """restartPolicy Always, or OnFailure: a container whose command ends is started again, as the
        kubelet does: at once the first time, then after a back-off of 10 s doubling up to 5 minutes,
        waiting meanwhile in CrashLoopBackOff. Under OnFailure a container that exits 0 stays
        terminated, and the pod Succeeds once all have."""
        meta = _meta(pod)
        counts = {
            cs.get("name", ""): int(cs.get("restartCount") or 0)
            for cs in (pod.get("status") or {}).get("containerStatuses") or []
        }
        done: dict[str, int] = {}

        async def run(name: str) -> None:
            runs_for, code = fates[name]
            started = record.started_at or podstatus.rfc3339()
            wait = (runs_for or 0.0) - elapsed
            restarts = counts.get(name, 0)
            while True:
                if runs_for is None:
                    await asyncio.Event().wait()
                await asyncio.sleep(max(0.0, wait))
                record.logs[name].write(f"process exited with code {code}")
                last = podstatus.terminated_state(code, started, podstatus.container_id(record.uid, name))
                if policy == "OnFailure" and code == 0:
                    done[name] = code
                    record.container_states[name] = podstatus.container_entry(
                        specs[name], record.uid, state=last, restarts=restarts
                    )
                    if len(done) < len(fates):
                        await self._patch_supervised(pod, record)
                    return
                delay = 0.0 if restarts == 0 else min(10.0 * 2 ** (restarts - 1), 300.0)
                if delay:
                    who = f"{meta.get('name')}_{meta.get('namespace')}({record.uid})"  # kube's format.Pod
                    await self.record_event(
                        pod,
                        "BackOff",
                        f"Back-off restarting failed container {name} in pod {who}",
                        warning=True,
                        reference=_container_reference(record, "containers", name),
                    )
                    message = f"back-off {int(delay)}s restarting failed container={name} pod={who}"
                    waiting = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
                    record.container_states[name] = podstatus.container_entry(
                        specs[name], record.uid, state=waiting, last=last, restarts=restarts
                    )
                    await self._patch_supervised(pod, record)
                    await asyncio.sleep(delay)
                restarts += 1
                record.previous_logs[name] = record.logs[name]
                record.logs[name] = ContainerLog()
                runs_for, code, _ = self._start_container(pod, record, name)
                started, wait = podstatus.rfc3339(), runs_for or 0.0
                running = {"running": {"startedAt": started}}
                record.container_states[name] = podstatus.container_entry(
                    specs[name], record.uid, state=running, last=last, restarts=restarts
                )
                await self._patch_supervised(pod, record)

        await asyncio.gather(*(run(name) for name in fates))
        status = podstatus.terminated_status(
            pod, self.host_ip, record.pod_ip, record.start_time or "", record.started_at or "", done
        )
        for entry in status["containerStatuses"]:
            entry["restartCount"] = record.container_states.get(entry["name"], {}).get("restartCount", 0)
        self._finish(record)
        self._stop_remaining(record, status)
        await self._patch_status(record, status)

    async def _patch_supervised(self, pod: dict[str, Any], record: PodRecord) -> None:
        """The pod's status from each container's current entry (running ones as they started)."""
        status = podstatus.running_status(pod, self.host_ip, record.pod_ip or "", record.start_time or "")
        entries = status["containerStatuses"]
        for i, entry in enumerate(entries):
            current = record.container_states.get(entry["name"])
            if current is not None:
                entries[i] = current
            elif record.started_at:
                entry["state"]["running"]["startedAt"] = record.started_at
        podstatus.set_readiness(status, [e["name"] for e in entries if not e.get("ready")])
        await self._patch_status(record, status)

    # --- in-place resize (1.33) -----------------------------------------------------------------

    def _consider_resize(self, record: PodRecord, pod: dict[str, Any]) -> None:
        """Start working on a running pod whose spec asks for other resources than allocated (or whose
        resize waits while the spec went back to what it has)."""
        if not record.spec:
            return
        wanted = resize.resizable(pod.get("spec") or {})
        if resize.same(wanted, resize.resizable(record.spec)):
            if resize.PENDING not in record.resize_conditions:
                return
        elif record.pending_resize is not None and resize.same(wanted, record.pending_resize):
            return  # judged already: it waits for room (`_retry_deferred`) or for another spec
        if record.resizing:
            record.resize_again = True
            return
        record.resizing = True
        self._side_task(self._resize(record))

    def _retry_deferred(self) -> None:
        """Another pod left: the resizes that waited for room are tried again."""
        for uid in list(self._deferred):
            record = self.pods.get(uid)
            pod = self.informer.get(record.namespace, record.name) if record is not None else None
            if record is None or pod is None:
                self._deferred.discard(uid)
            elif not record.resizing:
                record.resizing = True
                self._side_task(self._resize(record))

    def _usage_beside(self, record: PodRecord) -> admission.NodeUsage:
        """What the other admitted pods charge the node: the running totals, less `record`'s own charge."""
        charged = self._charged.get(record.uid)
        return self._usage if charged is None else self._usage.without(*charged)

    def _admitted_others(self, record: PodRecord) -> list[PodRecord]:
        return [
            r for r in self.pods.values() if r is not record and r.requests is not None and not r.finished
        ]

    async def _resize(self, record: PodRecord) -> None:
        """kube's handlePodResourcesResize: allocate the new resources when the node has room for them,
        else show why the resize waits; then actuate it."""
        try:
            while True:
                record.resize_again = False
                pod = self.informer.get(record.namespace, record.name)
                if (
                    pod is None
                    or record.finished
                    or record.terminating
                    or _meta(pod).get("uid") != record.uid
                ):
                    return
                wanted = resize.resizable(pod.get("spec") or {})
                now = podstatus.rfc3339()
                if resize.same(wanted, resize.resizable(record.spec)):
                    self._deferred.discard(record.uid)
                    record.pending_resize = None
                    if record.resize_conditions:
                        record.resize_conditions = {}
                        await self._write_resize(record, None)
                else:
                    node = self.node_informer.get(None, self.node_name)
                    target = {**pod, "spec": resize.with_resources(record.spec, wanted)}
                    waits = None if node is None else resize.verdict(target, node, self._usage_beside(record))
                    if waits is not None:
                        record.pending_resize = wanted
                        if waits.reason == resize.DEFERRED:
                            self._deferred.add(record.uid)
                        old = record.resize_conditions.get(resize.PENDING)
                        record.resize_conditions = {
                            resize.PENDING: resize.condition(resize.PENDING, now, waits, old)
                        }
                        await self._write_resize(record, None)
                    else:
                        self._deferred.discard(record.uid)
                        record.pending_resize = None
                        await self._actuate(record, pod, wanted, now)
                if not record.resize_again:
                    return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("kubelet %s: resizing %s/%s", self.node_name, record.namespace, record.name)
        finally:
            record.resizing = False

    async def _actuate(
        self, record: PodRecord, pod: dict[str, Any], wanted: dict[str, Any], now: str
    ) -> None:
        """Allocate the new resources (shown as `PodResizeInProgress` while the runtime still applies the
        old ones), restart the containers whose resizePolicy asks for it, then report them applied."""
        applied = record.spec
        record.spec = resize.with_resources(record.spec, wanted)
        record.requests = admission.pod_requests({"spec": record.spec})
        self._recount(record)
        record.resize_conditions = {resize.IN_PROGRESS: resize.condition(resize.IN_PROGRESS, now)}
        await self._write_resize(record, applied)
        restarted: list[tuple[str, str]] = []  # (group, container)
        for group in ("initContainers", "containers"):
            for container in record.spec.get(group) or ():
                name = container.get("name", "")
                was = resize.resizable(applied).get(name)
                if name in wanted and was is not None and resize.restarts_for(container, was, wanted[name]):
                    restarted.append((group, name))
        for group, name in restarted:
            await self.record_event(
                pod,
                "Killing",
                f"Container {name} resize requires restart",
                reference=_container_reference(record, group, name),
            )
        record.resize_conditions = {}
        await self._write_resize(record, None, restarted=[name for _, name in restarted], pod=pod)

    async def _write_resize(
        self,
        record: PodRecord,
        applied: dict[str, Any] | None,
        *,
        restarted: list[str] | None = None,
        pod: dict[str, Any] | None = None,
    ) -> None:
        """Write the pod's resize conditions and its containers' resources (allocated, and `applied` by
        the runtime where that is still the old spec), keeping the rest of the status as it is."""
        current = self.informer.get(record.namespace, record.name)
        if current is None:
            return
        status = current.get("status") or {}
        patch: dict[str, Any] = {
            "conditions": _with_resize_conditions(list(status.get("conditions") or []), record)
        }
        names = set(restarted or ())

        def restart(entry: dict[str, Any]) -> dict[str, Any]:
            if entry.get("name") in names and "running" in (entry.get("state") or {}):
                return self._restarted_entry(record, entry, pod or current)
            return entry

        containers = {k: status[k] for k in ("initContainerStatuses", "containerStatuses") if status.get(k)}
        patch.update(
            runtimestatus.with_runtime_fields(
                containers, record.spec, applied=applied, prepare=restart if names else None
            )
        )
        with contextlib.suppress(ApiError):
            await self.client.patch(
                "pods", record.name, {"status": patch}, record.namespace, subresource="status", decode=False
            )

    def _restarted_entry(
        self, record: PodRecord, entry: dict[str, Any], pod: dict[str, Any]
    ) -> dict[str, Any]:
        """A container the kubelet stopped (exit 137, as `sleep` and other processes that ignore
        SIGTERM end) and started again with its new resources: a new log, one more restart."""
        name = entry.get("name", "")
        started = (entry.get("state") or {}).get("running", {}).get("startedAt") or record.started_at or ""
        cid = entry.get("containerID") or podstatus.container_id(record.uid, name)
        record.logs.get(name, ContainerLog()).write("process exited with code 137")
        if name in record.logs:
            record.previous_logs[name] = record.logs[name]
            record.logs[name] = ContainerLog()
            self._start_container(pod, record, name)
        now = podstatus.rfc3339()
        fresh = {
            **entry,
            "lastState": podstatus.terminated_state(137, started, cid, now),
            "state": {"running": {"startedAt": now}},
            "restartCount": int(entry.get("restartCount") or 0) + 1,
        }
        if name in record.container_states:
            record.container_states[name] = fresh
        return fresh

    # --- ephemeral containers (`kubectl debug`) -------------------------------------------------

    def _start_ephemeral(self, pod: dict[str, Any], record: PodRecord) -> None:
        """Start the ephemeral containers added to a running pod: each runs its command once (they are
        never restarted) and gets no GPU, since the device plugin allocates only at admission."""
        if record.finished or record.terminating or record.started_at is None:
            return
        fresh = [
            spec
            for spec in (pod.get("spec") or {}).get("ephemeralContainers") or []
            if spec.get("name") and spec["name"] not in record.ephemeral
        ]
        if not fresh:
            return
        record.spec = pod.get("spec") or {}
        built = self._environments(pod, record, lenient=True)
        for spec in fresh:
            name = spec["name"]
            record.ephemeral_envs[name] = self._full_env(record, {}, built[name])
            out = record.logs[name] = ContainerLog()
            now = log_stamp()
            out.write(f"tenantgpu simulated ephemeral container {name} on node {self.node_name}", now)
            command = containerenv.expanded_command(spec, record.ephemeral_envs[name])
            main = programs.main_command(command, self._container_view(record, name))
            runs_for: float | None = None
            code = 0
            if main is not None:
                out.command(command, main.output, now)
                code = main.output.exit_code
                runs_for = None if math.isinf(main.runs_for) else main.runs_for
            else:
                out.write("running until the pod is deleted", now)
            started = podstatus.rfc3339()
            record.ephemeral[name] = podstatus.container_entry(
                spec, record.uid, state={"running": {"startedAt": started}}, restarts=0
            ) | {"ready": False}
            if runs_for is not None:
                self._spawn_ephemeral(record, self._finish_ephemeral(record, spec, started, runs_for, code))
        self._spawn_ephemeral(record, self._patch_ephemeral(record))

    def _spawn_ephemeral(self, record: PodRecord, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        record.ephemeral_tasks.add(task)
        task.add_done_callback(record.ephemeral_tasks.discard)

    async def _finish_ephemeral(
        self, record: PodRecord, spec: dict[str, Any], started: str, runs_for: float, code: int
    ) -> None:
        await asyncio.sleep(runs_for)
        name = spec["name"]
        record.logs[name].write(f"process exited with code {code}")
        record.ephemeral[name] = podstatus.container_entry(
            spec,
            record.uid,
            state=podstatus.terminated_state(code, started, podstatus.container_id(record.uid, name)),
            restarts=0,
        )
        await self._patch_ephemeral(record)

    async def _patch_ephemeral(self, record: PodRecord) -> None:
        """Write every ephemeral container's status; one write at a time, each with the latest states."""
        async with record.ephemeral_writes:
            if record.finished:
                return  # the pod's final status carries them
            try:
                await self._patch_status(
                    record, {"ephemeralContainerStatuses": list(record.ephemeral.values())}
                )
            except (ApiError, OSError, aiohttp.ClientError) as err:
                log.warning("kubelet %s: ephemeral containers of %s: %r", self.node_name, record.name, err)

    def _stop_remaining(self, record: PodRecord, status: dict[str, Any]) -> None:
        """The pod ends: its sidecars and the ephemeral containers still running are stopped, in its
        final status too (the sidecars' entries are `podstatus.terminated_status`'s)."""
        for name in record.sidecars:
            if name in record.logs:
                record.logs[name].write("received SIGTERM, exiting")
        for task in list(record.ephemeral_tasks):
            task.cancel()
        for name, entry in record.ephemeral.items():
            running = (entry.get("state") or {}).get("running")
            if running is not None:
                cid = podstatus.container_id(record.uid, name)
                entry.update(
                    state=podstatus.terminated_state(137, running.get("startedAt", ""), cid), started=False
                )
        if record.ephemeral:
            status["ephemeralContainerStatuses"] = list(record.ephemeral.values())

    def _adopt_ephemeral(self, pod: dict[str, Any], record: PodRecord) -> None:
        """After a kubelet restart, ephemeral containers that were started keep their status (they are
        never run twice); their log says it was lost."""
        built: dict[str, containerenv.Environment] = {}
        for entry in (pod.get("status") or {}).get("ephemeralContainerStatuses") or []:
            name = entry.get("name", "")
            spec = next(
                (
                    c
                    for c in (pod.get("spec") or {}).get("ephemeralContainers") or []
                    if c.get("name") == name
                ),
                {},
            )
            record.ephemeral[name] = entry
            built = built or self._environments(pod, record, lenient=True)
            record.ephemeral_envs[name] = self._full_env(record, {}, built[name]) if spec else {}
            record.logs[name] = ContainerLog()
            record.logs[name].write("(log of an ephemeral container is not kept over a kubelet restart)")

    async def _remove(self, record: PodRecord, uid: str | None) -> None:
        """Delete the pod object now, retrying as the kubelet's status manager does until it is gone:
        a conflict with a write still in flight, or a dropped connection, must not leave it behind."""
        delay = 0.1
        for _ in range(_REMOVE_ATTEMPTS):
            try:
                await self.client.delete(
                    "pods", record.name, record.namespace, grace_period_seconds=0, uid=uid
                )
                return
            except ApiError as err:
                if err.code == 404:
                    return
                if err.code == 409:
                    try:
                        current = await self.client.get("pods", record.name, record.namespace)
                    except ApiError as missing:
                        if missing.code == 404:
                            return
                        raise
                    if _meta(current).get("uid") != uid:
                        return  # a new pod of the same name: not ours to delete
                else:
                    log.warning(
                        "kubelet %s: deleting %s/%s: %s", self.node_name, record.namespace, record.name, err
                    )
            except (OSError, aiohttp.ClientError) as err:  # timeouts are OSErrors too
                log.warning(
                    "kubelet %s: deleting %s/%s: %r", self.node_name, record.namespace, record.name, err
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
        log.warning("kubelet %s: gave up deleting %s/%s", self.node_name, record.namespace, record.name)

    async def _announce_stops(self, pod: dict[str, Any], record: PodRecord) -> None:
        """kube's killContainer records `Killing` / `Stopping container <name>` for each container it
        stops: the app and ephemeral containers still running first, then the sidecars in reverse order
        (kuberuntime's killContainersWithSyncResult), each event on its container's field path."""
        spec = pod.get("spec") or {}
        stopping = [
            ("containers", c.get("name", ""))
            for c in spec.get("containers") or ()
            if "running"
            in (record.container_states.get(c.get("name", ""), {}).get("state") or {"running": {}})
        ]
        stopping += [
            ("ephemeralContainers", name)
            for name, entry in record.ephemeral.items()
            if "running" in (entry.get("state") or {})
        ]
        stopping += [("initContainers", name) for name in reversed(record.sidecars)]
        for group, name in stopping:
            await self.record_event(
                pod,
                "Killing",
                f"Stopping container {name}",
                reference=_container_reference(record, group, name),
            )

    async def _terminate(self, pod: dict[str, Any], record: PodRecord) -> None:
        """Graceful deletion: stop the containers, report them terminated, then remove the pod object."""
        try:
            if not record.finished and record.started_at:
                status = await self._stop_containers(pod, record)
                try:
                    await self._patch_status(record, status)
                except Exception as err:
                    # The final status is a courtesy; the deletion below is what the user waits for,
                    # so a conflict, a timeout or a dropped connection here must not stop it.
                    log.warning(
                        "kubelet %s: final status of %s/%s: %r",
                        self.node_name,
                        record.namespace,
                        record.name,
                        err,
                    )
            self._finish(record)
            await self._remove(record, _meta(pod).get("uid"))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("kubelet %s: terminating %s/%s", self.node_name, record.namespace, record.name)
