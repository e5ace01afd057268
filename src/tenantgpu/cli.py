"""The one entry point: parses arguments and calls into the packages, nothing more."""

from __future__ import annotations

import sys
from typing import Any

import click

from tenantgpu import __version__


class UserError(click.ClickException):
    """A mistake in the user's input: one plain line on stderr and exit code 2, never a traceback."""

    exit_code = 2

    def show(self, file=None) -> None:  # type: ignore[no-untyped-def]
        click.echo(f"error: {self.format_message()}", err=True, file=file)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tenantgpu")
def main() -> None:
    """tenantgpu: multi-tenant GPU sharing on Kubernetes, in a box.

    Stands up Kamaji-style hosted control planes (one isolated Kubernetes API per tenant) with
    HAMi-style fractional GPUs on simulated worker nodes, validates the wiring, and plans
    capacity on real traces. Run `tenantgpu COMMAND --help` for each command.
    """


# --- plan (gpushare what-if placement) -------------------------------------------------------


def _read_objects(path: str) -> list[dict]:  # type: ignore[type-arg]
    from tenantgpu.gpushare.objects import ObjectsError, load_objects

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"cannot read {path}: not a text file") from None
    try:
        return load_objects(text, source=path)
    except ObjectsError as exc:
        raise UserError(str(exc)) from None


@main.command()
@click.option("--nodes", "nodes_path", type=click.Path(dir_okay=False), help="YAML/JSON with Node objects.")
@click.option(
    "--pods", "pods_path", required=True, type=click.Path(dir_okay=False), help="YAML/JSON with Pods."
)
@click.option(
    "--lab",
    "lab_path",
    type=click.Path(dir_okay=False),
    help="A lab spec: every tenant's workers stand in for --nodes, its hami settings for the defaults.",
)
@click.option(
    "--node-policy", type=click.Choice(["binpack", "spread"]), help="HAMi node policy (default binpack)."
)
@click.option(
    "--gpu-policy",
    type=click.Choice(["spread", "binpack", "mutex", "topology-aware"]),
    help="HAMi GPU policy (default spread).",
)
@click.option(
    "--device-split-count", type=click.IntRange(min=1), help="Slots per GPU, overriding registrations."
)
@click.option(
    "-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True
)
def plan(
    nodes_path: str | None,
    pods_path: str,
    lab_path: str | None,
    node_policy: str | None,
    gpu_policy: str | None,
    device_split_count: int | None,
    output: str,
) -> None:
    """What-if placement: where would HAMi put these pods, and why not.

    Pods that already carry hami.io/vgpu-node and hami.io/vgpu-devices-allocated (and are not
    Succeeded/Failed) count as placed, as do pods bound with spec.nodeName; Succeeded/Failed pods are
    skipped; every other pod is admitted as HAMi's webhook would and placed in file order, each
    placement counting for the next. ResourceQuota objects are honoured.
    """
    import dataclasses
    import json

    from tenantgpu.gpushare import SharingConfig
    from tenantgpu.gpushare.plan import PlanInputError
    from tenantgpu.gpushare.plan import plan as place

    if nodes_path is None and lab_path is None:
        raise UserError("give --nodes or --lab")
    cfg = SharingConfig()
    objects: list[dict] = []  # type: ignore[type-arg]
    if lab_path is not None:
        lab_cfg, lab_nodes = _lab_nodes(lab_path)
        cfg = lab_cfg
        objects.extend(lab_nodes)
    if nodes_path is not None:
        objects.extend(_read_objects(nodes_path))
    objects.extend(_read_objects(pods_path))
    if node_policy:
        cfg = dataclasses.replace(cfg, node_policy=node_policy)  # type: ignore[arg-type]
    if gpu_policy:
        cfg = dataclasses.replace(cfg, gpu_policy=gpu_policy)  # type: ignore[arg-type]
    if device_split_count is not None:
        cfg = dataclasses.replace(cfg, device_split_count=device_split_count)
    try:
        placements = place(objects, cfg, device_split_count=device_split_count)
    except PlanInputError as exc:
        raise UserError(str(exc)) from None
    if output == "json":
        click.echo(json.dumps({"placements": [p.as_json() for p in placements]}))
    elif output == "yaml":
        import yaml

        click.echo(
            yaml.safe_dump({"placements": [p.as_json() for p in placements]}, sort_keys=False), nl=False
        )
    else:
        _print_placements(placements)


def _lab_nodes(path: str) -> tuple[Any, list[dict]]:  # type: ignore[type-arg]
    """The lab's SharingConfig and its worker nodes as Kubernetes Node objects."""
    try:
        from tenantgpu.lab.spec import load_lab  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise UserError(
            "--lab needs the lab spec support (tenantgpu.lab.spec), which this build lacks"
        ) from None
    try:
        lab = load_lab(path)
    except Exception as exc:  # LabSpecError (and OSError) name the file, line and field
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(first) from None
    if hasattr(lab, "nodes_as_k8s"):
        return lab.sharing, list(lab.nodes_as_k8s())
    return lab.sharing, _lab_worker_nodes(lab)


def _lab_worker_nodes(lab: Any) -> list[dict]:  # type: ignore[type-arg]
    """Every tenant's workers as Node objects carrying HAMi's register annotation."""
    from tenantgpu.gpushare import encode_node_register
    from tenantgpu.gpushare.register import register_device

    cfg = lab.sharing
    nodes = []
    for tenant in lab.tenants:
        for worker in tenant.workers:
            devices = [
                register_device(d.uuid, d.index, d.type, d.memory, cfg, numa=d.numa, health=d.health)
                for d in worker.devices()
            ]
            annotations = {"hami.io/node-nvidia-register": encode_node_register(devices)} if devices else {}
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": worker.name,
                        "labels": dict(worker.labels),
                        "annotations": annotations,
                    },
                    "status": {
                        "allocatable": {"cpu": worker.cpu, "memory": worker.memory, "pods": str(worker.pods)}
                    },
                }
            )
    return nodes


def _print_placements(placements: list) -> None:  # type: ignore[type-arg]
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for column in ("POD", "NODE", "GPUS", "MEM/GPU", "CORES/GPU"):
        table.add_column(column, no_wrap=True)
    table.add_column("REASON", overflow="fold")
    for p in placements:
        reason = p.reason or ""
        if reason.startswith("no available node") and ": " in reason:
            reason = reason.split(": ", 1)[1]  # the tally of reasons is what a person reads
        table.add_row(p.pod, p.node or "-", str(p.gpus), p.memory or "-", p.cores or "-", reason)
    placed = sum(1 for p in placements if p.node)
    console = Console()
    console.print(table)
    console.print(f"{placed}/{len(placements)} pods placed")


# --- lab: up / down / status / kubeconfig ----------------------------------------------------


# --- node run --------------------------------------------------------------------------------


@main.group("node")
def node_group() -> None:
    """Simulated worker nodes (like KWOK nodes, with HAMi's device plugin and a kubelet)."""


@node_group.command("run")
@click.option(
    "--kubeconfig", "kubeconfig", required=True, type=click.Path(dir_okay=False), help="API to join."
)
@click.option("--name", required=True, help="Node name.")
@click.option(
    "--gpu", "gpus", multiple=True, help="MODEL:MEMORY_MIB[:COUNT[:NUMA]], e.g. 'NVIDIA L4:23034:2'."
)
@click.option("--cpu", default="32", show_default=True, help="CPU capacity.")
@click.option("--memory", default="256Gi", show_default=True, help="Memory capacity.")
@click.option("--pods", default=110, show_default=True, help="Pod capacity.")
@click.option("--device-split-count", default=10, show_default=True, help="HAMi deviceSplitCount.")
@click.option("--label", "labels", multiple=True, help="Extra node label KEY=VALUE.")
@click.option("--host-ip", default="127.0.0.1", show_default=True, help="Address the kubelet serves logs on.")
@click.option("--kubelet-port", default=0, show_default=True, help="Kubelet HTTPS port (0 = any free one).")
def node_run(
    kubeconfig: str,
    name: str,
    gpus: tuple[str, ...],
    cpu: str,
    memory: str,
    pods: int,
    device_split_count: int,
    labels: tuple[str, ...],
    host_ip: str,
    kubelet_port: int,
) -> None:
    """Run one worker against any API server until interrupted (Ctrl-C)."""
    from pathlib import Path

    from tenantgpu.node.cli import NodeRunError, run_node

    if not Path(kubeconfig).is_file():
        raise UserError(f"kubeconfig {kubeconfig} does not exist")
    try:
        run_node(
            kubeconfig,
            name,
            list(gpus),
            cpu=cpu,
            memory=memory,
            pods=pods,
            device_split_count=device_split_count,
            labels=list(labels),
            host_ip=host_ip,
            kubelet_port=kubelet_port,
            echo=click.echo,
        )
    except NodeRunError as err:
        raise UserError(str(err)) from None


# --- validate / demo -------------------------------------------------------------------------


# --- replay / capacity -----------------------------------------------------------------------


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
