"""What `tenantgpu validate` does between parsing its arguments and exiting: targets, the run, the output."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tenantgpu.terminal import table_console
from tenantgpu.validate import report
from tenantgpu.validate.checks import ALL_CHECKS, Check, check_names, select
from tenantgpu.validate.cluster import KubeCluster
from tenantgpu.validate.context import Expectations, RunSettings, Targets
from tenantgpu.validate.runner import Result, run_suite, summary
from tenantgpu.validate.targets import (
    DEFAULT_STATE_DIR,
    KubeconfigPaths,
    TargetError,
    from_arguments,
    from_state_dir,
)


class BadInput(Exception):
    """A user mistake in the arguments: one line, exit 2."""


@dataclass
class PreparedRun:
    targets: Targets
    checks: tuple[Check, ...]
    settings: RunSettings


def resolve_targets(state_dir: str | None, kubeconfigs: list[str], management: str | None) -> KubeconfigPaths:
    if state_dir and kubeconfigs:
        raise BadInput("give either --state-dir or --kubeconfig TENANT=PATH, not both")
    if management and not kubeconfigs:
        raise BadInput("--management-kubeconfig goes with --kubeconfig TENANT=PATH (a state dir has its own)")
    try:
        if kubeconfigs:
            return from_arguments(kubeconfigs, management)
        return from_state_dir(state_dir or DEFAULT_STATE_DIR)
    except TargetError as exc:
        raise BadInput(str(exc)) from None


def prepare(paths: KubeconfigPaths, *, lab: Any | None, only: list[str], timeout: float) -> PreparedRun:
    names = [name.strip() for item in only for name in item.split(",") if name.strip()]
    try:
        checks = select(names)
    except KeyError as exc:
        raise BadInput(f"--only: no check named {exc.args[0]!r}; known: {', '.join(check_names())}") from None
    try:
        tenants = {name: KubeCluster(name, path) for name, path in paths.tenants.items()}
        management = KubeCluster("management", paths.management) if paths.management else None
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    expectations = Expectations.from_lab(lab) if lab is not None else None
    if expectations is not None:
        unknown = sorted(set(tenants) - set(expectations.nodes))
        if unknown:
            raise BadInput(
                f"tenant {', '.join(unknown)} is not in the lab spec (tenants: {', '.join(expectations.nodes)})"
            )
    return PreparedRun(
        Targets(tenants, management, expectations), checks, RunSettings(timeout_seconds=timeout)
    )


def run_with_live_table(run: PreparedRun, console: Console) -> list[Result]:
    if console.is_terminal:
        with report.LiveTable(run.checks, list(run.targets.tenants), console) as live:
            return run_suite(run.targets, run.checks, run.settings, live)
    return run_suite(run.targets, run.checks, run.settings)


def execute(run: PreparedRun, *, output: str, junit_file: str | None) -> bool:
    """Run, print in the chosen format, write JUnit if asked; True if anything failed."""
    console = table_console(150, stderr=output != "table")
    try:
        results = (
            run_with_live_table(run, console)
            if output == "table"
            else run_suite(run.targets, run.checks, run.settings)
        )
    except KeyboardInterrupt:
        console.print("interrupted: removed the namespaces this run created")
        raise SystemExit(130) from None
    if output == "table":
        console.print(report.results_table(results))
        console.print(report.summary_line(results))
    elif output == "json":
        sys.stdout.write(report.json_text(results) + "\n")
    else:
        sys.stdout.write(report.to_junit(results))
    if junit_file:
        try:
            Path(junit_file).write_text(report.to_junit(results), encoding="utf-8")
        except OSError as exc:  # checked before the run, but the folder may go meanwhile
            raise BadInput(f"cannot write {junit_file}: {exc.strerror or exc}") from None
    return summary(results)["failed"] > 0


def check_writable(path: str) -> None:
    """Refuses a JUnit path that cannot be written before the suite runs, not after it."""
    folder = Path(path).parent
    if not folder.is_dir():
        raise BadInput(f"cannot write {path}: {folder} is not a directory")
    if not os.access(folder, os.W_OK) or (Path(path).exists() and not os.access(path, os.W_OK)):
        raise BadInput(f"cannot write {path}: permission denied")


def print_check_list() -> None:
    table = Table(title="tenantgpu validate: checks")
    table.add_column("check", no_wrap=True)
    table.add_column("scope")
    table.add_column("needs")
    table.add_column("description")
    for check in ALL_CHECKS:
        needs = ", ".join(sorted(n.value for n in check.needs)) or "a tenant kubeconfig"
        table.add_row(check.name, "per tenant" if check.per_tenant else "lab", needs, check.description)
    Console().print(table)
