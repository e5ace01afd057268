"""The runner turns every ending into an outcome and cleans up; reports are valid JSON / JUnit and say why."""

from __future__ import annotations

import json
import threading
import xml.etree.ElementTree as ET

from rich.console import Console

from tenantgpu.validate import report
from tenantgpu.validate.checks import Check
from tenantgpu.validate.context import CheckContext, RunSettings, Targets
from tenantgpu.validate.outcome import CheckFailed, Outcome
from tenantgpu.validate.runner import Result, run_suite

from .fake import FakeCluster


def _check(name: str, fn, per_tenant: bool = True) -> Check:
    return Check(name, f"{name} description", fn, per_tenant=per_tenant)


def _fails(ctx: CheckContext) -> Outcome:
    raise CheckFailed("it broke", expected="X", seen="Y", command="kubectl get x")


def _crashes(ctx: CheckContext) -> Outcome:
    raise ZeroDivisionError("division by zero")


def _passes(ctx: CheckContext) -> Outcome:
    return Outcome.passed(f"fine for {ctx.tenant}")


def _targets() -> Targets:
    return Targets({"tenant-b": FakeCluster("tenant-b"), "tenant-a": FakeCluster("tenant-a")})


def test_results_come_in_suite_order_per_tenant_and_a_crash_is_a_failure() -> None:
    checks = [
        _check("one", _passes),
        _check("lab", _passes, per_tenant=False),
        _check("two", _crashes),
        _check("three", _fails),
    ]
    results = run_suite(_targets(), checks, RunSettings())
    assert [(r.check, r.tenant) for r in results] == [
        ("one", "tenant-a"),
        ("one", "tenant-b"),
        ("lab", None),
        ("two", "tenant-a"),
        ("two", "tenant-b"),
        ("three", "tenant-a"),
        ("three", "tenant-b"),
    ]
    crashed = results[3].outcome
    assert (
        crashed.status == "failed"
        and crashed.detail == "the check crashed: ZeroDivisionError: division by zero"
    )


def test_tenants_run_in_parallel() -> None:
    barrier = threading.Barrier(2, timeout=5)

    def meets_the_other_tenant(ctx: CheckContext) -> Outcome:
        barrier.wait()  # only returns if both tenants' checks run at the same time
        return Outcome.passed("met")

    results = run_suite(_targets(), [_check("together", meets_the_other_tenant)], RunSettings())
    assert [r.outcome.status for r in results] == ["passed", "passed"]


def test_the_run_removes_namespaces_a_check_left_behind() -> None:
    targets = _targets()

    def leaves_a_namespace(ctx: CheckContext) -> Outcome:
        body = {"metadata": {"name": ctx.namespace_name(), "labels": ctx.labels()}}
        ctx.cluster.create("Namespace", body)
        return Outcome.passed("left it")

    settings = RunSettings()
    run_suite(targets, [_check("leaky", leaves_a_namespace)], settings)
    for cluster in targets.tenants.values():
        assert cluster.list("Namespace") == []
        assert ("Namespace", None, f"tenantgpu-validate-leaky-{settings.run_id}") in cluster.deleted


def test_json_has_the_documented_shape() -> None:
    results = run_suite(_targets(), [_check("one", _passes), _check("three", _fails)], RunSettings())
    data = json.loads(report.json_text(results))
    assert (data["passed"], data["failed"], data["skipped"]) == (2, 2, 0)
    first = data["checks"][0]
    assert set(first) == {"name", "tenant", "status", "seconds", "detail"}
    failed = data["checks"][2]
    assert failed["status"] == "failed" and failed["expected"] == "X" and failed["command"] == "kubectl get x"


def test_junit_counts_and_explains_failures() -> None:
    results = [
        Result("one", "tenant-a", Outcome.passed("ok"), 0.5),
        Result(
            "two",
            "tenant-a",
            Outcome.failed("it broke", expected="X", seen="Y", command="kubectl get x"),
            1.0,
        ),
        Result("three", None, Outcome.skipped("no management kubeconfig"), 0.0),
    ]
    root = ET.fromstring(report.to_junit(results))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = suite.findall("testcase")
    assert cases[1].get("classname") == "tenantgpu-validate.tenant-a" and cases[1].get("name") == "two"
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("message") == "it broke"
    assert failure.text == "it broke\nexpected: X\nseen:     Y\nlook:     kubectl get x"
    skipped = cases[2].find("skipped")
    assert skipped is not None and skipped.get("message") == "no management kubeconfig"


def test_table_shows_what_was_expected_and_seen_for_a_failure() -> None:
    console = Console(width=200, record=True)
    results = [
        Result(
            "two",
            "tenant-a",
            Outcome.failed("it broke", expected="X", seen="Y", command="kubectl get x"),
            1.0,
        )
    ]
    console.print(report.results_table(results))
    console.print(report.summary_line(results))
    text = console.export_text()
    assert "✗ failed" in text and "expected: X" in text and "look:     kubectl get x" in text
    assert "0 passed, 1 failed, 0 skipped" in text


def test_ctrl_c_stops_waiting_checks_and_removes_their_namespaces() -> None:
    import os
    import signal

    import pytest

    targets = _targets()
    entered = threading.Event()

    def waits_forever(ctx: CheckContext) -> Outcome:
        with ctx.namespace():
            entered.set()
            if ctx.tenant == "tenant-a":
                os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl-C while checks wait
            while True:
                ctx.sleep(0.05)  # raises Cancelled once the run is interrupted

    settings = RunSettings()
    with pytest.raises(KeyboardInterrupt):
        run_suite(targets, [_check("forever", waits_forever)], settings)
    assert entered.is_set() and settings.cancel.is_set()
    for cluster in targets.tenants.values():
        assert cluster.list("Namespace") == []


def test_live_table_shows_each_row_as_it_finishes() -> None:
    import io

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120)
    checks = [_check("one", _passes), _check("three", _fails)]
    targets = _targets()
    with report.LiveTable(checks, list(targets.tenants), console) as live:
        run_suite(targets, checks, RunSettings(), live)
    text = buffer.getvalue()
    assert "tenantgpu validate (running)" in text
    assert "✓ passed" in text and "✗ failed" in text
    assert "4/4 done" in text
