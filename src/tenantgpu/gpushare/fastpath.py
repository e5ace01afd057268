"""The indexed fast path of ClusterState.schedule: numpy arrays over every GPU, exact for simple pods.

For a pod whose only GPU request is one app container (no NUMA binding, no UUID selection, no
namespace quota), a node fits iff it passes the basics and at least N of its cards pass HAMi's
per-card checks, which do not depend on scan order. So the per-card checks run vectorised over all
cards, nodes are tried best-score first, and the reference per-node fit runs only on the winner.
Everything else falls back to the reference path (returns None). tests/gpushare/test_fastpath.py
checks on random clusters that both paths decide the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tenantgpu.gpushare import annotations as ann
from tenantgpu.gpushare import reasons as r
from tenantgpu.gpushare.basics import PodDemand, static_reason
from tenantgpu.gpushare.nvidia import NVIDIA, _policy_contains, cordoned_devices, type_allowed
from tenantgpu.gpushare.policy import WEIGHT, node_policy_of, spreads
from tenantgpu.gpushare.request import PERCENTAGE_UNSET, ContainerDeviceRequest
from tenantgpu.gpushare.usage import DeviceHold

if TYPE_CHECKING:
    from tenantgpu.gpushare.cluster import ClusterState, Decision
    from tenantgpu.gpushare.fit import PodContext

# Per-card outcome codes, in HAMi's Fit check order; PASS last.
_CARD_REASONS = (
    r.CARD_NOT_HEALTH,
    r.CARD_CORDONED,
    r.CARD_TYPE_MISMATCH,
    r.CARD_TIME_SLICING_EXHAUSTED,
    r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,  # mutex policy
    r.CARD_INSUFFICIENT_MEMORY,
    r.CARD_INSUFFICIENT_CORE,
    r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,  # whole-card request on a used card
    r.CARD_COMPUTE_UNITS_EXHAUSTED,
)
_PASS = len(_CARD_REASONS)
_K = _PASS + 1
_CAPACITY_REASONS = (None, r.TOO_MANY_PODS, r.INSUFFICIENT_CPU, r.INSUFFICIENT_MEMORY)


class ClusterIndex:
    """Arrays over the nodes (in upsert order) and their cards, kept in step with ClusterState's usage."""

    def __init__(self, state: ClusterState) -> None:
        nodes = list(state._nodes.values())
        self.names = [n.name for n in nodes]
        self.node_pos = {name: i for i, name in enumerate(self.names)}
        n = len(nodes)
        self.objs: list[dict[str, Any]] = [node.obj for node in nodes]
        self.plain = np.array([node.plain for node in nodes], dtype=bool)
        inf = np.inf
        self.cap_cpu = np.array(
            [inf if x.capacity.cpu_milli is None else x.capacity.cpu_milli for x in nodes]
        )
        self.cap_mem = np.array([inf if x.capacity.memory is None else x.capacity.memory for x in nodes])
        self.cap_pods = np.array([inf if x.capacity.pods is None else x.capacity.pods for x in nodes])
        self.used_cpu = np.array([x.used_cpu for x in nodes], dtype=np.float64)
        self.used_mem = np.array([x.used_memory for x in nodes], dtype=np.float64)
        self.used_pods = np.array([x.used_pods for x in nodes], dtype=np.float64)
        self.registered = np.array([x.devices is not None for x in nodes], dtype=bool)
        vendor = state._gpu
        dev_node, ids, types, modes, rows = [], [], [], [], []
        self.dev_pos: dict[tuple[str, str], int] = {}
        for i, node in enumerate(nodes):
            for dev in state.node_devices(node.name) if node.devices is not None else []:
                self.dev_pos[(node.name, dev.id)] = len(ids)
                dev_node.append(i)
                ids.append(dev.id)
                types.append(dev.type)
                modes.append(dev.mode)
                rows.append(
                    (dev.count, dev.totalmem, dev.totalcore, dev.used, dev.usedmem, dev.usedcores,
                     dev.health, vendor.owns(dev))
                )  # fmt: skip
        table = np.array(rows, dtype=np.int64).reshape(-1, 8)
        self.dev_node = np.array(dev_node, dtype=np.int64)
        self.ids, self.types, self.modes = ids, types, modes
        self.count, self.totalmem, self.totalcore = table[:, 0].copy(), table[:, 1].copy(), table[:, 2].copy()
        self.used, self.usedmem, self.usedcores = table[:, 3].copy(), table[:, 4].copy(), table[:, 5].copy()
        self.health, self.owned = table[:, 6].astype(bool), table[:, 7].astype(bool)
        self.cordoned = np.zeros(len(ids), dtype=bool)
        for i, node in enumerate(nodes):
            self._mark_cordoned(i, node.name, node.obj)
        self.n_count = np.bincount(self.dev_node, self.count, minlength=n)
        self.n_totalmem = np.bincount(self.dev_node, self.totalmem, minlength=n)
        self.n_totalcore = np.bincount(self.dev_node, self.totalcore, minlength=n)
        self.n_used = np.bincount(self.dev_node, self.used, minlength=n)
        self.n_usedmem = np.bincount(self.dev_node, self.usedmem, minlength=n)
        self.n_usedcores = np.bincount(self.dev_node, self.usedcores, minlength=n)
        self.n_owned = np.bincount(self.dev_node[self.owned], minlength=n)
        self._type_cache: dict[tuple[str, str], np.ndarray] = {}

    def _mark_cordoned(self, i: int, name: str, obj: dict[str, Any]) -> None:
        for uuid in cordoned_devices(obj):
            pos = self.dev_pos.get((name, uuid))
            if pos is not None:
                self.cordoned[pos] = True

    def refresh_node(self, state: ClusterState, name: str) -> None:
        """The node object changed but not its cards: taints, labels, capacity, cordon list."""
        i = self.node_pos[name]
        node = state._nodes[name]
        self.objs[i] = node.obj
        self.plain[i] = node.plain
        cap = node.capacity
        self.cap_cpu[i] = np.inf if cap.cpu_milli is None else cap.cpu_milli
        self.cap_mem[i] = np.inf if cap.memory is None else cap.memory
        self.cap_pods[i] = np.inf if cap.pods is None else cap.pods
        self.cordoned[self.dev_node == i] = False
        self._mark_cordoned(i, name, node.obj)

    def charge(self, node: str, hold: DeviceHold, sign: int) -> None:
        pos = self.dev_pos.get((node, hold.uuid))
        if pos is None:
            return
        i = self.dev_node[pos]
        self.used[pos] += sign * hold.slots
        self.usedmem[pos] += sign * hold.usedmem
        self.usedcores[pos] += sign * hold.usedcores
        self.n_used[i] += sign * hold.slots
        self.n_usedmem[i] += sign * hold.usedmem
        self.n_usedcores[i] += sign * hold.usedcores

    def charge_basics(self, node: str, demand: PodDemand, sign: int) -> None:
        i = self.node_pos[node]
        self.used_cpu[i] += sign * demand.cpu_milli
        self.used_mem[i] += sign * demand.memory
        self.used_pods[i] += sign

    def type_ok(self, annotations: dict[str, str]) -> np.ndarray | None:
        """Cards allowed by use-/nouse-gputype and vgpu-mode; None when nothing constrains them."""
        use, nouse = annotations.get(ann.USE_GPU_TYPE, ""), annotations.get(ann.NOUSE_GPU_TYPE, "")
        mode = annotations.get(ann.VGPU_MODE)
        if not use.strip() and not nouse.strip() and mode is None:
            return None
        key = (use, nouse, mode)
        cached = self._type_cache.get(key)  # type: ignore[arg-type]
        if cached is None:
            allowed = {t: type_allowed(annotations, t) for t in set(self.types)}
            pairs = zip(self.types, self.modes, strict=True)
            cached = np.array([allowed[t] and (mode is None or m in mode) for t, m in pairs], dtype=bool)
            self._type_cache[key] = cached  # type: ignore[index]
        return cached

    def node_scores(self) -> np.ndarray:
        """ComputeDefaultScore for every node, on current usage (same float operations as the reference)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            slots = self.n_used / self.n_count
            score = WEIGHT * (slots + self.n_usedcores / self.n_totalcore + self.n_usedmem / self.n_totalmem)
        zero = (self.n_count == 0) | (self.n_totalcore == 0) | (self.n_totalmem == 0)
        score[zero] = 0.0
        return score


def _single_request(
    requests: list[dict[str, ContainerDeviceRequest]], num_init: int
) -> ContainerDeviceRequest | None:
    found = None
    for position, reqs in enumerate(requests):
        if not reqs:
            continue
        if found is not None or position < num_init or set(reqs) != {NVIDIA}:
            return None
        found = reqs[NVIDIA]
    return found


def schedule_fast(
    state: ClusterState,
    pod: dict[str, Any],
    requests: list[dict[str, ContainerDeviceRequest]],
    demand: PodDemand,
    ctx: PodContext,
) -> Decision | None:
    """The decision for a simple pod, or None to let the reference path decide."""
    from tenantgpu.gpushare.cluster import Decision, _constrained, summarize

    request = _single_request(requests, ctx.num_init)
    annotations = ctx.annotations
    if (
        request is None
        or ctx.numa_bind
        or ctx.quota_for(NVIDIA) is not None
        or _policy_contains(ctx.gpu_policy, "topology-aware")
        or annotations.get(ann.USE_GPU_UUID, "").strip()
        or annotations.get(ann.NOUSE_GPU_UUID, "").strip()
    ):
        return None
    if state._index is None:
        state._index = ClusterIndex(state)
    ix: ClusterIndex = state._index
    n_nodes = len(ix.names)

    # per-card checks, HAMi's order; the first failing one is the card's reason
    cores = min(request.coresreq, 100)
    if request.memreq > 0:
        memreq: Any = request.memreq
    elif request.mem_percentage != PERCENTAGE_UNSET:
        memreq = ix.totalmem * request.mem_percentage // 100
    else:
        memreq = 0
    type_ok = ix.type_ok(annotations)
    mutex = _policy_contains(ctx.gpu_policy, "mutex")
    false = np.zeros(len(ix.ids), dtype=bool)
    conditions = [
        ~ix.health,
        ix.cordoned,
        false if type_ok is None else ~type_ok,
        ix.count <= ix.used,
        (ix.used > 0) if mutex else false,
        ix.totalmem - ix.usedmem < memreq,
        ix.totalcore - ix.usedcores < cores,
        (ix.totalcore == 100) & (ix.used > 0) if cores == 100 else false,
        (ix.totalcore != 0) & (ix.usedcores == ix.totalcore) if cores == 0 else false,
    ]
    codes = np.select(conditions, list(range(_PASS)), default=_PASS)
    owned_nodes = ix.dev_node[ix.owned]
    counts = np.bincount(owned_nodes * _K + codes[ix.owned], minlength=n_nodes * _K).reshape(n_nodes, _K)
    passing = counts[:, _PASS]

    # kube-scheduler basics, vectorised where they depend on usage
    capacity_code = np.zeros(n_nodes, dtype=np.int64)
    if demand.memory > 0:
        capacity_code[ix.used_mem + demand.memory > ix.cap_mem] = 3
    if demand.cpu_milli > 0:
        capacity_code[ix.used_cpu + demand.cpu_milli > ix.cap_cpu] = 2
    capacity_code[ix.used_pods + 1 > ix.cap_pods] = 1
    constrained = _constrained(pod)
    needs_static = np.ones(n_nodes, dtype=bool) if constrained else ~ix.plain

    fits = ix.registered & (capacity_code == 0) & (ix.n_owned >= request.nums) & (passing >= request.nums)
    scores = ix.node_scores()
    candidates = np.flatnonzero(fits)
    spread = spreads(node_policy_of(pod, state.cfg))
    order = candidates[np.argsort(scores[candidates] if spread else -scores[candidates], kind="stable")]

    static_cache: dict[int, str | None] = {}

    def static(i: int) -> str | None:
        if i not in static_cache:
            static_cache[i] = static_reason(pod, ix.objs[i]) if needs_static[i] else None
        return static_cache[i]

    names, objs = ix.names, list(ix.objs)
    n_owned, registered = ix.n_owned.copy(), ix.registered.copy()

    def details() -> tuple[dict[str, str], dict[str, float]]:
        failed: dict[str, str] = {}
        fitting: dict[str, float] = {}
        for i, name in enumerate(names):
            reason = static_cache[i] if i in static_cache else (
                static_reason(pod, objs[i]) if needs_static[i] else None
            )  # fmt: skip
            if reason is None and capacity_code[i]:
                reason = _CAPACITY_REASONS[capacity_code[i]]
            if reason is None and not registered[i]:
                reason = r.NODE_UNREGISTERED
            if reason is None and n_owned[i] < request.nums:
                reason = r.NODE_INSUFFICIENT_DEVICE
            if reason is None and passing[i] < request.nums:
                tally: dict[str, int] = {}
                for code in np.flatnonzero(counts[i, :_PASS]):
                    tally[_CARD_REASONS[code]] = tally.get(_CARD_REASONS[code], 0) + int(counts[i, code])
                if passing[i]:
                    tally[r.ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = int(passing[i])
                reason = r.gen_reason(tally, int(n_owned[i]))
            if reason is None:
                fitting[name] = float(scores[i])
            else:
                failed[name] = reason
        return failed, fitting

    for i in order.tolist():
        if static(i) is not None:
            continue
        result = state.fit_on(pod, names[i], requests, ctx)
        if result.ok:
            decision = state._decision(names[i], result, {}, {})
            decision._details = details
            return decision
        return None  # the bound said it fits but the reference disagrees: let the reference decide
    failed, fitting = details()
    return Decision(None, failed_nodes=failed, node_scores=fitting, reason=summarize(failed))
