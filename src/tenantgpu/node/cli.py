"""`tenantgpu node run`: one simulated worker in the foreground until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from tenantgpu import eventloop
from tenantgpu.apiserver.bootstraptoken import BootstrapToken
from tenantgpu.gpushare import SharingConfig
from tenantgpu.hami.device_plugin import GPUSpec
from tenantgpu.hami.install import DEVICE_PLUGIN, DEVICE_PLUGIN_CONTAINER
from tenantgpu.klog import ComponentLog
from tenantgpu.kubeclient import ApiError, KubeClient, KubeConfig, load_kubeconfig
from tenantgpu.node.bootstrap import BootstrapError, keep_certificate, kept_certificate, request_certificate
from tenantgpu.node.join import (
    DEFAULT_MAX_PODS,
    KUBELET_CONFIG_FILE,
    DiscoveryError,
    bootstrap_client,
    configured_max_pods,
    discover,
    fetch_kubelet_configuration,
    insecure_endpoint,
    parse_token,
)
from tenantgpu.node.worker import Worker

JOIN_TIMEOUT_SECONDS = 60.0
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


@dataclass(frozen=True)
class JoinSpec:
    """`--join`: where to join, with which bootstrap token, trusting which CA, and where to keep the
    kubelet's certificate."""

    endpoint: str
    token: str
    ca_hash: str
    cert_dir: Path


def run_node(
    source: str | JoinSpec,
    name: str,
    gpus: list[str],
    *,
    cpu: str = "32",
    memory: str = "256Gi",
    pods: int | None = None,
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
    plugin_config = _load(device_plugin_kubeconfig) if device_plugin_kubeconfig else None
    if isinstance(source, JoinSpec):
        try:
            token = parse_token(source.token)
        except ValueError as err:
            raise NodeRunError(f"--token: {err}") from None
        if not re.fullmatch(r"sha256:[0-9a-fA-F]{64}", source.ca_hash):
            raise NodeRunError(
                f'--discovery-token-ca-cert-hash "{source.ca_hash}": expected sha256:<64 hex digits>'
            )

        async def joined() -> KubeConfig:
            return await _join(source, token, name, echo)

        connect = joined
    else:
        config = _load(source)

        async def loaded() -> KubeConfig:
            return config

        connect = loaded

    async def main() -> None:
        config = await connect()
        # As a kubelet: --pods wins, then the configuration its join wrote (the tenant's kubelet-config)
        capacity = pods if pods is not None else DEFAULT_MAX_PODS
        if pods is None and isinstance(source, JoinSpec):
            capacity = configured_max_pods(source.cert_dir)
        # kubeadm's kubelet takes only the cluster CA's clients (`x509.clientCAFile`, no anonymous access);
        # a kubelet given a kubeconfig alone knows no client CA and serves everyone, as before a join.
        client_ca = config.ca_data if isinstance(source, JoinSpec) else None
        await _serve(
            config, plugin_config, name, specs, sharing, cpu, memory, capacity, node_labels, host_ip,
            kubelet_port, runtime_handlers, echo, client_ca,
        )  # fmt: skip

    eventloop.run(main())


async def _join(spec: JoinSpec, token: BootstrapToken, name: str, echo: Callable[[str], None]) -> KubeConfig:
    """kubeadm join: discovery, then the kubelet's TLS bootstrap (or the certificate kept from before)."""
    try:
        cluster = await discover(insecure_endpoint(spec.endpoint), token, spec.ca_hash, JOIN_TIMEOUT_SECONDS)
    except (DiscoveryError, aiohttp.ClientError, OSError) as err:
        raise NodeRunError(f"cannot join {spec.endpoint}: {err}") from None
    pem = kept_certificate(spec.cert_dir, name, cluster.ca_pem)
    if pem is None:
        bootstrap = bootstrap_client(cluster, token)
        try:
            try:
                kubelet_config = await fetch_kubelet_configuration(bootstrap)
            except DiscoveryError as err:
                raise NodeRunError(f"cannot join {spec.endpoint}: {err}") from None
            spec.cert_dir.mkdir(parents=True, exist_ok=True)
            (spec.cert_dir / KUBELET_CONFIG_FILE).write_text(kubelet_config)
            pem = await request_certificate(bootstrap, name, timeout=JOIN_TIMEOUT_SECONDS)
        except (ApiError, BootstrapError, TimeoutError) as err:
            raise NodeRunError(f"node {name}: no client certificate: {err}") from None
        finally:
            await bootstrap.close()
        keep_certificate(spec.cert_dir, pem)
        echo(f"node {name} joined {cluster.server}: certificate in {spec.cert_dir}")
    return KubeConfig(
        server=cluster.server, ca_data=cluster.ca_pem, client_cert_data=pem, client_key_data=pem
    )


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
    client_ca: bytes | None = None,
) -> None:
    # the clients are made inside the loop they serve
    client = KubeClient(config)
    plugin = KubeClient(plugin_config) if plugin_config is not None else None
    # the device plugin of this node is this process's: a HAMi device-plugin pod placed here shows its log
    plugin_log = ComponentLog()
    worker = Worker(
        client, name, specs, sharing, cpu=cpu, memory=memory, pods=pods, labels=labels, host_ip=host_ip,
        kubelet_port=kubelet_port, runtime_handlers=runtime_handlers, device_plugin_client=plugin,
        component_logs={(DEVICE_PLUGIN, DEVICE_PLUGIN_CONTAINER): plugin_log}, device_plugin_log=plugin_log,
        client_ca_pem=client_ca,
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
