"""The one entry point: parses arguments and calls into the packages, nothing more."""

from __future__ import annotations

import sys

import click

from tenantgpu import __version__, eventloop


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
# imports kept in this region so other commands' edits do not collide
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402


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
        node_objects = _read_objects(nodes_path)
        # a pods file given as --nodes, or an empty dump, would otherwise plan against no cluster at all
        if not any(obj.get("kind") == "Node" for obj in node_objects):
            raise UserError(f"{nodes_path}: no Node in this file")
        objects.extend(node_objects)
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


_REASON_MIN_WIDTH = 30  # narrower than this, a reason column reads one word per line


def _print_placements(placements: list) -> None:  # type: ignore[type-arg]
    """A table of placements; reasons fold inside it when the terminal leaves them room, else they are
    listed below it, one pod per paragraph, so a narrow terminal never stacks one word per line."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    columns = ("POD", "NODE", "GPUS", "MEM/GPU", "CORES/GPU")
    rows = []
    reasons = []
    for p in placements:
        reason = p.reason or ""
        if reason.startswith("no available node") and ": " in reason:
            reason = reason.split(": ", 1)[1]  # the tally of reasons is what a person reads
        rows.append((p.pod, p.node or "-", str(p.gpus), p.memory or "-", p.cores or "-"))
        reasons.append(reason)
    # rich pads each column with one space either side; the last column has no right neighbour
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    fixed = sum(widths) + 2 * len(columns)
    inline = console.width - fixed >= _REASON_MIN_WIDTH or not any(reasons)
    table = Table(box=None, header_style="bold")
    for column in columns:
        table.add_column(column, no_wrap=True, overflow="fold")
    if inline:
        table.add_column("REASON", overflow="fold", min_width=min(_REASON_MIN_WIDTH, console.width))
    for row, reason in zip(rows, reasons, strict=True):
        table.add_row(*row, *((reason,) if inline else ()))
    console.print(table)
    if not inline:
        console.print()
        for p, reason in zip(placements, reasons, strict=True):
            if reason:
                console.print(f"{p.pod}: {reason}", overflow="fold", highlight=False)
    placed = sum(1 for p in placements if p.node)
    console.print(f"{placed}/{len(placements)} pods placed")


# --- lab: up / down / status / kubeconfig ----------------------------------------------------


class LabConflict(click.ClickException):
    """The lab is in a state that forbids the command (e.g. already running): one line and exit 1."""

    exit_code = 1

    def show(self, file=None) -> None:  # type: ignore[no-untyped-def]
        click.echo(f"error: {self.format_message()}", err=True, file=file)


def _hand_to_lab(value: str | None, env: str, what: str) -> None:
    """Check a process-count option in the caller's terminal (a bad one is exit 2 here), then hand it to
    the lab process through the environment, which the detached lab inherits."""
    if value is None:
        return
    import os

    from tenantgpu.lab.process import LabError, process_setting

    try:
        process_setting(value, env, what)
    except LabError as err:
        raise UserError(str(err)) from None
    os.environ[env] = value


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
    "--worker-processes",
    metavar="N|auto",
    help="How many processes run the tenants' worker nodes, HAMi and tunnel agents, beside the process of "
    "the API servers: a number, or auto (default: one per two cores once the lab has 3 or more worker nodes). "
    "0 runs everything in one process.",
)
@click.option(
    "--control-plane-processes",
    metavar="N|auto",
    help="How many more DataStores a new lab spreads its tenants over, each served by a process of its own "
    "(the first stays in the lab's process): a number, or auto (default: one per four cores once the lab "
    "has 4 or more tenants). A resumed tenant stays on the DataStore its data is in.",
)
@click.option(
    "--ready-fd", type=int, hidden=True, help="Internal: the detached child reports readiness here."
)
def up(
    lab_file: str | None,
    state_dir: str,
    detach: bool,
    worker_processes: str | None,
    control_plane_processes: str | None,
    ready_fd: int | None,
) -> None:
    """Start the management plane and one TenantControlPlane per tenant; return when all are Ready.

    On an existing state directory, resume the same lab (tenants, certificates, objects).
    """
    from tenantgpu.lab import process
    from tenantgpu.lab.state import StateDir, StateDirError

    state = StateDir.at(state_dir)
    _hand_to_lab(worker_processes, process.WORKER_PROCESSES_ENV, "worker processes")
    _hand_to_lab(control_plane_processes, process.CONTROL_PLANE_PROCESSES_ENV, "control-plane processes")
    if ready_fd is not None:
        _run_lab_child(state_dir, lab_file, ready_fd)
        return
    try:
        # Detached, the lab process starts first: it imports the lab while this process checks the file.
        launch = process.DetachedLab(state, lab_file) if detach else None
    except process.LabError as err:
        raise LabConflict(str(err)) from None

    from tenantgpu.lab import display
    from tenantgpu.lab.spec import LabSpecError, load_lab

    console = display.output_console()
    try:
        if launch is not None:
            try:
                if lab_file is not None:
                    load_lab(lab_file)  # a broken file is exit 2 here, and the lab process starts nothing
            except BaseException:
                launch.abort()
                raise
            with display.ProgressView(console) as view:
                endpoints = launch.run(view)
            display.print_summary(console, state, endpoints, detached=True)
            return
        pid = state.running_pid()
        if pid is not None:
            raise LabConflict(process.already_running_message(state, pid))
        if lab_file is not None:
            load_lab(lab_file)  # a broken file is exit 2 here, in the caller's terminal
        from tenantgpu.lab import supervisor

        lab = supervisor.resolve_lab(state, lab_file)
        view = display.ProgressView(console)

        def ready(endpoints: dict[str, str]) -> None:
            view.__exit__()
            display.print_summary(console, state, endpoints, detached=False)

        with view:
            supervisor.run_foreground(state, lab, view, ready)
    except (LabSpecError, StateDirError) as err:
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
    if not process.await_go_ahead(state):
        return  # the caller found the lab file broken, or went away: nothing was started
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
        click.echo(f"deleted {state.root}" if state.purge() else f"nothing to delete in {state.root}")


@main.command()
@_STATE_DIR
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def status(state_dir: str, output: str) -> None:
    """Tenants with endpoint and state; nodes, GPUs and pods per tenant."""
    import json

    from tenantgpu.lab import display
    from tenantgpu.lab.state import StateDir
    from tenantgpu.lab.status import collect_status

    result = eventloop.run(collect_status(StateDir.at(state_dir)))
    if output == "json":
        click.echo(json.dumps(result, indent=2))
    else:
        display.print_status(display.output_console(), result)
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


# --- token create ----------------------------------------------------------------------------


@main.group("token")
def token_group() -> None:
    """Bootstrap tokens of a tenant, as `kubeadm token` manages them: what a new worker joins with."""


@token_group.command("create")
@click.argument("tenant")
@click.option(
    "--ttl",
    default="24h",
    show_default=True,
    help="How long the token stays valid (Go duration: 30m, 24h, 1h30m; 0 = never expires).",
)
@click.option(
    "--print-join-command",
    is_flag=True,
    help="Print the whole `tenantgpu node run --join …` command instead of the bare token.",
)
@_STATE_DIR
def token_create(tenant: str, ttl: str, print_join_command: bool, state_dir: str) -> None:
    """Create a bootstrap token in TENANT (like `kubeadm token create`) and print it. A worker started
    with `tenantgpu node run --join` and this token finds the tenant, checks it is the one whose CA hash
    it was given, and asks for its node certificate, which the tenant approves on its own."""
    from tenantgpu.lab.state import StateDir
    from tenantgpu.node.join import TokenError, create_token_command

    state = StateDir.at(state_dir)
    path = state.tenant_kubeconfig(tenant)
    if not path.exists():
        raise UserError(
            f"no kubeconfig for tenant {tenant!r} in {state.root} (is the lab up and the tenant Ready?)"
        )
    try:
        click.echo(eventloop.run(create_token_command(path, ttl, print_join_command)))
    except TokenError as err:
        raise UserError(str(err)) from None


# --- node run --------------------------------------------------------------------------------


@main.group("node")
def node_group() -> None:
    """Simulated worker nodes (like KWOK nodes, with HAMi's device plugin and a kubelet)."""


@node_group.command("run")
@click.option(
    "--kubeconfig", "kubeconfig", type=click.Path(dir_okay=False), help="API to join, with these credentials."
)
@click.option(
    "--join",
    "join_endpoint",
    metavar="HOST:PORT",
    help="Join like `kubeadm join HOST:PORT`: with --token and --discovery-token-ca-cert-hash (from "
    "`tenantgpu token create TENANT --print-join-command`) instead of --kubeconfig; the kubelet then asks "
    "for its own certificate and acts as system:node:<name>, and its HTTPS port (logs, exec) serves only "
    "clients with a certificate of the cluster CA whom the cluster's RBAC allows.",
)
@click.option("--token", "token", metavar="ID.SECRET", help="The bootstrap token, with --join.")
@click.option(
    "--discovery-token-ca-cert-hash",
    "ca_hash",
    metavar="sha256:HEX",
    help="The cluster CA's public key hash, with --join: the worker trusts only that cluster.",
)
@click.option(
    "--cert-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where a joined kubelet keeps its client certificate (default .tenantgpu-kubelet/<name>); "
    "a later run with a valid one there does not join again.",
)
@click.option("--name", required=True, help="Node name.")
@click.option(
    "--gpu", "gpus", multiple=True, help="MODEL:MEMORY_MIB[:COUNT[:NUMA]], e.g. 'NVIDIA L4:23034:2'."
)
@click.option("--cpu", default="32", show_default=True, help="CPU capacity.")
@click.option("--memory", default="256Gi", show_default=True, help="Memory capacity.")
@click.option(
    "--pods",
    type=int,
    default=None,
    help="Pod capacity (default: with --join, maxPods of the tenant's kubelet-config ConfigMap, which the "
    "join writes to <cert-dir>/config.yaml; else 110).",
)
@click.option("--device-split-count", default=10, show_default=True, help="HAMi deviceSplitCount.")
@click.option("--label", "labels", multiple=True, help="Extra node label KEY=VALUE.")
@click.option("--host-ip", default="127.0.0.1", show_default=True, help="Address the kubelet serves logs on.")
@click.option("--kubelet-port", default=0, show_default=True, help="Kubelet HTTPS port (0 = any free one).")
@click.option(
    "--runtime-handler",
    "runtime_handlers",
    multiple=True,
    help="A container runtime handler a RuntimeClass may name (repeat for more); default runc, plus nvidia "
    "when the node has GPUs. A pod whose class names another stays ContainerCreating.",
)
@click.option(
    "--device-plugin-kubeconfig",
    type=click.Path(dir_okay=False),
    default=None,
    help="Credentials of HAMi's device plugin, e.g. a kubeconfig of the hami-device-plugin service "
    "account (default: --kubeconfig). Needed when --kubeconfig is the node's own (system:node:<name>): "
    "a node may not write the pod annotations Allocate sets.",
)
def node_run(
    kubeconfig: str | None,
    name: str,
    gpus: tuple[str, ...],
    cpu: str,
    memory: str,
    pods: int | None,
    device_split_count: int,
    labels: tuple[str, ...],
    host_ip: str,
    kubelet_port: int,
    runtime_handlers: tuple[str, ...],
    device_plugin_kubeconfig: str | None,
    join_endpoint: str | None,
    token: str | None,
    ca_hash: str | None,
    cert_dir: str | None,
) -> None:
    """Run one worker against any API server until interrupted (Ctrl-C)."""
    from pathlib import Path

    from tenantgpu.node.cli import JoinSpec, NodeRunError, run_node

    if (kubeconfig is None) == (join_endpoint is None):
        raise UserError(
            "give either --kubeconfig or --join (with --token and --discovery-token-ca-cert-hash)"
        )
    join = None
    if join_endpoint is not None:
        if not token or not ca_hash:
            raise UserError("--join needs --token and --discovery-token-ca-cert-hash")
        join = JoinSpec(join_endpoint, token, ca_hash, Path(cert_dir or Path(".tenantgpu-kubelet") / name))
    for given in (kubeconfig, device_plugin_kubeconfig):
        if given is not None and not Path(given).is_file():
            raise UserError(f"kubeconfig {given} does not exist")
    try:
        run_node(
            kubeconfig or join,  # type: ignore[arg-type]
            name,
            list(gpus),
            cpu=cpu,
            memory=memory,
            pods=pods,
            device_split_count=device_split_count,
            labels=list(labels),
            host_ip=host_ip,
            kubelet_port=kubelet_port,
            runtime_handlers=list(runtime_handlers) or None,
            device_plugin_kubeconfig=device_plugin_kubeconfig,
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
        if junit_file:
            cli_support.check_writable(junit_file)
        run = cli_support.prepare(paths, lab=lab, only=list(only), timeout=timeout)
    except (cli_support.BadInput, LabSpecError) as exc:
        raise UserError(str(exc)) from None
    try:
        failed = cli_support.execute(run, output=output, junit_file=junit_file)
    except cli_support.BadInput as exc:
        raise UserError(str(exc)) from None
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


def _parse_seeds(text: str) -> tuple[int, ...]:
    """`42-51` (inclusive), `42` or `42,43,50`; anything else is a UserError."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part[1:]:
                low, high = (int(x) for x in part.split("-", 1))
                if high < low:
                    raise ValueError
                seeds.extend(range(low, high + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise UserError(f"bad seed range {text!r}: use e.g. 42-51, 42 or 42,43") from None
    if not seeds or any(s < 0 for s in seeds):
        raise UserError(f"bad seed range {text!r}: use e.g. 42-51, 42 or 42,43")
    return tuple(dict.fromkeys(seeds))


def _load_trace(nodes_csv: str | None, pods_csv: str | None):  # type: ignore[no-untyped-def]
    from tenantgpu.replay.trace import TraceError, default_trace_dir, load_nodes, load_pods

    base = default_trace_dir()
    nodes_path = nodes_csv or str(base / "openb_node_list_gpu_node.csv")
    pods_path = pods_csv or str(base / "openb_pod_list_default.csv")
    try:
        return load_nodes(nodes_path), load_pods(pods_path), pods_path
    except TraceError as exc:
        raise UserError(str(exc)) from None


@main.command()
@click.option(
    "--nodes", "nodes_csv", metavar="NODES.csv", help="Node list CSV (default: the trace's GPU nodes)."
)
@click.option(
    "--pods", "pods_csv", metavar="PODS.csv", help="Pod list CSV (default: the trace's default list)."
)
@click.option(
    "--policy", "policies", multiple=True, metavar="NAME", help="Policy to run (repeatable; default all)."
)
@click.option("--seeds", default="42-51", show_default=True, help="Seeds: a range 42-51, or 42,43.")
@click.option("--tune", default=1.3, show_default=True, type=float, help="Workload size as × GPU capacity.")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(1, 64), help="Parallel processes.")
@click.option(
    "--hami-seeds", default=None, help="Seeds for the (slower) hami-* policies; default: the first seed."
)
@click.option(
    "--device-split-count",
    default=10,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="HAMi deviceSplitCount (pods per GPU) for the hami-* policies.",
)
@click.option("--no-bound", is_flag=True, help="Skip the offline bound.")
@click.option("-o", "--outdir", default="replay-out", show_default=True, type=click.Path(file_okay=False))
def replay(
    nodes_csv: str | None,
    pods_csv: str | None,
    policies: tuple[str, ...],
    seeds: str,
    tune: float,
    jobs: int,
    hami_seeds: str | None,
    device_split_count: int,
    no_bound: bool,
    outdir: str,
) -> None:
    """Replay a GPU-sharing trace under each placement policy, the FGD paper's way.

    Every pod row becomes a pod; the list is tuned to TUNE × GPU capacity and shuffled by seed; pods
    arrive one at a time and never leave. Writes OUTDIR/summary.json, report.html and PNG plots, and
    prints per policy the unallocated GPUs at 100 % arrived and the GPUs saved against whole-gpu.
    """
    from pathlib import Path

    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from tenantgpu.replay.policies import HAMI_POLICIES, policy_names
    from tenantgpu.replay.report import render_table, table_title, write_report
    from tenantgpu.replay.run import ReplayPlan, run_matrix, summarize

    seed_list = _parse_seeds(seeds)
    known = policy_names()
    unknown = [p for p in policies if p not in known]
    if unknown:
        raise UserError(f"unknown policy {unknown[0]!r}; choose from {', '.join(known)}")
    if tune <= 0:
        raise UserError(f"--tune must be positive, got {tune}")
    nodes, pods, pods_path = _load_trace(nodes_csv, pods_csv)
    if int(pods.total_milli.sum()) == 0:
        raise UserError(f"pod list {pods_path} asks for no GPU, so it cannot be tuned to GPU capacity")
    chosen = tuple(dict.fromkeys(policies)) or known
    slow_seeds = _parse_seeds(hami_seeds) if hami_seeds else seed_list[:1]
    plan = ReplayPlan(
        nodes=nodes,
        pods=pods,
        tune=tune,
        seeds=seed_list,
        policies=chosen,
        trace=Path(pods_path).stem,
        seeds_for={p: slow_seeds for p in chosen if p in HAMI_POLICIES},
        device_split_count=device_split_count,
    )
    total = len(plan.runs()) + (0 if no_bound else len(seed_list))
    console = Console(stderr=True)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("replay runs", total=total)
        results, bounds = run_matrix(
            plan, jobs=jobs, on_done=lambda _name: progress.advance(task), with_bound=not no_bound
        )
    summary = summarize(plan, results, bounds)
    out = Path(outdir)
    written = write_report(summary, out)
    rows = render_table(summary)
    table = Table(title=table_title(summary))
    for column in rows[0]:
        table.add_column(column, justify="left" if column == "policy" else "right")
    for row in rows[1:]:
        table.add_row(*row)
    Console(width=max(Console().width, 110)).print(table)
    if "offline_bound" in summary:
        bound = summary["offline_bound"]["median_min_unallocated_pct"]  # type: ignore[index]
        click.echo(f"offline bound: no placement leaves less than {bound:.2f} % unallocated")
    click.echo(f"wrote {', '.join(str(path) for path in written)}")


class _ComputedHelpOption(click.Option):
    """An option whose help is written when help is shown: it can name a constant of a package that
    brings numpy without every command's start paying for that import."""

    def __init__(self, *args: Any, help_from: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._help_from = help_from

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = self._help_from()
        return super().get_help_record(ctx)


def _capacity_pods_help() -> str:
    from tenantgpu.replay.trace import MANIFEST_SUFFIXES

    suffixes = ", ".join(MANIFEST_SUFFIXES)
    return (
        f"Pod list CSV, or Kubernetes manifests ({suffixes}): Pods, Lists and workloads with a pod "
        "template (default: the trace's default list)."
    )


def _capacity_policy_help() -> str:
    from tenantgpu.replay.policies import DEFAULT_CAPACITY_POLICIES

    return f"Policy to run (repeatable; default: {', '.join(DEFAULT_CAPACITY_POLICIES)})."


@main.command()
@click.option(
    "--pods",
    "pods_csv",
    metavar="PODS.csv|PODS.yaml",
    cls=_ComputedHelpOption,
    help_from=_capacity_pods_help,
)
@click.option(
    "--node", "node_shape", default="8x NVIDIA A100-SXM4-80GB", show_default=True, help="GPUs x model."
)
@click.option("--node-cpu", default=128, show_default=True, type=int, help="vCPU per node.")
@click.option("--node-memory-gib", default=1024, show_default=True, type=int, help="Memory per node (GiB).")
@click.option("--price", default=2.5, show_default=True, type=float, help="Price per GPU-hour.")
@click.option(
    "--policy",
    "policies",
    multiple=True,
    metavar="NAME",
    cls=_ComputedHelpOption,
    help_from=_capacity_policy_help,
)
@click.option("--seed", default=42, show_default=True, type=int, help="Seed of the arrival order.")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(1, 64), help="Parallel processes.")
@click.option("-o", "--outdir", default="capacity-out", show_default=True, type=click.Path(file_okay=False))
def capacity(
    pods_csv: str | None,
    node_shape: str,
    node_cpu: int,
    node_memory_gib: int,
    price: float,
    policies: tuple[str, ...],
    seed: int,
    jobs: int,
    outdir: str,
) -> None:
    """How many nodes of one shape does this workload need so that every pod fits, per policy?

    Every pod of the trace arrives once (shuffled by SEED, none leaves); for each policy the fewest
    nodes that place them all is found by simulation, and priced at PRICE per GPU-hour (730 h/month).
    """
    import json
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from tenantgpu.replay.capacity import NodeShape, plan_capacity, plot_capacity
    from tenantgpu.replay.policies import DEFAULT_CAPACITY_POLICIES, policy_names
    from tenantgpu.replay.pool import process_pool
    from tenantgpu.replay.trace import TraceError

    known = policy_names()
    unknown = [p for p in policies if p not in known]
    if unknown:
        raise UserError(f"unknown policy {unknown[0]!r}; choose from {', '.join(known)}")
    if price < 0:
        raise UserError(f"--price must not be negative, got {price}")
    try:
        shape = NodeShape.parse(node_shape, node_cpu, node_memory_gib)
    except TraceError as exc:
        raise UserError(str(exc)) from None
    _, pods, pods_path = (
        _load_trace(None, pods_csv) if pods_csv is None else (None, *_load_pods_only(pods_csv))
    )
    chosen = tuple(dict.fromkeys(policies)) or DEFAULT_CAPACITY_POLICIES
    console = Console(stderr=True)
    if jobs > 1:
        with process_pool(jobs) as pool:
            futures = [pool.submit(plan_capacity, pods, shape, (p,), price, seed) for p in chosen]
            outcomes = [f.result() for f in futures]
        answers = [a for answer, _ in outcomes for a in answer]
        too_big = outcomes[0][1]
    else:
        answers, too_big = plan_capacity(pods, shape, chosen, price, seed, on_step=console.log)
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    whole = next((a for a in answers if a.policy == "whole-gpu"), None)
    doc = {
        "pods": Path(pods_path).stem,
        "node": {"gpus": shape.gpus, "model": shape.model, "vcpu": node_cpu, "memory_gib": node_memory_gib},
        "price_per_gpu_hour": price,
        "seed": seed,
        "pods_too_big_for_node": too_big,
        "policies": {
            a.policy: {"nodes": a.nodes, "gpus": a.gpus, "monthly_cost": round(a.monthly_cost, 2)}
            for a in answers
        },
    }
    (out / "capacity.json").write_text(json.dumps(doc, indent=1))
    plot_capacity(answers, shape, price, str(out / "capacity.png"))
    table = Table(
        title=f"{Path(pods_path).stem} on {node_shape} nodes ({node_cpu} vCPU, {node_memory_gib} GiB)"
    )
    for column in ("policy", "nodes", "GPUs", "cost / month", "GPUs saved vs whole-gpu", "saved / month"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for a in sorted(answers, key=lambda a: a.gpus):
        saved = "—" if whole is None else f"{whole.gpus - a.gpus}"
        money = "—" if whole is None else f"{whole.monthly_cost - a.monthly_cost:,.0f}"
        table.add_row(a.policy, str(a.nodes), str(a.gpus), f"{a.monthly_cost:,.0f}", saved, money)
    Console(width=max(Console().width, 110)).print(table)
    if too_big:
        click.echo(f"{too_big} pods cannot fit on one such node at all and were left out")
    click.echo(f"wrote {out / 'capacity.json'}, {out / 'capacity.png'}")


def _load_pods_only(pods_path: str):  # type: ignore[no-untyped-def]
    from tenantgpu.replay.trace import TraceError, load_workload

    try:
        return load_workload(pods_path), pods_path
    except TraceError as exc:
        raise UserError(str(exc)) from None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
