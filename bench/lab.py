"""The running lab under load: pods/s from create to Running, p50/p99 startup, and Allocate time per node.

`python -m bench lab` starts a lab with `tenantgpu up -d` (10 tenants × 2 workers × 8 L4, deviceSplitCount
20), then creates 2,000 fractional pods spread over the tenants, each through the whole way of one pod:
the tenant API server, HAMi's webhook through the konnectivity tunnel, HAMi's scheduler (filter, score,
node lock, bind), the kubelet and the device plugin's Allocate.

The burst the goals are measured on comes from the tenants' clients, one per tenant, each creating its
pods as fast as it can: one after another, one request in flight, as `kubectl apply -f`, `kubectl create
-f` and a loop over the official Python client send them. Ten clients then create as fast as the lab
admits them.

What is measured, all on this process's monotonic clock from watch arrival times (Kubernetes timestamps
have one-second resolution, too coarse here):
- startup latency: the create request sent → the first watch event showing the pod `Running`; and from
  the create acknowledged (the pod's creation, where the Kubernetes SLO's clock starts);
- pods/s: pods Running / (last Running − first create sent), and the sustained rate between the 10th and
  the 90th percentile of Running arrivals;
- Allocate per node: the pod seen bound (`spec.nodeName`, `bind-phase: allocating`) → seen with
  `hami.io/bind-phase: success`; and how long each node lock (`hami.io/mutex.lock`) was seen held.

After the burst, PACED_PODS more pods (default PODS / 2) are created at RATE pods/s (default 50), the way
Kubernetes' density tests measure startup latency: at a steady creation rate, not behind a queue.

Then an overload runs on a fresh lab: the same 2,000 pods from a load generator that keeps IN_FLIGHT
(default 50) create requests open at once, more than any of those clients sends (PER_TENANT=k gives
each tenant's client k creates in flight in the burst, for a look between the two). The lab admits pods
faster than it places them, so they queue before their binding: it shows how the lab degrades, not a
goal. OVERLOAD=0 skips it.

Environment: TENANTS, PODS to scale; PIN=1 pins each lab process to a core of its own
(round robin over the cores this process may use; Linux) before the load; PROFILE=1 runs py-spy (dev extra) against the lab
process during the burst (PROFILE=workers: against its first worker process) and prints where its time goes (needs ptrace rights);
PROFILE=native samples every core with Linux perf instead and prints each process's CPU by library:
the interpreter, the kernel, TLS, uvloop, orjson, SQLite (bench/_native.py). The `up -d` figures of the
seed and a 100-tenant lab are bench/kamaji.py's; they are shown here from bench/results/kamaji.json.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import _native as native

RESULTS = Path(__file__).resolve().parent / "results"
NODE_LOCK = "hami.io/mutex.lock"
BIND_PHASE = "hami.io/bind-phase"
WAIT_SECONDS = 180.0


def lab_yaml(tenants: int, workers: int, gpus: int, split: int) -> str:
    lines = [
        "apiVersion: tenantgpu.io/v1alpha1",
        "kind: Lab",
        "metadata:",
        "  name: bench-lab",
        "spec:",
        "  hami:",
        f"    deviceSplitCount: {split}",
        "  tenants:",
    ]
    for t in range(tenants):
        lines += [f"    - name: tenant-{t:02d}", "      workers:"]
        for w in range(workers):
            lines += [
                f"        - name: worker-{t:02d}-{w}",
                # kubelet's default of 110 pods would cap a node below its 160 GPU slots.
                "          pods: 250",
                "          gpus:",
                "            - type: NVIDIA L4",
                "              memory: 23034",
                f"              count: {gpus}",
            ]
    return "\n".join(lines) + "\n"


def fractional_pod(name: str) -> dict[str, Any]:
    """One slice: 1,000 MiB and 5 % of an L4 (20 fit a card, so deviceSplitCount is the limit)."""
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000", "nvidia.com/gpucores": "5"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "cuda", "image": "cuda-sample", "resources": {"limits": limits}}]},
    }


@dataclass
class PodTimes:
    sent: float = 0.0
    created: float = 0.0
    bound: float | None = None
    allocated: float | None = None
    running: float | None = None
    node: str = ""


@dataclass
class Observations:
    pods: dict[tuple[str, str], PodTimes] = field(default_factory=dict)
    lock_since: dict[str, float] = field(default_factory=dict)
    lock_held: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    create_errors: list[str] = field(default_factory=list)
    all_running: asyncio.Event = field(default_factory=asyncio.Event)
    expected: int = 0
    running: int = 0

    def on_pod(self, tenant: str, obj: dict[str, Any]) -> None:
        now = time.perf_counter()
        times = self.pods.get((tenant, obj["metadata"]["name"]))
        if times is None:
            return
        node = (obj.get("spec") or {}).get("nodeName")
        if node and times.bound is None:
            times.bound, times.node = now, f"{tenant}/{node}"
        phase = (obj["metadata"].get("annotations") or {}).get(BIND_PHASE)
        if phase == "success" and times.allocated is None:
            times.allocated = now
        if (obj.get("status") or {}).get("phase") == "Running" and times.running is None:
            times.running = now
            self.running += 1
            if self.running >= self.expected:
                self.all_running.set()

    def on_node(self, tenant: str, obj: dict[str, Any]) -> None:
        now = time.perf_counter()
        name = f"{tenant}/{obj['metadata']['name']}"
        locked = NODE_LOCK in (obj["metadata"].get("annotations") or {})
        if locked and name not in self.lock_since:
            self.lock_since[name] = now
        elif not locked and name in self.lock_since:
            self.lock_held[name].append(now - self.lock_since.pop(name))


@dataclass(frozen=True)
class Ceilings:
    """The two pods/s a burst cannot pass, from the CPU each process took per pod: the busiest process
    on one core of its own (the event loop is one thread), and all of them, this one included, on every
    core the machine gives them. A run's pods/s sits under the lower one; which one binds says whether
    cutting the busiest process alone could help."""

    one_core: float
    all_cores: float

    @classmethod
    def of(cls, process_ms: list[float], client_ms: float, cores: int) -> Ceilings:
        busiest, total = max(process_ms), sum(process_ms) + client_ms
        return cls(
            round(1000 / busiest, 1) if busiest > 0 else float("inf"),
            round(1000 * cores / total, 1) if total > 0 else float("inf"),
        )


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _follow(client: Any, resource: str, tenant: str, handler: Any, ready: asyncio.Event) -> None:
    """List + watch one resource, calling `handler(tenant, obj)` on every event as it arrives."""
    listing = await client.list(resource, "default" if resource == "pods" else None)
    rv = listing["metadata"]["resourceVersion"]
    ready.set()
    while True:
        async for event in client.watch(
            resource, "default" if resource == "pods" else None, resource_version=rv, timeout_seconds=600
        ):
            rv = event.object.get("metadata", {}).get("resourceVersion", rv)
            if event.type in ("ADDED", "MODIFIED"):
                handler(tenant, event.object)


_OVERLOAD_FIGURES = (
    "pods",
    "running",
    "create_errors",
    "creates_per_second",
    "create_request_p50_ms",
    "create_request_p99_ms",
    "pods_per_second",
    "sustained_pods_per_second_p10_p90",
    "startup_p50_s",
    "startup_p99_s",
    "startup_from_created_p50_s",
    "startup_from_created_p99_s",
    "leftover_node_locks",
    "lab_cpu_ms_per_pod",
    "bench_client_cpu_ms_per_pod",
    "stages",
    "not_running",
)

_PACED_FIGURES = (
    "pods",
    "running",
    "create_errors",
    "creates_per_second",
    "pods_per_second",
    "startup_p50_s",
    "startup_p99_s",
    "startup_from_created_p50_s",
    "startup_from_created_p99_s",
)


async def _create_all(
    clients: dict[str, Any],
    seen: Observations,
    names: list[tuple[str, str]],
    in_flight: int,
    rate: float | None,
    per_tenant: bool = False,
) -> None:
    """Creates the pods with at most `in_flight` requests open (with `per_tenant`, that many per tenant's
    client); `rate` paces the sends (pods/s)."""
    for key in names:
        seen.pods[key] = PodTimes()
    shared = asyncio.Semaphore(in_flight)
    own = {tenant: asyncio.Semaphore(in_flight) for tenant in clients}

    async def create(tenant: str, name: str, due: float) -> None:
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        async with own[tenant] if per_tenant else shared:
            times = seen.pods[(tenant, name)]
            times.sent = time.perf_counter()
            try:
                await clients[tenant].create("pods", fractional_pod(name), "default")
            except Exception as err:  # a refused pod is a result, reported below
                seen.create_errors.append(f"{tenant}/{name}: {err}")
                seen.expected -= 1
            times.created = time.perf_counter()

    begin = time.perf_counter()
    step = 1.0 / rate if rate else 0.0
    await asyncio.gather(*(create(t, n, begin + i * step) for i, (t, n) in enumerate(names)))


async def _load(
    state: Path,
    tenants: list[str],
    pods: int,
    in_flight: int,
    pids: list[int],
    paced_pods: int,
    paced_rate: float,
    per_tenant: bool = False,
) -> dict[str, Any]:
    from tenantgpu.kubeclient import KubeClient

    clients = {
        t: KubeClient.from_kubeconfig(state / "kubeconfigs" / f"{t}.kubeconfig", pool_size=in_flight)
        for t in tenants
    }
    seen = Observations(expected=pods)
    # The watch handlers feed the phase being measured (the burst, then the paced run).
    current = [seen]
    followers: list[asyncio.Task[None]] = []
    for tenant, client in clients.items():
        for resource, handler in (
            ("pods", lambda t, o: current[0].on_pod(t, o)),
            ("nodes", lambda t, o: current[0].on_node(t, o)),
        ):
            ready = asyncio.Event()
            followers.append(asyncio.create_task(_follow(client, resource, tenant, handler, ready)))
            await ready.wait()
    requests_before = {t: await _request_counts(c) for t, c in clients.items()}
    names = [(tenants[i % len(tenants)], f"bench-{i:05d}") for i in range(pods)]
    cpu_start, lab_cpu_start = time.process_time(), _cpu_by_process(pids)
    start = time.perf_counter()
    await _create_all(clients, seen, names, in_flight, rate=None, per_tenant=per_tenant)
    created_at = time.perf_counter()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(seen.all_running.wait(), WAIT_SECONDS)
    running_at = time.perf_counter()
    # The schedulers' Events trail the pods (client-go's broadcaster writes them one at a time, after
    # the fact): the CPU figures wait for them, so they count every Event the pods cost.
    settled = await _events_settled(clients, requests_before, pids)
    events_lag = settled.at
    client_cpu = settled.client_cpu - cpu_start
    lab_cpu_end = settled.lab_cpu
    wall = settled.at - start
    per_call: collections.Counter[str] = collections.Counter()
    for tenant, client in clients.items():
        per_call.update(await _request_counts(client))
        per_call.subtract(requests_before[tenant])
    leftover_locks = 0
    for client in clients.values():
        for node in (await client.list("nodes"))["items"]:
            leftover_locks += NODE_LOCK in (node["metadata"].get("annotations") or {})
    stuck = await _stuck(clients, seen)
    summary = _summarise(seen, start, created_at, pods, leftover_locks)
    summary["bench_client_cpu_ms_per_pod"] = round(1000 * client_cpu / pods, 2)
    summary["events_settled_after_running_s"] = round(events_lag - running_at, 2)
    per_process = [1000 * (lab_cpu_end[p] - lab_cpu_start[p]) / pods for p in pids]
    summary["lab_processes"] = len(pids)
    # Pods/s is about the cores these processes get over the CPU they need per pod; on this machine
    # they get about 1.7–1.8 of its 2 cores in every burst, whatever the host's phase.
    busy = sum(lab_cpu_end[p] - lab_cpu_start[p] for p in pids) + client_cpu
    summary["cores_busy"] = round(busy / wall, 2)
    summary["cores"] = len(os.sched_getaffinity(0))
    summary["lab_cpu_ms_per_pod"] = round(sum(per_process), 2)
    summary["lab_cpu_ms_per_pod_by_process"] = [round(ms, 2) for ms in per_process]
    summary["lab_process_roles"] = [process_role(p) for p in pids]
    ceilings = Ceilings.of(per_process, summary["bench_client_cpu_ms_per_pod"], summary["cores"])
    summary["ceiling_busiest_process_one_core_pods_per_second"] = ceilings.one_core
    summary["ceiling_all_processes_all_cores_pods_per_second"] = ceilings.all_cores
    if paced_pods:
        # Kubernetes measures its startup SLO under a steady pod creation rate, not a burst (its
        # density tests create pods at a fixed rate): this run shows the latency the pipeline
        # itself adds when it is not queueing behind thousands of pods created at once.
        paced = Observations(expected=paced_pods)
        current[0] = paced
        more = [(tenants[i % len(tenants)], f"paced-{i:05d}") for i in range(paced_pods)]
        paced_start = time.perf_counter()
        await _create_all(clients, paced, more, in_flight, rate=paced_rate, per_tenant=per_tenant)
        paced_created = time.perf_counter()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(paced.all_running.wait(), WAIT_SECONDS)
        figures = _summarise(paced, paced_start, paced_created, paced_pods, 0)
        summary["paced"] = {
            "rate_per_second": paced_rate,
            **{k: figures[k] for k in _PACED_FIGURES},
            "not_running": dict(await _stuck(clients, paced)),
        }
    for task in followers:
        task.cancel()
    await asyncio.gather(*followers, return_exceptions=True)
    for client in clients.values():
        await client.close()
    summary["api_requests_per_pod"] = {
        call: round(n / pods, 2) for call, n in per_call.most_common() if n / pods >= 0.05
    }
    summary["not_running"] = dict(stuck)
    summary["api_requests_per_pod_total"] = round(sum(per_call.values()) / pods, 2)
    return summary


async def _stuck(clients: dict[str, Any], seen: Observations) -> collections.Counter[str]:
    """How many of the observed pods never ran, by where they got to."""
    stuck: collections.Counter[str] = collections.Counter()
    for tenant, client in clients.items():
        for pod in (await client.list("pods", "default"))["items"]:
            times = seen.pods.get((tenant, pod["metadata"]["name"]))
            if times is not None and times.running is None:
                stuck[_stuck_reason(pod)] += 1
    return stuck


def _stuck_reason(pod: dict[str, Any]) -> str:
    """Where a pod that never ran got to: phase, node, bind-phase and the PodScheduled message."""
    annotations = pod["metadata"].get("annotations") or {}
    status = pod.get("status") or {}
    scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
    return (
        f"phase={status.get('phase')} node={(pod.get('spec') or {}).get('nodeName') or '-'} "
        f"bind-phase={annotations.get(BIND_PHASE, '-')} scheduled={scheduled.get('message', '-')[:80]}"
    )


@dataclass
class Settled:
    """When the tenants' Event writes stopped, and the CPU counters read right after the scrape round
    that first saw their final count."""

    at: float
    lab_cpu: dict[int, float]
    client_cpu: float


async def _events_settled(
    clients: dict[str, Any],
    before: dict[str, collections.Counter[str]],
    pids: list[int],
    quiet: float = 0.5,
    limit: float = 60.0,
) -> Settled:
    """When the tenants' Event writes stopped: their count unchanged for `quiet` seconds (at most
    `limit` seconds of waiting). Each round scrapes every tenant's /metrics, which costs the lab some
    tens of ms of CPU; the CPU is read when the count last changed, so the rounds of the quiet wait
    (about a twentieth of the lab process's CPU in a burst) are not counted as the pods' work."""
    deadline, last = time.perf_counter() + limit, -1
    settled = Settled(time.perf_counter(), _cpu_by_process(pids), time.process_time())
    while time.perf_counter() < deadline:
        total = 0
        for tenant, client in clients.items():
            counts = await _request_counts(client)
            total += sum(n - before[tenant][call] for call, n in counts.items() if call.endswith(" events"))
        now = time.perf_counter()
        if total != last:
            last = total
            settled = Settled(now, _cpu_by_process(pids), time.process_time())
        elif now - settled.at >= quiet:
            break
        await asyncio.sleep(0.1)
    return settled


async def _request_counts(client: Any) -> collections.Counter[str]:
    """`apiserver_request_total` by verb and resource, from the tenant API server's /metrics."""
    counts: collections.Counter[str] = collections.Counter()
    for line in (await client.get_text("/metrics")).splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, _, value = line[len("apiserver_request_total{") :].rpartition("} ")
        labels = dict(part.split("=", 1) for part in labels_text.split(",") if "=" in part)
        verb, resource = labels.get("verb", "").strip('"'), labels.get("resource", "").strip('"')
        counts[f"{verb} {resource}"] += int(float(value))
    return counts


def _summarise(
    seen: Observations, start: float, created_at: float, pods: int, leftover_locks: int
) -> dict[str, Any]:
    done = [p for p in seen.pods.values() if p.running is not None]
    running_at = sorted(p.running for p in done if p.running is not None)
    latencies = [p.running - p.sent for p in done if p.running is not None]
    # The Kubernetes SLO's clock starts at the pod's creation (the create acknowledged), not when a
    # client first asked: time spent waiting for admission is not startup time there.
    from_created = [p.running - p.created for p in done if p.running is not None and p.created]
    admission = [p.created - p.sent for p in seen.pods.values() if p.created]
    elapsed = (running_at[-1] - start) if running_at else float("nan")
    lo, hi = int(0.1 * len(running_at)), int(0.9 * len(running_at)) - 1
    sustained = (hi - lo) / (running_at[hi] - running_at[lo]) if hi > lo else float("nan")
    per_node: dict[str, dict[str, Any]] = {}
    by_node: dict[str, list[PodTimes]] = collections.defaultdict(list)
    for p in done:
        by_node[p.node].append(p)
    for node, placed in sorted(by_node.items()):
        allocate = [p.allocated - p.bound for p in placed if p.allocated and p.bound]
        first = min(p.bound for p in placed if p.bound)
        last = max(p.allocated for p in placed if p.allocated) if allocate else first
        per_node[node] = {
            "pods": len(placed),
            "allocate_p50_ms": round(1000 * statistics.median(allocate), 1) if allocate else None,
            "allocate_p99_ms": round(1000 * _percentile(allocate, 0.99), 1) if allocate else None,
            "lock_held_p50_ms": round(1000 * statistics.median(seen.lock_held[node]), 1)
            if seen.lock_held[node]
            else None,
            "pods_per_second": round(len(placed) / (last - first), 1) if last > first else None,
        }
    allocate_all = [p.allocated - p.bound for p in done if p.allocated and p.bound]
    return {
        "stages": _stages(done),
        "pods": pods,
        "running": len(done),
        "create_errors": len(seen.create_errors),
        "first_create_errors": seen.create_errors[:3],
        "create_phase_s": round(created_at - start, 3),
        "creates_per_second": round(pods / (created_at - start), 1),
        "create_request_p50_ms": round(1000 * statistics.median(admission), 1) if admission else None,
        "create_request_p99_ms": round(1000 * _percentile(admission, 0.99), 1) if admission else None,
        "seconds_to_all_running": round(elapsed, 3),
        "pods_per_second": round(len(done) / elapsed, 1) if done else 0.0,
        "sustained_pods_per_second_p10_p90": round(sustained, 1),
        "startup_p50_s": round(_percentile(latencies, 0.5), 3),
        "startup_p99_s": round(_percentile(latencies, 0.99), 3),
        "startup_max_s": round(max(latencies), 3) if latencies else None,
        "startup_from_created_p50_s": round(_percentile(from_created, 0.5), 3),
        "startup_from_created_p99_s": round(_percentile(from_created, 0.99), 3),
        "allocate_p50_ms": round(1000 * statistics.median(allocate_all), 1) if allocate_all else None,
        "allocate_p99_ms": round(1000 * _percentile(allocate_all, 0.99), 1) if allocate_all else None,
        "leftover_node_locks": leftover_locks,
        "per_node": per_node,
    }


_STAGES = (
    ("created → bound", lambda p: p.bound - p.created),
    ("bound → allocated", lambda p: p.allocated - p.bound),
    ("allocated → Running", lambda p: p.running - p.allocated),
)


def _stages(done: list[PodTimes]) -> dict[str, dict[str, float]]:
    """Where startup time goes: p50 and p99 of each stage over all pods, and each stage's mean over the
    slowest 1 % from creation (the pods that make the p99), in ms."""
    timed = [p for p in done if p.created and p.bound and p.allocated and p.running]
    if not timed:
        return {}
    timed.sort(key=lambda p: (p.running or 0.0) - p.created)
    tail = timed[-max(1, len(timed) // 100) :]
    return {
        name: {
            "p50_ms": round(1000 * _percentile([stage(p) for p in timed], 0.5), 1),
            "p99_ms": round(1000 * _percentile([stage(p) for p in timed], 0.99), 1),
            "slowest_1pct_mean_ms": round(1000 * statistics.fmean(stage(p) for p in tail), 1),
        }
        for name, stage in _STAGES
    }


def _tenantgpu(*args: str, cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tenantgpu", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"tenantgpu {' '.join(args)}: {done.stderr.strip()}")
    return time.perf_counter() - start


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (its threads included), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pin_to_alternate_cores(pids: list[int]) -> None:
    """Each lab process (all its threads) on a core of its own, round robin; the load generator floats."""
    cores = sorted(os.sched_getaffinity(0))
    for i, pid in enumerate(pids):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(int(task.name), {cores[i % len(cores)]})


def lab_processes(pid: int) -> list[int]:
    """The lab process and its children (worker and control-plane processes)."""
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            children += [int(c) for c in (task / "children").read_text().split()]
    return [pid, *children]


def process_role(pid: int) -> str:
    """What a lab process serves, from its command line: the lab itself, workers, or a DataStore's tenants."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return "gone"
    if "tenantgpu.lab.workerprocess" in argv:
        return "workers"
    if "tenantgpu.kamaji.hostprocess" in argv and "--name" in argv:
        return argv[argv.index("--name") + 1]
    return "lab"


def _cpu_by_process(pids: list[int]) -> dict[int, float]:
    return {p: _cpu_seconds(p) for p in pids}


def _start_profiler(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("PROFILE=1 needs py-spy (pip install -e '.[dev]')")
        return None
    return subprocess.Popen(
        [spy, "record", "--pid", str(pid), "--rate", "200", "--gil", "--format", "raw", "--output", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def summarise_profile(collapsed: Path, top: int = 25) -> dict[str, Any]:
    """Self time per function and inclusive time per project module from py-spy's collapsed stacks."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        own[frames[-1]] += count
        modules = set()
        for frame in frames:
            # a frame reads "function (path/to/file.py:line)"
            where = frame.rpartition("(")[2].split(":")[0]
            if "tenantgpu/" in where:
                modules.add("tenantgpu/" + where.split("tenantgpu/", 1)[1])
            elif "site-packages/" in where:
                modules.add(where.split("site-packages/", 1)[1].split("/", 1)[0])
            elif where.endswith(".py"):
                modules.add("stdlib:" + Path(where).name)
        for module in modules:
            inclusive[module] += count
    share = (lambda n: round(100 * n / total, 1)) if total else (lambda n: 0.0)
    return {
        "samples": total,
        "self_top": [(frame, share(n)) for frame, n in own.most_common(top)],
        "inclusive_by_module": [(module, share(n)) for module, n in inclusive.most_common(top)],
    }


def run(
    tenants: int,
    pods: int,
    in_flight: int,
    profile: bool,
    paced_pods: int = 0,
    paced_rate: float = 50.0,
    per_tenant: bool = False,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tenantgpu-bench-lab-") as tmp:
        work = Path(tmp)
        spec = work / "lab.yaml"
        spec.write_text(lab_yaml(tenants, workers=2, gpus=8, split=20))
        state = work / "state"
        up = _tenantgpu("up", "-d", "-f", str(spec), "--state-dir", str(state), cwd=work)
        profiler = None
        native_profiler = None
        native_data = work / "perf.data"
        try:
            if profile and os.environ.get("PROFILE") == "native":
                native_profiler = native.start(native_data)
            elif profile:
                # PROFILE=workers samples the first worker process instead of the API servers' process.
                lab_pids = lab_processes(int((state / "lab.pid").read_text()))
                workers = [p for p in lab_pids if process_role(p) == "workers"]
                target = workers[0] if os.environ.get("PROFILE") == "workers" and workers else lab_pids[0]
                profiler = _start_profiler(target, work / "profile.txt")
            names = [f"tenant-{t:02d}" for t in range(tenants)]
            pids = lab_processes(int((state / "lab.pid").read_text()))
            if os.environ.get("PIN") == "1":
                _pin_to_alternate_cores(pids)
            from tenantgpu import eventloop

            # The load generator shares the lab's two cores: it runs on uvloop like the lab's processes.
            result = eventloop.run(
                _load(state, names, pods, in_flight, pids, paced_pods, paced_rate, per_tenant)
            )
            if native_profiler is not None:
                roles = {pid: process_role(pid) for pid in pids} | {os.getpid(): "bench client"}
                result["native_profile"] = native.stop(native_profiler, native_data, roles)
                native_profiler = None
        finally:
            if native_profiler is not None:
                native_profiler.kill()
            if profiler is not None:
                err = native.interrupt(profiler)
            _tenantgpu("down", "--state-dir", str(state), cwd=work)
            RESULTS.mkdir(parents=True, exist_ok=True)
            shutil.copy(state / "logs" / "lab.log", RESULTS / "lab-bench.log")
        result = {"tenants": tenants, "nodes": 2 * tenants, "gpus": 16 * tenants, "in_flight": in_flight,
                  "up_detached_bench_lab_s": round(up, 2), **result}  # fmt: skip
        if profiler is not None:
            collapsed = work / "profile.txt"
            if collapsed.exists():
                result["profile"] = summarise_profile(collapsed)
                RESULTS.mkdir(parents=True, exist_ok=True)
                shutil.copy(collapsed, RESULTS / "lab-profile.collapsed")
            else:
                result["profile_error"] = err.decode(errors="replace").strip()[-500:]
    return result


def _startup_rows(phase: str, figures: dict[str, Any]) -> list[tuple[str, str]]:
    """The startup latencies of a further run (paced, one client per tenant) and what did not run."""
    return [
        (f"{phase}: startup p50 / p99 from create sent",
         f"{figures['startup_p50_s']} / {figures['startup_p99_s']} s"),
        (f"{phase}: startup p50 / p99 from creation",
         f"{figures['startup_from_created_p50_s']} / {figures['startup_from_created_p99_s']} s"),
        (f"{phase}: pods not Running at the end",
         json.dumps(figures["not_running"]) if figures["not_running"] else "none"),
    ]  # fmt: skip


def _print(result: dict[str, Any]) -> None:
    rows = [
        ("lab", f"{result['tenants']} tenants × 2 nodes × 8 L4, deviceSplitCount 20"),
        ("Python of the lab and the clients", result.get("python", "")),
        ("clients (each creating its pods as fast as it can)", result.get("clients", f"{result['in_flight']} requests in flight")),
        ("pods created / Running", f"{result['pods']} / {result['running']}"),
        ("create errors", str(result["create_errors"])),
        ("creates/s (admission through the tunnel)", str(result["creates_per_second"])),
        ("create request p50 / p99", f"{result['create_request_p50_ms']} / {result['create_request_p99_ms']} ms"),
        ("pods/s create → Running (goal ≥ 200)", str(result["pods_per_second"])),
        ("sustained pods/s (p10 → p90)", str(result["sustained_pods_per_second_p10_p90"])),
        ("startup p50 / p99 from create sent (goal p99 ≤ 1 s)",
         f"{result['startup_p50_s']} / {result['startup_p99_s']} s"),
        ("startup p50 / p99 from creation (the SLO's clock)",
         f"{result['startup_from_created_p50_s']} / {result['startup_from_created_p99_s']} s"),
        ("Allocate (bound → bind-phase success) p50 / p99",
         f"{result['allocate_p50_ms']} / {result['allocate_p99_ms']} ms"),
        ("node locks left behind", str(result["leftover_node_locks"])),
        ("pods not Running at the end", json.dumps(result["not_running"]) if result["not_running"] else "none"),
        (
            f"lab CPU per pod, {result['lab_processes']} processes",
            f"{result['lab_cpu_ms_per_pod']} ms ("
            + " + ".join(f"{role} {ms}" for role, ms in zip(result["lab_process_roles"],
                                                             result["lab_cpu_ms_per_pod_by_process"],
                                                             strict=True))
            + ")",
        ),
        ("bench client CPU per pod (this process)", f"{result['bench_client_cpu_ms_per_pod']} ms"),
        ("Events written, after the last pod Running", f"{result['events_settled_after_running_s']} s"),
        ("cores busy during the burst (lab + this process)", f"{result['cores_busy']} of {result['cores']}"),
        ("pods/s ceilings: busiest process on 1 core, all on every core",
         f"{result['ceiling_busiest_process_one_core_pods_per_second']} / "
         f"{result['ceiling_all_processes_all_cores_pods_per_second']}"),
        ("tenantgpu up -d, this lab", f"{result['up_detached_bench_lab_s']} s"),
    ]  # fmt: skip
    if "paced" in result:
        paced = result["paced"]
        rows += [
            (f"paced: {paced['pods']} more pods at {paced['rate_per_second']:g}/s, Running",
             f"{paced['running']} ({paced['create_errors']} create errors)"),
            *_startup_rows("paced", paced),
        ]  # fmt: skip
    if "overload" in result:
        over = result["overload"]
        bound = over["stages"].get("created → bound", {})
        rows += [
            (f"overload, {over['in_flight']} requests in flight: {over['pods']} pods, Running",
             f"{over['running']} ({over['create_errors']} create errors, {over['leftover_node_locks']} locks left)"),
            ("overload: creates/s, pods/s (sustained)",
             f"{over['creates_per_second']}, {over['pods_per_second']} ({over['sustained_pods_per_second_p10_p90']})"),
            ("overload: create request p50 / p99",
             f"{over['create_request_p50_ms']} / {over['create_request_p99_ms']} ms"),
            ("overload: created → bound p50 / p99 (queued for placement)",
             f"{bound.get('p50_ms')} / {bound.get('p99_ms')} ms"),
            ("overload: lab CPU + client CPU per pod",
             f"{over['lab_cpu_ms_per_pod']} + {over['bench_client_cpu_ms_per_pod']} ms"),
            *_startup_rows("overload", over),
        ]  # fmt: skip
    kamaji = RESULTS / "kamaji.json"
    if kamaji.exists():
        figures = json.loads(kamaji.read_text())
        rows.append(
            ("tenantgpu up -d, seed lab (bench/kamaji)", f"{figures.get('up_detached_seed_s', 0):.2f} s")
        )
        rows.append(
            (
                "tenantgpu up -d, 100 tenants (bench/kamaji)",
                f"{figures.get('up_detached_100_tenants_s', 0):.2f} s",
            )
        )
    width = max(len(r[0]) for r in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    print(f"\n{'node':<22} {'pods':>5} {'Allocate p50':>13} {'p99':>9} {'lock held p50':>14} {'pods/s':>7}")
    for node, n in result["per_node"].items():
        print(
            f"{node:<22} {n['pods']:>5} {n['allocate_p50_ms']!s:>10} ms {n['allocate_p99_ms']!s:>6} ms "
            f"{n['lock_held_p50_ms']!s:>11} ms {n['pods_per_second']!s:>7}"
        )
    if result.get("stages"):
        print(f"\n{'startup stage':<22} {'p50':>9} {'p99':>9} {'slowest 1 %, mean':>18}")
        for stage, ms in result["stages"].items():
            print(
                f"{stage:<22} {ms['p50_ms']:>6} ms {ms['p99_ms']:>6} ms {ms['slowest_1pct_mean_ms']:>15} ms"
            )
    print(f"\nAPI requests per pod ({result['api_requests_per_pod_total']} in all):")
    for call, n in result["api_requests_per_pod"].items():
        print(f"  {n:6.2f}  {call}")
    if "profile" in result:
        profile = result["profile"]
        print(f"\nprofile of the lab process ({profile['samples']} samples), inclusive by module:")
        for module, pct in profile["inclusive_by_module"][:15]:
            print(f"  {pct:5.1f} %  {module}")
        print("self time, top functions:")
        for frame, pct in profile["self_top"][:15]:
            print(f"  {pct:5.1f} %  {frame}")
    elif "profile_error" in result:
        print(f"\nprofiler failed: {result['profile_error']}")
    if "native_profile" in result:
        _print_native(result["native_profile"])


def _print_native(profile: dict[str, Any]) -> None:
    if "error" in profile:
        print(f"\nperf failed: {profile['error']}")
        return
    print("\nCPU by process and library (perf, every core, during the load):")
    for role, figures in profile.items():
        shares = ", ".join(f"{name} {pct}" for name, pct in figures["by_library"][:8])
        print(f"  {role:<13} {figures['cpu_s']:6.2f} s  % {shares}")


def main() -> None:
    tenants = int(os.environ.get("TENANTS", "10"))
    pods = int(os.environ.get("PODS", "2000"))
    in_flight = int(os.environ.get("IN_FLIGHT", "50"))
    profile = os.environ.get("PROFILE", "") in ("1", "workers", "native")
    # The paced run needs free slots after the burst: 1,000 more pods fit the default lab (3,200 slots).
    paced_pods = int(os.environ.get("PACED_PODS", "0" if profile else str(pods // 2)))
    paced_rate = float(os.environ.get("RATE", "50"))
    # Each tenant's client waits for one create's answer before it sends the next, as kubectl does;
    # PER_TENANT=k lets each keep k creates open instead.
    per_client = int(os.environ.get("PER_TENANT", "1"))
    result = run(tenants, pods, per_client, profile, paced_pods, paced_rate, per_tenant=True)
    result["clients"] = f"{tenants}, one per tenant, {per_client} create request(s) in flight each"
    # The interpreter's build moves every CPU figure (the Makefile says which one it prefers and why).
    result["python"] = f"{platform.python_version()} ({os.path.realpath(sys.executable)})"
    if not profile and os.environ.get("OVERLOAD", "1") != "0":
        overload = run(tenants, pods, in_flight, False)
        result["overload"] = {"in_flight": in_flight, **{k: overload[k] for k in _OVERLOAD_FIGURES}}
    _print(result)
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "lab-profile.json" if profile else "lab.json"
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
