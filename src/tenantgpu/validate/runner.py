"""Runs checks: lab-wide ones first, then each tenant's in order, tenants in parallel; cleans up even on Ctrl-C."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tenantgpu.validate.checks import Check
from tenantgpu.validate.cluster import ApiError, Unreachable
from tenantgpu.validate.context import CheckContext, RunSettings, Targets, sweep
from tenantgpu.validate.outcome import Cancelled, CheckFailed, CheckSkipped, Outcome


@dataclass(frozen=True)
class Result:
    """One check's outcome for one tenant (tenant None for a lab-wide check) and how long it took."""

    check: str
    tenant: str | None
    outcome: Outcome
    seconds: float


class Progress(Protocol):
    """Told as checks start and finish (from worker threads); the live table implements it."""

    def started(self, check: Check, tenant: str | None) -> None: ...
    def finished(self, result: Result) -> None: ...


class _Silent:
    def started(self, check: Check, tenant: str | None) -> None:
        pass

    def finished(self, result: Result) -> None:
        pass


def run_check(check: Check, targets: Targets, settings: RunSettings, tenant: str | None) -> Result:
    """Run one check, turning every way it can end into an Outcome (never an exception)."""
    ctx = CheckContext(targets=targets, settings=settings, check_name=check.name, tenant=tenant)
    started = time.monotonic()
    try:
        outcome = check.run(ctx)
    except (CheckFailed, CheckSkipped) as exc:
        outcome = exc.outcome
    except Cancelled:
        outcome = Outcome.failed("interrupted before it finished")
    except Unreachable as exc:
        outcome = Outcome.failed(
            "the API server did not answer", seen=str(exc), command=_version_command(ctx)
        )
    except ApiError as exc:
        outcome = Outcome.failed(
            f"the API server refused a request: {exc.reason}", seen=str(exc), command=_version_command(ctx)
        )
    except Exception as exc:  # a bug in a check must show as a failure, never pass silently
        outcome = Outcome.failed(f"the check crashed: {type(exc).__name__}: {exc}")
    return Result(check.name, tenant, outcome, time.monotonic() - started)


def _version_command(ctx: CheckContext) -> str:
    return ctx.kubectl("version") if ctx.tenant else ""


def run_suite(
    targets: Targets,
    checks: Sequence[Check],
    settings: RunSettings | None = None,
    progress: Progress | None = None,
) -> list[Result]:
    """Run `checks` against `targets`; results in suite order, tenants by name within a check."""
    settings = settings or RunSettings()
    progress = progress or _Silent()
    results: list[Result] = []
    lock = threading.Lock()

    def record(result: Result) -> None:
        with lock:
            results.append(result)
        progress.finished(result)

    def run_one(check: Check, tenant: str | None) -> None:
        if settings.cancel.is_set():
            record(Result(check.name, tenant, Outcome.failed("interrupted before it started"), 0.0))
            return
        progress.started(check, tenant)
        record(run_check(check, targets, settings, tenant))

    def run_tenant(tenant: str) -> None:
        ordered = [c for c in checks if c.per_tenant and not c.disruptive] + [
            c for c in checks if c.per_tenant and c.disruptive
        ]
        for check in ordered:
            run_one(check, tenant)

    tenants = sorted(targets.tenants)
    pool = concurrent.futures.ThreadPoolExecutor(
        max_workers=max(1, len(tenants)), thread_name_prefix="validate"
    )
    try:
        lab_wide = [pool.submit(run_one, c, None) for c in checks if not c.per_tenant]
        _wait(lab_wide)
        _wait([pool.submit(run_tenant, tenant) for tenant in tenants])
    except KeyboardInterrupt:
        settings.cancel.set()
        # Checks stop waiting at once and remove their namespaces on the way out; then sweep what is left.
        pool.shutdown(wait=True, cancel_futures=True)
        sweep(targets, settings)
        raise
    finally:
        pool.shutdown(wait=True)
    sweep(targets, settings)
    order = {c.name: i for i, c in enumerate(checks)}
    return sorted(results, key=lambda r: (order[r.check], r.tenant or ""))


def _wait(futures: list[concurrent.futures.Future[None]]) -> None:
    # A timeout keeps the main thread responsive to Ctrl-C while the workers run.
    pending = set(futures)
    while pending:
        _, pending = concurrent.futures.wait(pending, timeout=0.2)
    for future in futures:
        future.result()


def summary(results: Sequence[Result]) -> dict[str, int]:
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for result in results:
        counts[result.outcome.status] += 1
    return counts
