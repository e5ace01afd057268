"""`tenantgpu demo`: the seed lab up in a temporary state dir, the suite, a GPU-sharing report, the lab down."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tenantgpu.validate import hami, report
from tenantgpu.validate.checks import ALL_CHECKS
from tenantgpu.validate.checks.pods import gpu_pod, phase
from tenantgpu.validate.cluster import Cluster, KubeCluster
from tenantgpu.validate.context import Expectations, RunSettings, Targets
from tenantgpu.validate.runner import Result, run_suite, summary

DEMO_NAMESPACE = "demo"
_DEMO_LABELS = {"app.kubernetes.io/managed-by": "tenantgpu-demo"}
_WORKLOADS = ("llm-serving", "notebook", "embeddings")
_READY_SECONDS = 30.0
_UP_SECONDS = 120.0


class DemoInputError(Exception):
    """A bad lab file given to the demo: one line, exit 2."""


@dataclass
class GPUShare:
    """One physical GPU and the pod slices on it."""

    tenant: str
    node: str
    gpu: hami.RegisteredGPU
    pods: list[tuple[str, int, int]] = field(default_factory=list)  # (pod, MiB, cores %)

    @property
    def memory(self) -> int:
        return sum(mem for _, mem, _ in self.pods)

    @property
    def cores(self) -> int:
        return sum(cores for _, _, cores in self.pods)


def run_demo(lab_file: str | None, *, keep: bool, console: Console | None = None) -> bool:
    """The whole demo; True only if every check passed."""
    from tenantgpu.lab.spec import LabSpecError, load_lab

    console = console or _console()
    try:
        lab = load_lab(lab_file)
    except LabSpecError as exc:
        raise DemoInputError(str(exc)) from None
    started = time.monotonic()
    state_dir = Path(tempfile.mkdtemp(prefix="tenantgpu-demo-"))
    try:
        if not _lab_up(state_dir, lab_file, console):
            return False
        console.print(
            f"lab [bold]{lab.metadata.name}[/] up in {time.monotonic() - started:.1f} s ({state_dir})"
        )
        targets = Targets(
            {
                t.name: KubeCluster(t.name, state_dir / "kubeconfigs" / f"{t.name}.kubeconfig")
                for t in lab.tenants
            },
            KubeCluster("management", state_dir / "management.kubeconfig"),
            Expectations.from_lab(lab),
        )
        _wait_for_workers(targets, console)
        results = _validate(targets, console)
        shares = _showcase(targets, console)
        _print_sharing(console, shares)
        ok = summary(results)["failed"] == 0
        console.print(
            f"demo {'passed' if ok else 'FAILED'} in {time.monotonic() - started:.1f} s",
            style="bold green" if ok else "bold red",
        )
        if keep:
            _print_keep(console, state_dir, targets)
        return ok
    finally:
        if not keep:
            _tenantgpu("down", "--state-dir", str(state_dir))
            shutil.rmtree(state_dir, ignore_errors=True)


def _tenantgpu(*args: str) -> subprocess.CompletedProcess[str]:
    """Our own CLI in a child process: the lab's documented `up -d` / `down` are the interface the demo uses."""
    return subprocess.run(
        [sys.executable, "-m", "tenantgpu", *args], capture_output=True, text=True, timeout=_UP_SECONDS
    )


def _lab_up(state_dir: Path, lab_file: str | None, console: Console) -> bool:
    args = ["up", "-d", "--state-dir", str(state_dir)]
    if lab_file:
        args += ["-f", str(Path(lab_file).absolute())]
    with console.status("bringing the lab up"):
        run = _tenantgpu(*args)
    if run.returncode != 0:
        console.print(f"the lab did not come up (exit {run.returncode}):", style="bold red")
        console.print((run.stderr or run.stdout).strip()[-2000:], markup=False, highlight=False)
        return False
    return True


def _wait_for_workers(targets: Targets, console: Console) -> None:
    """Wait (bounded) until every declared worker is Ready with its GPUs registered, so checks do not race it."""
    assert targets.expectations is not None
    deadline = time.monotonic() + _READY_SECONDS
    with console.status("waiting for workers to join and register their GPUs"):
        while time.monotonic() < deadline:
            if all(
                _tenant_ready(targets.tenants[t], nodes) for t, nodes in targets.expectations.nodes.items()
            ):
                return
            time.sleep(0.1)
    console.print("workers not all ready after 30 s; validating anyway (the checks will say what is missing)")


def _tenant_ready(cluster: Cluster, declared: tuple) -> bool:
    try:
        nodes = {n["metadata"]["name"]: n for n in cluster.list("Node")}
    except Exception:
        return False
    for want in declared:
        node = nodes.get(want.name)
        if node is None:
            return False
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (node.get("status") or {}).get("conditions") or []
        )
        try:
            registered = [g for g in hami.node_gpus(node) if g.health]
        except ValueError:
            return False
        # Count only: whether they are the declared GPUs is for `gpus-registered` to judge and report.
        if not ready or len(registered) < len(want.gpus):
            return False
    return True


def _validate(targets: Targets, console: Console) -> list[Result]:
    settings = RunSettings()
    if console.is_terminal:
        with report.LiveTable(ALL_CHECKS, list(targets.tenants), console) as live:
            results = run_suite(targets, ALL_CHECKS, settings, live)
    else:
        results = run_suite(targets, ALL_CHECKS, settings)
    console.print(report.results_table(results, details_for=("failed", "skipped")))
    console.print(report.summary_line(results))
    return results


def _console() -> Console:
    probe = Console()
    # Piped (CI logs, `make demo | tee`): rich would assume 80 columns and fold every table cell.
    return probe if probe.is_terminal else Console(width=150)


def _showcase(targets: Targets, console: Console) -> list[GPUShare]:
    """Fractional pods in namespace `demo` of each tenant (three slices per card), then who shares what."""
    created: list[tuple[Cluster, str]] = []
    for cluster in targets.tenants.values():
        cards = [g for node in cluster.list("Node") for g in _safe_gpus(node) if g.health]
        if not cards:
            continue
        if cluster.get("Namespace", DEMO_NAMESPACE) is None:
            cluster.create(
                "Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DEMO_NAMESPACE}}
            )
        smallest = min(g.devmem for g in cards)
        for i in range(3 * len(cards)):
            name = f"{_WORKLOADS[i % len(_WORKLOADS)]}-{i // len(_WORKLOADS) + 1}"
            body = gpu_pod(name, labels=_DEMO_LABELS, gpumem=smallest // 4, gpucores=25)
            with contextlib.suppress(Exception):
                cluster.create("Pod", body, DEMO_NAMESPACE)
                created.append((cluster, name))
    deadline = time.monotonic() + 15.0
    with console.status("running the showcase pods"):
        while time.monotonic() < deadline:
            phases = [phase(c.get("Pod", n, DEMO_NAMESPACE)) for c, n in created]
            if all(p == "Running" for p in phases):
                break
            time.sleep(0.1)
    return _collect_shares(targets)


def _safe_gpus(node: dict) -> list[hami.RegisteredGPU]:
    try:
        return hami.node_gpus(node)
    except ValueError:
        return []


def _collect_shares(targets: Targets) -> list[GPUShare]:
    shares: list[GPUShare] = []
    for tenant, cluster in sorted(targets.tenants.items()):
        by_uuid: dict[str, GPUShare] = {}
        for node in cluster.list("Node"):
            for gpu in _safe_gpus(node):
                by_uuid[gpu.uuid] = GPUShare(tenant, node["metadata"]["name"], gpu)
        for pod in cluster.list("Pod"):
            if phase(pod) not in ("Running", "Pending"):
                continue
            value = ((pod.get("metadata") or {}).get("annotations") or {}).get(hami.DEVICES_ALLOCATED)
            if not value:
                continue
            name = f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"
            for container in hami.decode_pod_devices(value):
                for device in container:
                    if device.uuid in by_uuid:
                        by_uuid[device.uuid].pods.append((name, device.usedmem, device.usedcores))
        shares.extend(sorted(by_uuid.values(), key=lambda s: (s.node, s.gpu.index)))
    return shares


def _print_sharing(console: Console, shares: list[GPUShare]) -> None:
    table = Table(title="GPU sharing")
    for column in ("tenant", "node", "GPU", "memory MiB", "cores %", "pods (MiB, cores %)"):
        table.add_column(column, overflow="fold")
    for share in shares:
        table.add_row(
            share.tenant,
            share.node,
            f"{share.gpu.type}\n{share.gpu.uuid}",
            f"{share.memory}/{share.gpu.devmem}",
            f"{share.cores}/{share.gpu.devcore}",
            "\n".join(f"{pod} ({mem}, {cores})" for pod, mem, cores in share.pods) or "-",
        )
    console.print(table)
    slices = sum(len(s.pods) for s in shares)
    used = sum(1 for s in shares if s.pods)
    console.print(
        f"{slices} GPU slices run on {used} physical GPU(s); without sharing the same pods would need "
        f"{slices} whole GPUs ({slices - used} fewer cards thanks to sharing)."
    )


def _print_keep(console: Console, state_dir: Path, targets: Targets) -> None:
    console.print("\nThe lab keeps running. Try:")
    for tenant, cluster in targets.tenants.items():
        console.print(f"  # {tenant}: {cluster.kubeconfig}")
        console.print(f"  kubectl --kubeconfig {cluster.kubeconfig} get nodes")
        console.print(f"  kubectl --kubeconfig {cluster.kubeconfig} -n {DEMO_NAMESPACE} get pods -o wide")
        console.print(
            f"  kubectl --kubeconfig {cluster.kubeconfig} -n {DEMO_NAMESPACE} logs {_WORKLOADS[0]}-1"
        )
    if targets.management is not None:
        console.print(f"  kubectl --kubeconfig {targets.management.kubeconfig} get tcp -A")
    console.print(f"  tenantgpu validate --state-dir {state_dir}")
    console.print(f"  tenantgpu down --state-dir {state_dir} --purge")
