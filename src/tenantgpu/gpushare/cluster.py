"""The scheduler's view of a cluster, rebuilt from API objects, and HAMi's filter over it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tenantgpu.gpushare import annotations as ann
from tenantgpu.gpushare import reasons as r
from tenantgpu.gpushare.basics import (
    NodeCapacity,
    PodDemand,
    capacity_reason,
    node_capacity,
    pod_demand,
    static_reason,
)
from tenantgpu.gpushare.codec import CodecError, decode_pod_devices, encode_pod_devices
from tenantgpu.gpushare.config import SharingConfig
from tenantgpu.gpushare.device import ContainerDevice, DeviceInfo, DeviceUsage, DeviceUsageView
from tenantgpu.gpushare.fit import NodeFit, PodContext, fit_pod
from tenantgpu.gpushare.nvidia import NVIDIA, numa_bind_requested
from tenantgpu.gpushare.policy import (
    PolicyError,
    gpu_policy_of,
    node_policy_of,
    pod_annotations,
    scoring_weights_of,
    spreads,
)
from tenantgpu.gpushare.quantity import QuantityError
from tenantgpu.gpushare.quota import QuotaBook
from tenantgpu.gpushare.request import ContainerDeviceRequest, init_container_count, pod_containers
from tenantgpu.gpushare.usage import DeviceHold, app_only_usage, collapse_usage, init_containers_succeeded
from tenantgpu.gpushare.vendor import DeviceVendor
from tenantgpu.gpushare.webhook import vendors_for

TERMINAL_PHASES = ("Succeeded", "Failed")
_HOLDS_MEMO_SIZE = 4096  # distinct device annotations remembered (about one per placed pod)


def pod_key(pod: dict[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return meta.get("namespace") or "default", meta.get("name", "")


class Decision:
    """HAMi's filter result for one pod: the node and devices, or why no node fits.

    `failed_nodes` and `node_scores` may be worked out on first access (the fast path keeps what it
    needs), so reading them costs nothing when a caller only wants the node.
    """

    def __init__(
        self,
        node: str | None,
        devices: list[list[ContainerDevice]] | None = None,
        annotation: str | None = None,
        failed_nodes: dict[str, str] | None = None,
        node_scores: dict[str, float] | None = None,
        reason: str | None = None,
        requests_gpu: bool = True,
        details: Callable[[], tuple[dict[str, str], dict[str, float]]] | None = None,
        device_annotations: dict[str, str] | None = None,
        scores: Callable[[], dict[str, float]] | None = None,
    ) -> None:
        self.node = node
        # every vendor's to-allocate / allocated annotation (NVIDIA's value is also `annotation`)
        self.device_annotations = (
            device_annotations
            if device_annotations is not None
            else (
                {ann.DEVICES_TO_ALLOCATE: annotation, ann.DEVICES_ALLOCATED: annotation} if annotation else {}
            )
        )
        self.devices = devices
        self.annotation = annotation
        self.reason = reason
        self.requests_gpu = requests_gpu
        self._failed_nodes = failed_nodes
        self._node_scores = node_scores
        self._details = details
        self._scores = scores  # node_scores alone, cheaper than all the details (FilteringSucceed needs it)

    def _resolve(self) -> None:
        if self._details is not None:
            failed, scores = self._details()
            self._failed_nodes, self._node_scores, self._details, self._scores = failed, scores, None, None

    @property
    def failed_nodes(self) -> dict[str, str]:
        """Per node that does not fit: HAMi's `"<k>/<n> Reason, ..."` (or kube-scheduler's) text."""
        self._resolve()
        return self._failed_nodes if self._failed_nodes is not None else {}

    @property
    def node_scores(self) -> dict[str, float]:
        """Per node that fits: its HAMi node score (usage before the pod)."""
        if self._details is not None and self._scores is not None:
            self._node_scores, self._scores = self._scores(), None
            return self._node_scores
        self._resolve()
        return self._node_scores if self._node_scores is not None else {}

    def __repr__(self) -> str:
        return (
            f"Decision(node={self.node!r}, annotation={self.annotation!r}, reason={self.reason!r}, "
            f"failed_nodes={self.failed_nodes!r}, node_scores={self.node_scores!r})"
        )

    def scheduled_annotations(self, now_unix: int) -> dict[str, str]:
        """What HAMi's filter patches onto the pod: vgpu-node, vgpu-time and the two device annotations."""
        if self.node is None:
            return {}
        return {ann.VGPU_NODE: self.node, ann.VGPU_TIME: str(now_unix), **self.device_annotations}

    def scheduled_patch(self, now_unix: int) -> dict[str, Any]:
        """HAMi's merge patch after Filter (util.PatchPodAnnotations): the annotations plus the label
        `hami.io/vgpu-node=<node>`."""
        if self.node is None:
            return {}
        return {
            "metadata": {
                "annotations": self.scheduled_annotations(now_unix),
                "labels": {ann.VGPU_NODE: self.node},
            }
        }


@dataclass
class _Node:
    name: str
    obj: dict[str, Any]
    devices: list[DeviceInfo] | None
    register_error: str | None
    capacity: NodeCapacity
    plain: bool  # no NoSchedule/NoExecute taints and schedulable: the static checks cannot fail
    usage: dict[str, list[int]] = field(default_factory=dict)  # uuid -> [slots, mem, cores]
    holders: dict[str, list[str]] = field(default_factory=dict)  # uuid -> "ns/name" of holders
    used_cpu: int = 0
    used_memory: int = 0
    used_pods: int = 0


@dataclass
class _Pod:
    key: tuple[str, str]
    gpu_node: str | None
    holds: list[DeviceHold]
    run_node: str | None
    demand: PodDemand
    quota_usage: dict[str, int]


class ClusterState:
    """Nodes, placed pods and quotas; GPU usage derived from pods' HAMi annotations, as HAMi's cache does."""

    def __init__(
        self, cfg: SharingConfig | None = None, vendors: Iterable[DeviceVendor] | None = None
    ) -> None:
        self.cfg = cfg or SharingConfig()
        self._vendors = {v.name: v for v in (vendors if vendors is not None else vendors_for(self.cfg))}
        self._gpu = self._vendors[NVIDIA]
        self._nodes: dict[str, _Node] = {}
        self._pods: dict[tuple[str, str], _Pod] = {}
        self.quotas = QuotaBook(
            [r for v in self._vendors.values() for r in (v.memory_resource, v.core_resource)],
            memory_factor=self.cfg.memory_factor,
            memory_resource=self._gpu.memory_resource,
        )
        self._index: Any = None  # the fast path's arrays, built on demand (see fastpath.py)
        self._fast: Any = None  # the fastpath module, once imported
        self._holds_memo: dict[tuple[str, int, bool], tuple[DeviceHold, ...]] = {}

    # --- nodes ---------------------------------------------------------------------------------
    def upsert_node(self, node: dict[str, Any]) -> None:
        """Add or replace a node; a malformed register annotation leaves the node unregistered."""
        name = (node.get("metadata") or {}).get("name", "")
        found: list[DeviceInfo] = []
        error = None
        for vendor in self._vendors.values():  # a vendor whose registration fails is skipped, as HAMi does
            try:
                found.extend(vendor.node_devices(node) or [])
            except CodecError as exc:
                error = str(exc)
        devices: list[DeviceInfo] | None = found or None
        if devices is None and error is None:
            error = "no gpu found on node"
        spec = node.get("spec") or {}
        plain = not spec.get("unschedulable") and not any(
            t.get("effect") in ("NoSchedule", "NoExecute") for t in spec.get("taints") or []
        )
        old = self._nodes.get(name)
        capacity = self._capacity(node, old)
        record = _Node(name, node, devices, error, capacity, plain)
        if old is not None and old.devices == devices:
            record.usage, record.holders = old.usage, old.holders
            record.used_cpu, record.used_memory, record.used_pods = (
                old.used_cpu,
                old.used_memory,
                old.used_pods,
            )
            self._nodes[name] = record
            if self._index is not None:
                if (old.capacity, old.plain, _cordon_list(old.obj)) == (capacity, plain, _cordon_list(node)):
                    self._index.objs[self._index.node_pos[name]] = node  # a lock or heartbeat update
                else:
                    self._index.refresh_node(self, name)
            return
        self._nodes[name] = record
        self._recount_node(record)
        self._index = None

    @staticmethod
    def _capacity(node: dict[str, Any], old: _Node | None) -> NodeCapacity:
        """The node's allocatable cpu/memory/pods; the old record's when those strings did not change."""
        status = node.get("status") or {}
        if old is not None:
            old_status = old.obj.get("status") or {}
            old_alloc = old_status.get("allocatable") or old_status.get("capacity") or {}
            alloc = status.get("allocatable") or status.get("capacity") or {}
            if all(alloc.get(k) == old_alloc.get(k) for k in ("cpu", "memory", "pods")):
                return old.capacity
        try:
            return node_capacity(node)
        except QuantityError:
            return NodeCapacity(None, None, None)

    def remove_node(self, name: str) -> None:
        if self._nodes.pop(name, None) is not None:
            self._index = None

    def _recount_node(self, node: _Node) -> None:
        node.usage = {d.id: [0, 0, 0] for d in node.devices or []}
        node.holders = {d.id: [] for d in node.devices or []}
        node.used_cpu = node.used_memory = node.used_pods = 0
        for pod in self._pods.values():
            self._charge(pod, +1, only=node.name)

    # --- pods ----------------------------------------------------------------------------------
    def upsert_pod(self, pod: dict[str, Any]) -> None:
        """Record a pod; it holds GPUs if it carries `hami.io/vgpu-node` and is not Succeeded/Failed.

        A malformed device annotation is skipped as HAMi skips it (the pod holds no GPU, but still
        counts for cpu/memory/pods); `plan` checks the annotation itself to report it.
        """
        key = pod_key(pod)
        phase = (pod.get("status") or {}).get("phase")
        record = None
        if phase not in TERMINAL_PHASES:
            annotations = pod_annotations(pod)
            gpu_node = annotations.get(ann.VGPU_NODE)
            holds: list[DeviceHold] = []
            quota_usage: dict[str, int] = {}
            # HAMi releases the init containers' peak once they all succeeded (onUpdatePod)
            released_init = init_container_count(pod) > 0 and init_containers_succeeded(pod)
            if gpu_node is not None:
                try:
                    for vendor in self._vendors.values():
                        vendor_holds = self._holds(
                            annotations.get(vendor.allocated_annotation, ""),
                            init_container_count(pod),
                            released_init,
                        )
                        holds.extend(vendor_holds)
                        quota_usage[vendor.memory_resource] = sum(h.usedmem for h in vendor_holds)
                        quota_usage[vendor.core_resource] = sum(h.usedcores for h in vendor_holds)
                except CodecError:
                    gpu_node, holds, quota_usage = None, [], {}  # HAMi: "failed to decode", not cached
            run_node = (pod.get("spec") or {}).get("nodeName") or (annotations.get(ann.VGPU_NODE))
            try:
                demand = pod_demand(pod)
            except QuantityError:
                demand = PodDemand(0, 0)
            if gpu_node is not None or run_node is not None:
                record = _Pod(key, gpu_node, holds, run_node, demand, quota_usage)
        if record is not None and self._pods.get(key) == record:
            return  # a status or lock update: what the pod holds is what is charged already
        self.remove_pod(*key)
        if record is not None:
            self._pods[key] = record
            self._charge(record, +1)

    def _holds(self, allocated: str, num_init: int, released_init: bool) -> tuple[DeviceHold, ...]:
        """What a device annotation holds per GPU; memoised, since each of a pod's watch events repeats it."""
        memo_key = (allocated, num_init, released_init)
        holds = self._holds_memo.get(memo_key)
        if holds is None:
            segments = decode_pod_devices(allocated)  # raises CodecError, which is not memoised
            usage = app_only_usage if released_init else collapse_usage
            holds = tuple(usage(segments, num_init))
            if len(self._holds_memo) >= _HOLDS_MEMO_SIZE:
                self._holds_memo.clear()
            self._holds_memo[memo_key] = holds
        return holds

    def remove_pod(self, namespace: str, name: str) -> None:
        record = self._pods.pop((namespace, name), None)
        if record is not None:
            self._charge(record, -1)

    def _charge(self, pod: _Pod, sign: int, only: str | None = None) -> None:
        """Add (sign=+1) or take back (-1) what a pod holds: GPU usage, cpu/memory/pods, quota."""
        holder = f"{pod.key[0]}/{pod.key[1]}"
        if only is None and pod.gpu_node is not None and any(pod.quota_usage.values()):
            if sign > 0:
                self.quotas.add_usage(pod.key[0], pod.quota_usage)
            else:
                self.quotas.remove_usage(pod.key[0], pod.quota_usage)
        gpu_node = self._nodes.get(pod.gpu_node or "")
        if gpu_node is not None and (only is None or only == gpu_node.name):
            for hold in pod.holds:
                slot = gpu_node.usage.get(hold.uuid)
                if slot is None:
                    continue  # HAMi logs "pod allocated unknown or stale device resources"
                slot[0] += sign * hold.slots
                slot[1] += sign * hold.usedmem
                slot[2] += sign * hold.usedcores
                if sign > 0:
                    gpu_node.holders[hold.uuid].append(holder)
                elif holder in gpu_node.holders[hold.uuid]:
                    gpu_node.holders[hold.uuid].remove(holder)
                if self._index is not None and only is None:
                    self._index.charge(gpu_node.name, hold, sign)
        run_node = self._nodes.get(pod.run_node or "")
        if run_node is not None and (only is None or only == run_node.name):
            run_node.used_cpu += sign * pod.demand.cpu_milli
            run_node.used_memory += sign * pod.demand.memory
            run_node.used_pods += sign
            if self._index is not None and only is None:
                self._index.charge_basics(run_node.name, pod.demand, sign)

    # --- quotas --------------------------------------------------------------------------------
    def upsert_quota(self, quota: dict[str, Any]) -> None:
        self.quotas.upsert_quota(quota)

    def remove_quota(self, namespace: str, name: str) -> None:
        self.quotas.remove_quota(namespace, name)

    # --- views ---------------------------------------------------------------------------------
    @property
    def node_names(self) -> list[str]:
        return list(self._nodes)

    def registration_error(self, name: str) -> str | None:
        """Why the node's register annotation could not be decoded (None when fine or absent)."""
        node = self._nodes[name]
        return (
            node.register_error
            if node.devices is None and node.register_error != "no gpu found on node"
            else None
        )

    def node_devices(self, name: str) -> list[DeviceUsage]:
        """The node's GPUs with their current usage (empty for an unregistered node)."""
        node = self._nodes[name]
        usage = node.usage
        # positional construction: this runs for every node a pod is fitted on
        return [
            DeviceUsage(
                d.id, d.index, d.count, d.devmem, d.devcore, d.type, d.numa, d.mode, d.health, *usage[d.id]
            )
            for d in node.devices or []
        ]

    def node_usage(self, name: str) -> list[DeviceUsageView]:
        node = self._nodes[name]
        return [
            DeviceUsageView(
                uuid=d.id,
                type=d.type,
                index=d.index,
                numa=d.numa,
                health=d.health,
                used=d.used,
                count=d.count,
                usedmem=d.usedmem,
                totalmem=d.totalmem,
                usedcores=d.usedcores,
                totalcore=d.totalcore,
                pods=tuple(node.holders.get(d.id, ())),
            )
            for d in self.node_devices(name)
        ]

    # --- scheduling ----------------------------------------------------------------------------
    def pod_requests(self, pod: dict[str, Any]) -> list[dict[str, ContainerDeviceRequest]]:
        """Per container (init first): each vendor's request, as HAMi's Resourcereqs."""
        out = []
        for container in pod_containers(pod):
            reqs = {}
            for name, vendor in self._vendors.items():
                req = vendor.container_request(container)
                if req is not None:
                    reqs[name] = req
            out.append(reqs)
        return out

    def schedule(self, pod: dict[str, Any], *, fast: bool = True) -> Decision:
        """HAMi's Filter for this pod (kube-scheduler's basic checks first); the state is not changed.

        Ties between equally scored nodes go to the node upserted first. `fast=False` forces the
        reference path (every node evaluated); both decide the same (tests/gpushare/test_fastpath.py).
        """
        key = pod_key(pod)
        previous = self._pods.get(key)
        if previous is not None:  # HAMi drops the pod's own cached allocation before filtering
            self.remove_pod(*key)
        try:
            return self._schedule(pod, fast)
        finally:
            if previous is not None:
                self._pods[key] = previous
                self._charge(previous, +1)

    def load_fast_path(self) -> None:
        """Import the fast path now rather than during the first pod's decision. It brings numpy:
        0.08 s on an idle host, about 0.4 s measured in bench/lab's burst, during which a scheduler
        decides nothing. A long-running scheduler pays it at start."""
        self._fastpath()

    def _fastpath(self) -> Any:
        """The fast path, imported on first use: it brings numpy, which starting a CLI need not pay for."""
        if self._fast is None:
            from tenantgpu.gpushare import fastpath

            self._fast = fastpath
        return self._fast

    def _schedule(self, pod: dict[str, Any], fast: bool) -> Decision:
        requests = self.pod_requests(pod)
        try:
            demand = pod_demand(pod)
        except QuantityError:
            demand = PodDemand(0, 0)
        if not any(requests):
            return self._schedule_without_gpu(pod, demand, fast)
        try:
            ctx = self._context(pod)
        except PolicyError as exc:
            return Decision(None, reason=f"calcScore failed {exc} for pod {pod_key(pod)[1]}")
        if fast:
            decision = self._fastpath().schedule_fast(self, pod, requests, demand, ctx)
            if decision is not None:
                return decision
        return self._schedule_reference(pod, requests, demand, ctx)

    def _context(self, pod: dict[str, Any]) -> PodContext:
        annotations = pod_annotations(pod)
        namespace = pod_key(pod)[0]
        limited = self.quotas.limited(namespace)

        def quota_for(vendor_name: str) -> Any:
            if not limited:
                return None
            vendor = self._vendors[vendor_name]
            return lambda mem, cores: self.quotas.fits(
                namespace, {vendor.memory_resource: mem, vendor.core_resource: cores}
            )

        return PodContext(
            pod=pod,
            annotations=annotations,
            node=None,
            gpu_policy=gpu_policy_of(pod, self.cfg),
            numa_bind=numa_bind_requested(annotations),
            num_init=init_container_count(pod),
            weights=scoring_weights_of(pod),
            quota_for=quota_for,
        )

    def basics_reason(self, pod: dict[str, Any], node: _Node, demand: PodDemand) -> str | None:
        reason = None if node.plain and not _constrained(pod) else static_reason(pod, node.obj)
        if reason is None:
            reason = capacity_reason(demand, node.capacity, node.used_cpu, node.used_memory, node.used_pods)
        return reason

    def fit_on(self, pod: dict[str, Any], name: str, requests: list[dict[str, ContainerDeviceRequest]],
               ctx: PodContext) -> NodeFit:  # fmt: skip
        """HAMi's scoreNode for one node (without the kube-scheduler basics)."""
        node = self._nodes[name]
        node_ctx = PodContext(**{**ctx.__dict__, "node": node.obj})
        return fit_pod(self.node_devices(name), requests, self._vendors, node_ctx, scratch=True)

    def _schedule_without_gpu(self, pod: dict[str, Any], demand: PodDemand, fast: bool = True) -> Decision:
        """HAMi passes such pods through; kube-scheduler does: here the first node passing the basics."""
        if fast and not _constrained(pod):
            decision = self._fastpath().first_basic_fit(self, pod, demand)
            if decision is not None:
                return decision
        failed: dict[str, str] = {}
        for node in self._nodes.values():
            reason = self.basics_reason(pod, node, demand)
            if reason is None:
                return Decision(node.name, failed_nodes=failed, requests_gpu=False)
            failed[node.name] = reason
        return Decision(None, failed_nodes=failed, reason=summarize(failed), requests_gpu=False)

    def _schedule_reference(
        self,
        pod: dict[str, Any],
        requests: list[dict[str, ContainerDeviceRequest]],
        demand: PodDemand,
        ctx: PodContext,
    ) -> Decision:
        failed: dict[str, str] = {}
        fits: list[tuple[str, NodeFit]] = []
        for node in self._nodes.values():
            reason = self.basics_reason(pod, node, demand)
            if reason is not None:
                failed[node.name] = reason
                continue
            if node.devices is None:
                failed[node.name] = r.NODE_UNREGISTERED
                continue
            result = self.fit_on(pod, node.name, requests, ctx)
            if result.ok:
                fits.append((node.name, result))
            else:
                failed[node.name] = result.reason
        if not fits:
            return Decision(None, failed_nodes=failed, reason=summarize(failed))
        spread = spreads(node_policy_of(pod, self.cfg))
        best_name, best = fits[0]
        for name, result in fits[1:]:
            if (result.score < best.score) if spread else (result.score > best.score):
                best_name, best = name, result
        return self._decision(best_name, best, failed, {n: f.score for n, f in fits})

    def _decision(
        self, name: str, fit: NodeFit, failed: dict[str, str], scores: dict[str, float]
    ) -> Decision:
        notes: dict[str, str] = {}
        for vendor_name, vendor in self._vendors.items():
            segments = fit.devices.get(vendor_name)
            if segments:  # PatchAnnotations writes a vendor's keys only when it allocated something
                encoded = encode_pod_devices(segments)
                notes[vendor.to_allocate_annotation] = encoded
                notes[vendor.allocated_annotation] = encoded
        segments = fit.devices.get(NVIDIA)
        return Decision(
            name,
            devices=segments or None,
            annotation=encode_pod_devices(segments) if segments else None,
            failed_nodes=failed,
            node_scores=scores,
            device_annotations=notes,
        )


def _cordon_list(node: dict[str, Any]) -> str | None:
    return ((node.get("metadata") or {}).get("annotations") or {}).get(ann.DEVICE_CORDON)


def _constrained(pod: dict[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return bool(spec.get("nodeSelector") or (spec.get("affinity") or {}).get("nodeAffinity"))


def summarize(failed: dict[str, str]) -> str:
    """One line for a pod that fits nowhere, in HAMi's event words: reasons with how many nodes gave each."""
    tally: dict[str, int] = {}
    for reason in failed.values():
        names = r.parse_reason(reason) or {reason: 1}
        for name in names:
            tally[name] = tally.get(name, 0) + 1
    return format_summary(tally, len(failed))


def format_summary(tally: dict[str, int], failed: int) -> str:
    """`no available node, <N> nodes do not meet: <n> nodes <Reason>, ...`, most frequent reason first."""
    if not failed:
        return "no available node, 0 nodes do not meet"
    parts = ", ".join(
        f"{n} nodes {name}" for name, n in sorted(tally.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    return f"no available node, {failed} nodes do not meet: {parts}"
