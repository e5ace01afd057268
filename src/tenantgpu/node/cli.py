"""`tenantgpu node run`: one simulated worker in the foreground until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
from collections.abc import Callable

import aiohttp

from tenantgpu import eventloop
from tenantgpu.gpushare import SharingConfig
from tenantgpu.hami.device_plugin import GPUSpec
from tenantgpu.kubeclient import ApiError, KubeClient, KubeConfig, load_kubeconfig
from tenantgpu.node.worker import Worker

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class NodeRunError(Exception):
    """A user-facing reason why the worker cannot run (bad input, unreachable API)."""


def parse_labels(labels: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in labels:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise NodeRunError(f"label {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


def run_node(
    kubeconfig: str,
    name: str,
    gpus: list[str],
    *,
    cpu: str = "32",
    memory: str = "256Gi",
    pods: int = 110,
    device_split_count: int = 10,
    labels: list[str] | None = None,
    host_ip: str = "127.0.0.1",
    kubelet_port: int = 0,
    runtime_handlers: list[str] | None = None,
    device_plugin_kubeconfig: str | None = None,
    echo: Callable[[str], None] = print,
) -> None:
    try:
        specs = [GPUSpec.parse(g) for g in gpus]
    except ValueError as err:
        raise NodeRunError(str(err)) from None
    for handler in runtime_handlers or ():
        if not DNS_LABEL.fullmatch(handler):
            raise NodeRunError(
                f"--runtime-handler {handler!r}: expected a DNS label (lower-case letters, digits, '-')"
            )
    if device_split_count < 1:
        raise NodeRunError("--device-split-count must be at least 1")
    sharing = SharingConfig(device_split_count=device_split_count)
    node_labels = parse_labels(labels or [])
    config = _load(kubeconfig)
    plugin_config = _load(device_plugin_kubeconfig) if device_plugin_kubeconfig else None
    eventloop.run(
        _serve(
            config, plugin_config, name, specs, sharing, cpu, memory, pods, node_labels, host_ip,
            kubelet_port, runtime_handlers, echo,
        )
    )  # fmt: skip


def _load(path: str) -> KubeConfig:
    try:
        return load_kubeconfig(path)
    except (OSError, ValueError, KeyError) as err:
        raise NodeRunError(f"kubeconfig {path}: {err}") from None


async def _serve(
    config: KubeConfig,
    plugin_config: KubeConfig | None,
    name: str,
    specs: list[GPUSpec],
    sharing: SharingConfig,
    cpu: str,
    memory: str,
    pods: int,
    labels: dict[str, str],
    host_ip: str,
    kubelet_port: int,
    runtime_handlers: list[str] | None,
    echo: Callable[[str], None],
) -> None:
    # the clients are made inside the loop they serve
    client = KubeClient(config)
    plugin = KubeClient(plugin_config) if plugin_config is not None else None
    worker = Worker(
        client, name, specs, sharing, cpu=cpu, memory=memory, pods=pods, labels=labels, host_ip=host_ip,
        kubelet_port=kubelet_port, runtime_handlers=runtime_handlers, device_plugin_client=plugin,
    )  # fmt: skip
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await worker.start()
    except ApiError as err:
        await worker.stop()
        await _close(client, plugin)
        raise NodeRunError(f"API server refused node {name}: {err.message or err.reason}") from None
    except (aiohttp.ClientError, OSError) as err:
        await worker.stop()
        await _close(client, plugin)
        raise NodeRunError(f"cannot reach the API server {client.config.server}: {err}") from None
    gpus = len(worker.device_plugin.devices)
    echo(f"node {name} ready: {gpus} GPU(s), kubelet on https://{host_ip}:{worker.kubelet_port}")
    await stop.wait()
    echo(f"node {name} stopping")
    await worker.stop()
    await _close(client, plugin)


async def _close(*clients: KubeClient | None) -> None:
    for client in clients:
        if client is not None:
            await client.close()
