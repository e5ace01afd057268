"""End-to-end HAMi pipeline throughput: tenants × 2 workers, pods created at once, create→Running latency.

`python -m bench hami_pipeline` (env TENANTS, PODS_PER_TENANT to scale; defaults 10 × 40 = 400 pods).
Each tenant: its own API server (SQLite), two workers with 2× L4 (deviceSplitCount 10 → 40 slots),
HAMi's scheduler and webhook, all in one asyncio loop as the lab runs them.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore
from tenantgpu.gpushare import SharingConfig
from tenantgpu.hami.device_plugin import GPUSpec
from tenantgpu.hami.install import install_hami
from tenantgpu.hami.scheduler import HamiScheduler
from tenantgpu.hami.webhook import HamiWebhook
from tenantgpu.kubeclient import Informer, KubeClient
from tenantgpu.node.worker import Worker

RESULTS = Path(__file__).parent / "results"


def _pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [
                {
                    "name": "cuda",
                    "image": "cuda",
                    "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}},
                }
            ]
        },
    }


async def _tenant(index: int, root: Path, cfg: SharingConfig) -> dict[str, Any]:
    name = f"tenant-{index}"
    pki = ServerPKI.load_or_create(root / f"{name}-pki", name)
    store = SQLiteDatastore(root / f"{name}.db")
    server = APIServer(APIServerConfig(name=name, datastore=store, pki=pki))
    await server.start()
    kubeconfig = root / f"{name}.kubeconfig"
    kubeconfig.write_text(server.admin_kubeconfig())
    client = KubeClient.from_kubeconfig(kubeconfig)
    workers = [Worker(client, f"{name}-w{i}", [GPUSpec("NVIDIA L4", 23034, 2)], cfg) for i in range(2)]
    for w in workers:
        await w.start()
    scheduler = HamiScheduler(client, cfg)
    await scheduler.start()
    webhook = HamiWebhook(cfg, quotas=lambda: scheduler.state.quotas)
    await webhook.start()
    await install_hami(client, webhook.ca_bundle, webhook_url=webhook.url, sharing=cfg)
    return {"server": server, "store": store, "client": client, "workers": workers,
            "scheduler": scheduler, "webhook": webhook}  # fmt: skip


async def _run(tenants: int, pods_per_tenant: int) -> dict[str, Any]:
    cfg = SharingConfig()
    with tempfile.TemporaryDirectory(prefix="tenantgpu-bench-") as tmp:
        labs = [await _tenant(i, Path(tmp), cfg) for i in range(tenants)]
        created: dict[tuple[int, str], float] = {}
        running: dict[tuple[int, str], float] = {}
        watchers = []
        for t, lab in enumerate(labs):
            watcher = Informer(lab["client"], "pods", "default")

            def seen(kind: str, obj: dict, old: dict | None, t: int = t) -> None:
                if (obj.get("status") or {}).get("phase") == "Running":
                    running.setdefault((t, obj["metadata"]["name"]), time.perf_counter())

            watcher.add_handler(seen)
            await watcher.start()
            watchers.append(watcher)
        start = time.perf_counter()

        async def create(t: int, i: int) -> None:
            name = f"p-{i}"
            created[(t, name)] = time.perf_counter()
            await labs[t]["client"].create("pods", _pod(name), "default")

        await asyncio.gather(*(create(t, i) for t in range(tenants) for i in range(pods_per_tenant)))
        total = tenants * pods_per_tenant
        deadline = time.perf_counter() + 120
        while len(running) < total and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)
        elapsed = max(running.values(), default=start) - start
        latencies = sorted(running[k] - created[k] for k in running)
        leftover_locks = 0
        for lab in labs:
            for w in lab["workers"]:
                node = await lab["client"].get("nodes", w.name)
                leftover_locks += "hami.io/mutex.lock" in (node["metadata"].get("annotations") or {})
        for watcher in watchers:
            await watcher.stop()
        for lab in labs:
            await lab["webhook"].stop()
            await lab["scheduler"].stop()
            for w in lab["workers"]:
                await w.stop()
            await lab["client"].close()
            await lab["server"].stop()
            lab["store"].close()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else float("nan")

    return {
        "tenants": tenants,
        "nodes": tenants * 2,
        "pods": total,
        "running": len(running),
        "seconds": round(elapsed, 3),
        "pods_per_second": round(len(running) / elapsed, 1) if elapsed > 0 else None,
        "p50_create_to_running_s": round(pct(0.50), 3),
        "p99_create_to_running_s": round(pct(0.99), 3),
        "mean_s": round(statistics.fmean(latencies), 3) if latencies else None,
        "leftover_node_locks": leftover_locks,
    }


def main() -> None:
    tenants = int(os.environ.get("TENANTS", "10"))
    per_tenant = int(os.environ.get("PODS_PER_TENANT", "40"))
    result = asyncio.run(_run(tenants, per_tenant))
    for key, value in result.items():
        print(f"{key:>26}: {value}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "hami_pipeline.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
