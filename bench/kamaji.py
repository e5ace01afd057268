"""The management plane's figures: TCP apply → Ready, `tenantgpu up -d` for the seed and a 100-tenant lab,
and the memory of 100 idle tenants in one process.

Anchors (Kamaji's docs): a TCP is "up and ready" in about 16 s; 100 TCPs took ~7m30s; the operator costs
~6 MiB per TCP on top of each tenant's 320 Mi apiserver pod. Goals here: ≤ 100 ms per TCP, `up -d` of the
seed lab ≤ 3 s, ≤ 5 MiB per idle tenant API server (the management-plane issue's: 100 idle tenants in one
process; measured as the lab process, which runs each tenant's API server, konnectivity server and
controller duties). Also printed: the memory per idle tenant with its worker node, HAMi and tunnel agent,
all of the lab's processes together (what sessions 13 to 36 held to 5 MiB).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "kamaji.json"
APPLY_SAMPLES = 20
BIG_LAB_TENANTS = 100


def _tenantgpu(*args: str, cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tenantgpu", *args], cwd=cwd, check=True, capture_output=True, timeout=600
    )
    return time.perf_counter() - start


def _rss_mib(pid: int, *, children: bool = True) -> float:
    """Resident memory of the lab process and (with `children`) its worker and control-plane processes."""
    total = 0.0
    for member in [pid, *(_children(pid) if children else [])]:
        for line in Path(f"/proc/{member}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) / 1024
    return total


def _children(pid: int) -> list[int]:
    from bench.lab import lab_processes

    return lab_processes(pid)[1:]


def _lab_yaml(tenants: int, workers: bool) -> str:
    lines = [
        "apiVersion: tenantgpu.io/v1alpha1",
        "kind: Lab",
        "metadata:",
        f"  name: bench-{tenants}",
        "spec:",
        "  tenants:",
    ]
    for i in range(tenants):
        lines.append(f"    - name: tenant-{i:03d}")
        if workers:
            lines += [
                "      workers:",
                f"        - name: worker-{i:03d}",
                "          gpus:",
                "            - type: NVIDIA L4",
                "              memory: 23034",
            ]
    return "\n".join(lines) + "\n"


async def _apply_to_ready(kubeconfig: Path, samples: int) -> list[float]:
    from tenantgpu.kamaji import model
    from tenantgpu.kubeclient import KubeClient

    timings: list[float] = []
    async with KubeClient.from_kubeconfig(kubeconfig) as client:
        for i in range(samples):
            name = f"bench-{i:03d}"
            listing = await client.list(model.TENANT_CONTROL_PLANES, "default")
            rv = listing["metadata"]["resourceVersion"]
            start = time.perf_counter()
            await client.create(
                model.TENANT_CONTROL_PLANES, model.tenant_control_plane(name, version="v1.31.4")
            )
            async for event in client.watch(
                model.TENANT_CONTROL_PLANES,
                "default",
                resource_version=rv,
                field_selector=f"metadata.name={name}",
            ):
                if model.version_status(event.object) == model.VersionStatus.READY:
                    timings.append(time.perf_counter() - start)
                    break
        for i in range(samples):
            await client.delete(model.TENANT_CONTROL_PLANES, f"bench-{i:03d}", "default")
    return timings


def _kubectl_apply_wall(work: Path, state: Path) -> float:
    """The same through the real kubectl: process start, discovery, POST, then poll until Ready."""
    manifest = work / "tcp.yaml"
    manifest.write_text(
        "apiVersion: kamaji.clastix.io/v1alpha1\nkind: TenantControlPlane\nmetadata:\n  name: by-kubectl\n"
        "spec:\n  controlPlane:\n    deployment:\n      replicas: 1\n    service:\n      serviceType: ClusterIP\n"
        "  kubernetes:\n    version: v1.31.4\n    kubelet:\n      cgroupfs: systemd\n"
    )
    env = {**os.environ, "HOME": str(work)}
    kubeconfig = str(state / "management.kubeconfig")
    start = time.perf_counter()
    subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "apply", "-f", str(manifest)],
        check=True,
        capture_output=True,
        env=env,
    )
    while True:
        out = subprocess.run(
            [
                "kubectl",
                "--kubeconfig",
                kubeconfig,
                "get",
                "tcp",
                "by-kubectl",
                "-o",
                "jsonpath={.status.kubernetesResources.version.status}",
            ],
            capture_output=True,
            text=True,
            env=env,
        ).stdout
        if out == "Ready":
            return time.perf_counter() - start


def main() -> None:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tenantgpu-bench-kamaji-") as tmp:
        work = Path(tmp)
        seed = work / "seed"
        results["up_detached_seed_s"] = _tenantgpu("up", "-d", "--state-dir", str(seed), cwd=work)
        try:
            pid = int((seed / "lab.pid").read_text())
            results["seed_lab_rss_mib"] = _rss_mib(pid)
            timings = asyncio.run(_apply_to_ready(seed / "management.kubeconfig", APPLY_SAMPLES))
            results["tcp_apply_to_ready_ms"] = {
                "samples": len(timings),
                "p50": statistics.median(timings) * 1000,
                "p95": sorted(timings)[int(0.95 * (len(timings) - 1))] * 1000,
                "max": max(timings) * 1000,
            }
            results["kubectl_apply_to_ready_wall_ms"] = _kubectl_apply_wall(work, seed) * 1000
        finally:
            _tenantgpu("down", "--state-dir", str(seed), cwd=work)

        small, big = work / "small.yaml", work / "big.yaml"
        small.write_text(_lab_yaml(1, workers=True))
        big.write_text(_lab_yaml(BIG_LAB_TENANTS, workers=True))
        one = work / "one"
        _tenantgpu("up", "-d", "-f", str(small), "--state-dir", str(one), cwd=work)
        try:
            time.sleep(1.0)
            rss_one = _rss_mib(int((one / "lab.pid").read_text()))
            planes_one = _rss_mib(int((one / "lab.pid").read_text()), children=False)
        finally:
            _tenantgpu("down", "--state-dir", str(one), cwd=work)
        hundred = work / "hundred"
        results["up_detached_100_tenants_s"] = _tenantgpu(
            "up", "-d", "-f", str(big), "--state-dir", str(hundred), cwd=work
        )
        try:
            time.sleep(1.0)
            rss_hundred = _rss_mib(int((hundred / "lab.pid").read_text()))
            planes_hundred = _rss_mib(int((hundred / "lab.pid").read_text()), children=False)
        finally:
            results["down_100_tenants_s"] = _tenantgpu("down", "--state-dir", str(hundred), cwd=work)
        results["resume_100_tenants_s"] = _tenantgpu("up", "-d", "--state-dir", str(hundred), cwd=work)
        _tenantgpu("down", "--state-dir", str(hundred), cwd=work)
        results["rss_1_tenant_mib"] = rss_one
        results["rss_100_tenants_mib"] = rss_hundred
        results["mib_per_idle_tenant"] = (rss_hundred - rss_one) / (BIG_LAB_TENANTS - 1)
        # The lab process alone: the tenants' API servers with their konnectivity servers and controller
        # duties (what Kamaji runs in a tenant's control-plane pod), without their worker nodes.
        results["mib_per_idle_control_plane"] = (planes_hundred - planes_one) / (BIG_LAB_TENANTS - 1)

    apply = results["tcp_apply_to_ready_ms"]
    print(
        f"TCP create → Ready (API client, watch): p50 {apply['p50']:.1f} ms, p95 {apply['p95']:.1f} ms, "
        f"max {apply['max']:.1f} ms over {apply['samples']} (goal ≤ 100 ms; Kamaji ~16 s)"
    )
    print(
        f"kubectl apply → Ready, wall incl. kubectl processes: {results['kubectl_apply_to_ready_wall_ms']:.0f} ms"
    )
    print(f"tenantgpu up -d, seed lab: {results['up_detached_seed_s']:.2f} s (goal ≤ 3 s)")
    print(
        f"tenantgpu up -d, {BIG_LAB_TENANTS} tenants: {results['up_detached_100_tenants_s']:.2f} s; "
        f"resume: {results['resume_100_tenants_s']:.2f} s; down: {results['down_100_tenants_s']:.2f} s"
    )
    print(
        f"memory of an idle tenant control plane (API server, konnectivity server, controller duties; "
        f"{BIG_LAB_TENANTS} in the lab process): {results['mib_per_idle_control_plane']:.2f} MiB (goal ≤ 5 MiB)"
    )
    print(
        f"memory per idle tenant with its worker (kubelet, HAMi, tunnel agent; all processes): 1 tenant "
        f"{rss_one:.0f} MiB, {BIG_LAB_TENANTS} tenants {rss_hundred:.0f} MiB RSS → "
        f"{results['mib_per_idle_tenant']:.2f} MiB"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
