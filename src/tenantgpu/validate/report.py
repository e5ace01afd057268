"""The suite's results for people (a rich table with live progress) and machines (JSON, JUnit XML)."""

from __future__ import annotations

import json
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from tenantgpu.validate.checks import Check
from tenantgpu.validate.runner import Result, summary

_STYLE = {"passed": "green", "failed": "bold red", "skipped": "yellow"}
_MARK = {"passed": "✓ passed", "failed": "✗ failed", "skipped": "- skipped"}


def to_json(results: Sequence[Result]) -> dict[str, Any]:
    """`{"checks": [{name, tenant, status, seconds, detail, ...}], "passed": N, "failed": N, "skipped": N}`."""
    checks = []
    for result in results:
        entry: dict[str, Any] = {
            "name": result.check,
            "tenant": result.tenant,
            "status": result.outcome.status,
            "seconds": round(result.seconds, 3),
            "detail": result.outcome.detail,
        }
        for key in ("expected", "seen", "command"):
            if value := getattr(result.outcome, key):
                entry[key] = value
        checks.append(entry)
    return {"checks": checks, **summary(results)}


def json_text(results: Sequence[Result]) -> str:
    return json.dumps(to_json(results), indent=2)


def to_junit(results: Sequence[Result], suite_name: str = "tenantgpu-validate") -> str:
    """JUnit XML: one testcase per check and tenant (classname = tenant), failures with expected/seen/look."""
    counts = summary(results)
    total = sum(r.seconds for r in results)
    suites = ET.Element(
        "testsuites", name=suite_name, tests=str(len(results)), failures=str(counts["failed"])
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=suite_name,
        tests=str(len(results)),
        failures=str(counts["failed"]),
        errors="0",
        skipped=str(counts["skipped"]),
        time=f"{total:.3f}",
    )
    for result in results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"{suite_name}.{result.tenant or 'lab'}",
            name=result.check,
            time=f"{result.seconds:.3f}",
        )
        if result.outcome.status == "failed":
            failure = ET.SubElement(case, "failure", message=result.outcome.detail, type="CheckFailed")
            failure.text = result.outcome.explain()
        elif result.outcome.status == "skipped":
            ET.SubElement(case, "skipped", message=result.outcome.detail)
        else:
            ET.SubElement(case, "system-out").text = result.outcome.detail
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def results_table(
    results: Sequence[Result], details_for: tuple[str, ...] = ("passed", "failed", "skipped")
) -> Table:
    """One row per check and tenant; the detail column only for the statuses in `details_for` (and only if any)."""
    rows = []
    for result in results:
        status = result.outcome.status
        detail = result.outcome.explain() if status == "failed" else result.outcome.detail
        rows.append((result, detail if status in details_for else ""))
    with_details = any(detail for _, detail in rows)
    table = Table(title="tenantgpu validate", show_lines=False, expand=False)
    table.add_column("check", no_wrap=True)
    table.add_column("tenant", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("s", justify="right")
    if with_details:
        table.add_column("detail", overflow="fold")
    for result, detail in rows:
        status = result.outcome.status
        cells = [
            result.check,
            result.tenant or "(lab)",
            Text(_MARK[status], style=_STYLE[status]),
            f"{result.seconds:.1f}",
        ]
        table.add_row(*cells, *([detail] if with_details else []))
    return table


def summary_line(results: Sequence[Result]) -> Text:
    counts = summary(results)
    style = "bold red" if counts["failed"] else "bold green"
    return Text(
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped", style=style
    )


class LiveTable:
    """Live progress: every check × tenant row, a spinner on those running, the outcome as each ends."""

    def __init__(self, checks: Sequence[Check], tenants: Sequence[str], console: Console) -> None:
        self._rows: dict[tuple[str, str | None], Result | float | None] = {}
        for check in checks:
            for tenant in sorted(tenants) if check.per_tenant else [None]:
                self._rows[(check.name, tenant)] = None
        self._lock = threading.Lock()
        self._live = Live(get_renderable=self._render, console=console, refresh_per_second=8, transient=True)

    def __enter__(self) -> LiveTable:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(None, None, None)

    def started(self, check: Check, tenant: str | None) -> None:
        with self._lock:
            self._rows[(check.name, tenant)] = time.monotonic()

    def finished(self, result: Result) -> None:
        with self._lock:
            self._rows[(result.check, result.tenant)] = result

    def _render(self) -> Group:
        table = Table(title="tenantgpu validate (running)")
        table.add_column("check", no_wrap=True)
        table.add_column("tenant", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column("s", justify="right")
        done = 0
        with self._lock:
            rows = list(self._rows.items())
        now = time.monotonic()
        for (check, tenant), state in rows:
            if isinstance(state, Result):
                done += 1
                status = state.outcome.status
                table.add_row(
                    check,
                    tenant or "(lab)",
                    Text(_MARK[status], style=_STYLE[status]),
                    f"{state.seconds:.1f}",
                )
            elif isinstance(state, float):
                table.add_row(check, tenant or "(lab)", Spinner("dots", text="running"), f"{now - state:.1f}")
            else:
                table.add_row(check, tenant or "(lab)", Text("waiting", style="dim"), "")
        return Group(table, Text(f"{done}/{len(rows)} done", style="dim"))
