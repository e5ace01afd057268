"""How the lab shows itself in a terminal: progress while it comes up, a summary, and the status tables."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.status import Status
from rich.table import Table

from tenantgpu.lab.process import Progress
from tenantgpu.lab.state import StateDir
from tenantgpu.terminal import table_console

_DONE_STATES = {"ready", "resuming"}
# Piped or redirected (a file, `grep`), every cell whole, as kubectl writes them.
_PIPED_WIDTH = 400


def output_console() -> Console:
    """The console for the lab's tables (`tenantgpu up`, `status`)."""
    return table_console(_PIPED_WIDTH)


class ProgressView:
    """A spinner naming what is starting, and one line per thing that became ready."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._status: Status | None = None

    def __enter__(self) -> ProgressView:
        self._status = self.console.status("starting the lab")
        self._status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()

    def __call__(self, step: Progress) -> None:
        if step.state == "ready":
            detail = f"  [dim]{step.detail}[/dim]" if step.detail else ""
            self.console.print(f"[green]✔[/green] {step.what} [bold]{step.shown}[/bold]{detail}")
        elif self._status is not None:
            self._status.update(f"{step.what}: {step.state}")


def print_summary(console: Console, state: StateDir, endpoints: dict[str, str], *, detached: bool) -> None:
    table = Table(title="tenantgpu lab", show_edge=False)
    table.add_column("TENANT")
    table.add_column("ENDPOINT")
    table.add_column("KUBECONFIG")
    for tenant, endpoint in sorted(endpoints.items()):
        table.add_row(tenant, f"https://{endpoint}", str(state.tenant_kubeconfig(tenant)))
    console.print(table)
    console.print(f"management: kubectl --kubeconfig {state.management_kubeconfig} get tcp -A")
    if detached:
        console.print(f"logs: {state.log_file}   stop: tenantgpu down --state-dir {state.root}")
    else:
        console.print("running in the foreground; press Ctrl-C to stop")


def print_status(console: Console, status: dict[str, Any]) -> None:
    if not status["running"]:
        console.print(f"no lab is running in {status['stateDir']}")
        return
    console.print(
        f"lab in {status['stateDir']} (pid {status['pid']}), management {status['management']['endpoint']}"
    )
    tenants = Table(show_edge=False)
    for column in ("NAMESPACE", "TENANT", "STATE", "VERSION", "ENDPOINT", "NODES", "PODS"):
        tenants.add_column(column)
    for t in status["tenants"]:
        ready_nodes = sum(1 for n in t["nodes"] if n["ready"])
        tenants.add_row(
            t["namespace"],
            t["name"],
            t["state"],
            t["version"],
            t["endpoint"] or "-",
            f"{ready_nodes}/{len(t['nodes'])}",
            str(len(t["pods"])),
        )
    console.print(tenants)
    gpus = Table(show_edge=False, title="GPUs")
    for column in ("TENANT", "NODE", "UUID", "TYPE", "MEMORY (MiB)", "CORES (%)", "SHARED PODS"):
        gpus.add_column(column)
    rows = 0
    for t in status["tenants"]:
        for node in t["nodes"]:
            for gpu in node["gpus"]:
                rows += 1
                gpus.add_row(
                    t["name"],
                    node["name"],
                    gpu["uuid"],
                    gpu["type"],
                    f"{gpu['memory']['allocated']}/{gpu['memory']['total']}",
                    f"{gpu['cores']['allocated']}/{gpu['cores']['total']}",
                    str(gpu["sharedPods"]),
                )
    if rows:
        console.print(gpus)
    pods = Table(show_edge=False, title="pods")
    for column in ("TENANT", "NAMESPACE", "POD", "PHASE", "NODE"):
        pods.add_column(column)
    for t in status["tenants"]:
        for pod in t["pods"]:
            pods.add_row(t["name"], pod["namespace"], pod["name"], pod["phase"], pod["node"] or "-")
    if pods.row_count:
        console.print(pods)
