"""The one entry point: parses arguments and calls into the packages, nothing more."""

from __future__ import annotations

import sys

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
from typing import Any  # noqa: E402  (kept in this region so other commands' edits do not collide)


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


class LabConflict(click.ClickException):
    """The lab is in a state that forbids the command (e.g. already running): one line and exit 1."""

    exit_code = 1

    def show(self, file=None) -> None:  # type: ignore[no-untyped-def]
        click.echo(f"error: {self.format_message()}", err=True, file=file)


_STATE_DIR = click.option(
    "--state-dir",
    default=".tenantgpu",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the lab keeps its datastore, kubeconfigs, pid and logs.",
)


@main.command()
@click.option(
    "-f", "--file", "lab_file", type=click.Path(dir_okay=False), help="Lab spec (default: the seed lab)."
)
@_STATE_DIR
@click.option("-d", "--detach", is_flag=True, help="Run in the background, like `docker compose up -d`.")
@click.option(
    "--ready-fd", type=int, hidden=True, help="Internal: the detached child reports readiness here."
)
def up(lab_file: str | None, state_dir: str, detach: bool, ready_fd: int | None) -> None:
    """Start the management plane and one TenantControlPlane per tenant; return when all are Ready.

    On an existing state directory, resume the same lab (tenants, certificates, objects).
    """
    from rich.console import Console

    from tenantgpu.lab import display, process
    from tenantgpu.lab.spec import LabSpecError, load_lab
    from tenantgpu.lab.state import StateDir

    state = StateDir.at(state_dir)
    if ready_fd is not None:
        _run_lab_child(state_dir, lab_file, ready_fd)
        return
    console = Console()
    try:
        pid = state.running_pid()
        if pid is not None:
            raise LabConflict(process.already_running_message(state, pid))
        if lab_file is not None:
            load_lab(lab_file)  # a broken file is exit 2 here, in the caller's terminal
        if detach:
            with display.ProgressView(console) as view:
                endpoints = process.start_detached(state, lab_file, view)
            display.print_summary(console, state, endpoints, detached=True)
            return
        from tenantgpu.lab import supervisor

        lab = supervisor.resolve_lab(state, lab_file)
        view = display.ProgressView(console)

        def ready(endpoints: dict[str, str]) -> None:
            view.__exit__()
            display.print_summary(console, state, endpoints, detached=False)

        with view:
            supervisor.run_foreground(state, lab, view, ready)
    except LabSpecError as err:
        raise UserError(str(err)) from None
    except process.LabError as err:
        raise LabConflict(str(err)) from None


def _run_lab_child(state_dir: str, lab_file: str | None, ready_fd: int) -> None:
    """The detached lab process: logs to DIR/logs/lab.log (its stdout) and reports over the pipe."""
    import logging

    from tenantgpu.lab import process, supervisor
    from tenantgpu.lab.spec import LabSpecError
    from tenantgpu.lab.state import StateDir

    state = StateDir.at(state_dir)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    reporter = process.PipeReporter(ready_fd)
    try:
        lab = supervisor.resolve_lab(state, lab_file)
        supervisor.run_foreground(state, lab, reporter.progress, reporter.ready)
    except (process.LabError, LabSpecError) as err:
        reporter.error(str(err))
        raise SystemExit(1) from None
    except BaseException as err:
        reporter.error(f"the lab failed: {err!r}")
        raise


@main.command()
@_STATE_DIR
@click.option("--purge", is_flag=True, help="Also delete the state directory (datastore, kubeconfigs, logs).")
def down(state_dir: str, purge: bool) -> None:
    """Stop the lab gracefully (its state stays unless --purge)."""
    from tenantgpu.lab import process
    from tenantgpu.lab.state import StateDir

    state = StateDir.at(state_dir)
    pid = process.stop_lab(state)
    if pid is None:
        click.echo(f"no lab is running in {state.root}")
    else:
        click.echo(f"stopped the lab in {state.root} (pid {pid})")
    if purge:
        state.purge()
        click.echo(f"deleted {state.root}")


@main.command()
@_STATE_DIR
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def status(state_dir: str, output: str) -> None:
    """Tenants with endpoint and state; nodes, GPUs and pods per tenant."""
    import asyncio
    import json

    from rich.console import Console

    from tenantgpu.lab import display
    from tenantgpu.lab.state import StateDir
    from tenantgpu.lab.status import collect_status

    result = asyncio.run(collect_status(StateDir.at(state_dir)))
    if output == "json":
        click.echo(json.dumps(result, indent=2))
    else:
        display.print_status(Console(), result)
    if not result["running"]:
        raise SystemExit(1)


@main.command()
@click.argument("tenant")
@_STATE_DIR
def kubeconfig(tenant: str, state_dir: str) -> None:
    """Print the path of TENANT's admin kubeconfig (like `kind get kubeconfig`)."""
    from tenantgpu.lab.state import StateDir

    state = StateDir.at(state_dir)
    path = state.management_kubeconfig if tenant == "management" else state.tenant_kubeconfig(tenant)
    if not path.exists():
        raise UserError(
            f"no kubeconfig for tenant {tenant!r} in {state.root} (is the lab up and the tenant Ready?)"
        )
    click.echo(str(path))


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

_VALIDATE_EXAMPLES = """
\b
Examples:
  tenantgpu validate                                  # the lab in ./.tenantgpu
  tenantgpu validate --state-dir /tmp/lab -o json
  tenantgpu validate --kubeconfig team-a=a.kubeconfig --kubeconfig team-b=b.kubeconfig \\
      --management-kubeconfig kind.kubeconfig -o junit --junit-file validate.xml
"""


@main.command(epilog=_VALIDATE_EXAMPLES)
@click.option(
    "--state-dir", type=click.Path(file_okay=False), help="A lab's state directory [default: .tenantgpu]."
)
@click.option(
    "--kubeconfig",
    "kubeconfigs",
    multiple=True,
    metavar="TENANT=PATH",
    help="A tenant's kubeconfig (repeat per tenant); instead of --state-dir, e.g. for a real cluster.",
)
@click.option("--management-kubeconfig", metavar="PATH", help="The management cluster (Kamaji) kubeconfig.")
@click.option(
    "--lab", "lab_file", metavar="FILE", help="Lab spec declaring the GPUs [default: the state dir's]."
)
@click.option(
    "--only", multiple=True, metavar="NAME", help="Run only these checks (repeat, or comma-separate)."
)
@click.option(
    "-o", "--output", type=click.Choice(["table", "json", "junit"]), default="table", show_default=True
)
@click.option("--junit-file", type=click.Path(dir_okay=False), help="Also write JUnit XML here (for CI).")
@click.option(
    "--timeout", type=click.FloatRange(1, 600), default=25.0, show_default=True, help="Seconds per wait."
)
@click.option("--list", "list_checks", is_flag=True, help="List the checks with what each needs, and exit.")
def validate(
    state_dir: str | None,
    kubeconfigs: tuple[str, ...],
    management_kubeconfig: str | None,
    lab_file: str | None,
    only: tuple[str, ...],
    output: str,
    junit_file: str | None,
    timeout: float,
    list_checks: bool,
) -> None:
    """Prove the wiring, fractional GPU sharing and tenant isolation of a lab or a real cluster.

    Talks to the clusters only through their kubeconfigs, so the same run works against a real
    kind + Kamaji + HAMi setup. Exit code 0 only if no check failed.
    """
    from tenantgpu.validate import cli_support

    if list_checks:
        cli_support.print_check_list()
        return
    from tenantgpu.lab.spec import LabSpecError, load_lab

    try:
        paths = cli_support.resolve_targets(state_dir, list(kubeconfigs), management_kubeconfig)
        lab_path = lab_file or paths.lab_file
        lab = load_lab(lab_path) if lab_path else None
        run = cli_support.prepare(paths, lab=lab, only=list(only), timeout=timeout)
    except (cli_support.BadInput, LabSpecError) as exc:
        raise UserError(str(exc)) from None
    failed = cli_support.execute(run, output=output, junit_file=junit_file)
    sys.exit(1 if failed else 0)


@main.command()
@click.option("-f", "--file", "lab_file", metavar="LAB.yaml", help="Lab spec [default: the seed lab].")
@click.option("--keep", is_flag=True, help="Keep the lab running afterwards and print how to reach it.")
def demo(lab_file: str | None, keep: bool) -> None:
    """Bring the seed lab up in a temporary state dir, validate it, report GPU sharing, take it down.

    Exit code 0 only if every check passed.
    """
    from tenantgpu.validate import demo as demo_flow

    try:
        ok = demo_flow.run_demo(lab_file, keep=keep)
    except demo_flow.DemoInputError as exc:
        raise UserError(str(exc)) from None
    sys.exit(0 if ok else 1)


# --- replay / capacity -----------------------------------------------------------------------


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
