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
from tenantgpu.gpushare.cluster import Decision, _constrained, format_summary
from tenantgpu.gpushare.nvidia import NVIDIA, _policy_contains, cordoned_devices, type_allowed
from tenantgpu.gpushare.policy import node_policy_of, node_score_of_sums, spreads
from tenantgpu.gpushare.request import PERCENTAGE_UNSET, ContainerDeviceRequest
from tenantgpu.gpushare.usage import DeviceHold

if TYPE_CHECKING:
    from tenantgpu.gpushare.cluster import ClusterState
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
                    (
                        dev.count,
                        dev.totalmem,
                        dev.totalcore,
                        dev.used,
                        dev.usedmem,
                        dev.usedcores,
                        dev.health,
                        vendor.owns(dev),
                    )
                )
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
        # kept in step by charge(): what the per-card checks compare against
        self.free_slots = self.count - self.used
        self.free_mem = self.totalmem - self.usedmem
        self.free_cores = self.totalcore - self.usedcores
        self.base_ok = self.owned & self.health & ~self.cordoned
        self._memreq_cache: dict[int, np.ndarray] = {}
        self.scores = np.array([self._node_score(i) for i in range(n)], dtype=np.float64)
        self._type_cache: dict[tuple[str, str], np.ndarray] = {}

    def _node_score(self, i: int) -> float:
        """ComputeDefaultScore from the node sums, the reference's own function."""
        return node_score_of_sums(
            int(self.n_used[i]),
            int(self.n_count[i]),
            int(self.n_usedcores[i]),
            int(self.n_totalcore[i]),
            int(self.n_usedmem[i]),
            int(self.n_totalmem[i]),
        )

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
        self.base_ok = self.owned & self.health & ~self.cordoned

    def charge(self, node: str, hold: DeviceHold, sign: int) -> None:
        pos = self.dev_pos.get((node, hold.uuid))
        if pos is None:
            return
        i = self.dev_node[pos]
        self.used[pos] += sign * hold.slots
        self.usedmem[pos] += sign * hold.usedmem
        self.usedcores[pos] += sign * hold.usedcores
        self.free_slots[pos] -= sign * hold.slots
        self.free_mem[pos] -= sign * hold.usedmem
        self.free_cores[pos] -= sign * hold.usedcores
        self.n_used[i] += sign * hold.slots
        self.n_usedmem[i] += sign * hold.usedmem
        self.n_usedcores[i] += sign * hold.usedcores
        self.scores[i] = self._node_score(i)

    def charge_basics(self, node: str, demand: PodDemand, sign: int) -> None:
        i = self.node_pos[node]
        self.used_cpu[i] += sign * demand.cpu_milli
        self.used_mem[i] += sign * demand.memory
        self.used_pods[i] += sign

    def memory_request(self, percentage: int) -> np.ndarray:
        """Per card, the MiB a percentage request takes (integer division, as HAMi)."""
        cached = self._memreq_cache.get(percentage)
        if cached is None:
            cached = self._memreq_cache[percentage] = self.totalmem * percentage // 100
        return cached

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


def first_basic_fit(state: ClusterState, pod: dict[str, Any], demand: PodDemand) -> Decision | None:
    """For a pod without GPUs and without node constraints: the first node passing the basics, or None.

    None also when a non-plain node (taints, unschedulable) comes first: the reference path decides.
    """
    if state._index is None:
        state._index = ClusterIndex(state)
    ix: ClusterIndex = state._index
    ok = ix.plain & (ix.used_pods + 1 <= ix.cap_pods)
    if demand.cpu_milli > 0:
        ok &= ix.used_cpu + demand.cpu_milli <= ix.cap_cpu
    if demand.memory > 0:
        ok &= ix.used_mem + demand.memory <= ix.cap_mem
    first = int(np.argmax(ok)) if len(ok) else 0
    if not len(ok) or not ok[first]:
        return None
    if not bool(ix.plain[:first].all()):
        return None  # a tainted node comes first and might tolerate this pod
    names = ix.names[:first]
    used = (ix.used_pods[:first].copy(), ix.used_cpu[:first].copy(), ix.used_mem[:first].copy())
    caps = (ix.cap_pods[:first].copy(), ix.cap_cpu[:first].copy(), ix.cap_mem[:first].copy())

    def details() -> tuple[dict[str, str], dict[str, float]]:
        failed = {}
        for i, name in enumerate(names):
            if used[0][i] + 1 > caps[0][i]:
                failed[name] = r.TOO_MANY_PODS
            elif demand.cpu_milli > 0 and used[1][i] + demand.cpu_milli > caps[1][i]:
                failed[name] = r.INSUFFICIENT_CPU
            else:
                failed[name] = r.INSUFFICIENT_MEMORY
        return failed, {}

    return Decision(ix.names[first], requests_gpu=False, details=details)


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
    if n_nodes == 0:
        return None  # nothing to rank; the reference path words "no node" as HAMi does

    # per-card checks, HAMi's order (see _card_codes); here only "does it pass" is needed
    cores = min(request.coresreq, 100)
    if request.memreq > 0:
        memreq: Any = request.memreq
    elif request.mem_percentage != PERCENTAGE_UNSET:
        memreq = ix.memory_request(request.mem_percentage)
    else:
        memreq = 0
    type_ok = ix.type_ok(annotations)
    mutex = _policy_contains(ctx.gpu_policy, "mutex")
    ok = ix.base_ok & (ix.free_slots > 0)
    ok &= ix.free_mem >= memreq
    ok &= ix.free_cores >= cores
    if type_ok is not None:
        ok &= type_ok
    if mutex:
        ok &= ix.used == 0
    if cores == 100:
        ok &= ~((ix.totalcore == 100) & (ix.used > 0))
    elif cores == 0:
        ok &= ~((ix.totalcore != 0) & (ix.usedcores == ix.totalcore))
    passing = np.bincount(ix.dev_node[ok], minlength=n_nodes)

    # kube-scheduler basics, vectorised where they depend on usage
    capacity_code = np.zeros(n_nodes, dtype=np.int8)
    if demand.memory > 0:
        capacity_code[ix.used_mem + demand.memory > ix.cap_mem] = 3
    if demand.cpu_milli > 0:
        capacity_code[ix.used_cpu + demand.cpu_milli > ix.cap_cpu] = 2
    capacity_code[ix.used_pods + 1 > ix.cap_pods] = 1
    needs_static = np.ones(n_nodes, dtype=bool) if _constrained(pod) else ~ix.plain
    fits = ix.registered & (capacity_code == 0) & (ix.n_owned >= request.nums) & (passing >= request.nums)
    scores = ix.scores.copy()
    spread = spreads(node_policy_of(pod, state.cfg))
    # best first: argmax/argmin return the first index among equals, i.e. the node upserted first
    ranked = np.where(fits, scores if spread else -scores, np.inf)

    static_cache: dict[int, str | None] = {}
    snapshot = _Snapshot(ix, pod, request, memreq, cores, type_ok, mutex, capacity_code, needs_static, scores)
    snapshot.passing = passing
    while True:
        i = int(np.argmin(ranked))
        if ranked[i] == np.inf:
            break
        ranked[i] = np.inf
        reason = static_reason(pod, ix.objs[i]) if needs_static[i] else None
        static_cache[i] = reason
        if reason is not None:
            continue
        result = state.fit_on(pod, ix.names[i], requests, ctx)
        if not result.ok:
            return None  # the bound said it fits but the reference disagrees: let the reference decide
        decision = state._decision(ix.names[i], result, {}, {})
        decision._details = lambda: snapshot.details(static_cache)
        decision._scores = lambda: snapshot.fitting_scores(fits, static_cache)
        return decision
    return Decision(
        None, reason=snapshot.summary(static_cache), details=lambda: snapshot.details(static_cache)
    )


class _Snapshot:
    """What failed_nodes / node_scores need, copied at decision time so later placements do not leak in."""

    def __init__(
        self,
        ix: ClusterIndex,
        pod: dict[str, Any],
        request: ContainerDeviceRequest,
        memreq: Any,
        cores: int,
        type_ok: np.ndarray | None,
        mutex: bool,
        capacity_code: np.ndarray,
        needs_static: np.ndarray,
        scores: np.ndarray,
    ) -> None:
        self.names, self.objs = ix.names, list(ix.objs)
        self.dev_node, self.owned = ix.dev_node, ix.owned
        self.arrays = (
            ix.health.copy(),
            ix.cordoned.copy(),
            ix.count,
            ix.used.copy(),
            ix.totalmem,
            ix.usedmem.copy(),
            ix.totalcore,
            ix.usedcores.copy(),
        )
        self.n_owned, self.registered = ix.n_owned.copy(), ix.registered.copy()
        self.pod, self.request, self.memreq, self.cores = pod, request, memreq, cores
        self.type_ok, self.mutex = type_ok, mutex
        self.capacity_code, self.needs_static, self.scores = capacity_code, needs_static, scores
        self.passing: np.ndarray | None = None  # per node, cards passing every check (= _card_counts' PASS)

    def _card_counts(self) -> np.ndarray:
        """Per node and outcome code, how many of its cards end there (first failing check wins)."""
        health, cordoned, count, used, totalmem, usedmem, totalcore, usedcores = self.arrays
        false = np.zeros(len(used), dtype=bool)
        cores = self.cores
        conditions = [
            ~health,
            cordoned,
            false if self.type_ok is None else ~self.type_ok,
            count <= used,
            (used > 0) if self.mutex else false,
            totalmem - usedmem < self.memreq,
            totalcore - usedcores < cores,
            (totalcore == 100) & (used > 0) if cores == 100 else false,
            (totalcore != 0) & (usedcores == totalcore) if cores == 0 else false,
        ]
        codes = np.select(conditions, list(range(_PASS)), default=_PASS)
        n = len(self.names)
        return np.bincount(self.dev_node[self.owned] * _K + codes[self.owned], minlength=n * _K).reshape(
            n, _K
        )

    def _static_reasons(self, static_cache: dict[int, str | None]) -> dict[int, str]:
        out = {}
        for i in np.flatnonzero(self.needs_static).tolist():
            reason = static_cache[i] if i in static_cache else static_reason(self.pod, self.objs[i])
            if reason is not None:
                out[i] = reason
        return out

    def summary(self, static_cache: dict[int, str | None]) -> str:
        """summarize(failed_nodes) computed over arrays, without building a string per node.

        The per-card outcomes are counted only when some node fails at its cards; a pod every node
        refuses earlier (taints, affinity, capacity) needs none of them.
        """
        counts = None if self.passing is not None else self._card_counts()
        nums = self.request.nums
        n = len(self.names)
        stage = np.zeros(n, dtype=np.int8)  # 0 fits, 1 static, 2 capacity, 3 unregistered, 4 devices, 5 cards
        passing = self.passing if counts is None else counts[:, _PASS]
        stage[passing < nums] = 5
        stage[self.n_owned < nums] = 4
        stage[~self.registered] = 3
        stage[self.capacity_code > 0] = 2
        tally: dict[str, int] = {}
        static = self._static_reasons(static_cache)
        for i, reason in static.items():
            stage[i] = 1
            tally[reason] = tally.get(reason, 0) + 1
        for code in (1, 2, 3):
            hits = int(np.count_nonzero((stage == 2) & (self.capacity_code == code)))
            if hits:
                tally[_CAPACITY_REASONS[code]] = tally.get(_CAPACITY_REASONS[code], 0) + hits  # type: ignore[index]
        for value, reason in ((3, r.NODE_UNREGISTERED), (4, r.NODE_INSUFFICIENT_DEVICE)):
            hits = int(np.count_nonzero(stage == value))
            if hits:
                tally[reason] = hits
        cards = stage == 5
        if not cards.any():
            return format_summary(tally, int(np.count_nonzero(stage)))
        if counts is None:
            counts = self._card_counts()
        per_reason: dict[str, np.ndarray] = {}
        for code, reason in enumerate(_CARD_REASONS):
            hit = counts[:, code] > 0
            per_reason[reason] = per_reason[reason] | hit if reason in per_reason else hit
        per_reason[r.ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = passing > 0
        for reason, hit in per_reason.items():
            hits = int(np.count_nonzero(hit & cards))
            if hits:
                tally[reason] = hits
        return format_summary(tally, int(np.count_nonzero(stage)))

    def fitting_scores(self, fits: np.ndarray, static_cache: dict[int, str | None]) -> dict[str, float]:
        """details()'s node scores alone: a node fits iff it passed the bound (`fits`) and its static checks."""
        fitting: dict[str, float] = {}
        for i in np.flatnonzero(fits).tolist():
            if i in static_cache:
                reason = static_cache[i]
            else:
                reason = static_reason(self.pod, self.objs[i]) if self.needs_static[i] else None
            if reason is None:
                fitting[self.names[i]] = float(self.scores[i])
        return fitting

    def details(self, static_cache: dict[int, str | None]) -> tuple[dict[str, str], dict[str, float]]:
        # the per-card outcomes are counted once, and only if some node fails at its cards
        counts = None if self.passing is not None else self._card_counts()
        pass_counts = self.passing if counts is None else counts[:, _PASS]
        nums = self.request.nums
        failed: dict[str, str] = {}
        fitting: dict[str, float] = {}
        for i, name in enumerate(self.names):
            if i in static_cache:
                reason = static_cache[i]
            else:
                reason = static_reason(self.pod, self.objs[i]) if self.needs_static[i] else None
            if reason is None and self.capacity_code[i]:
                reason = _CAPACITY_REASONS[self.capacity_code[i]]
            if reason is None and not self.registered[i]:
                reason = r.NODE_UNREGISTERED
            if reason is None and self.n_owned[i] < nums:
                reason = r.NODE_INSUFFICIENT_DEVICE
            passing = int(pass_counts[i])
            if reason is None and passing < nums:
                if counts is None:
                    counts = self._card_counts()
                tally: dict[str, int] = {}
                for code in np.flatnonzero(counts[i, :_PASS]):
                    tally[_CARD_REASONS[code]] = tally.get(_CARD_REASONS[code], 0) + int(counts[i, code])
                if passing:
                    tally[r.ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = passing
                reason = r.gen_reason(tally, int(self.n_owned[i]))
            if reason is None:
                fitting[name] = float(self.scores[i])
            else:
                failed[name] = reason
        return failed, fitting
