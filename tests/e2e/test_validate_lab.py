"""The validation suite against a running seed lab: every check passes on the healthy lab, and fails with a
useful message once the lab is broken on purpose (each break is undone afterwards)."""

from __future__ import annotations

import contextlib
import copy
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

pytest.importorskip("tenantgpu.lab.supervisor", reason="the lab package is not importable on this branch")

from tenantgpu.lab.spec import load_lab
from tenantgpu.validate import lab_control
from tenantgpu.validate.checks import ALL_CHECKS
from tenantgpu.validate.cluster import KubeCluster
from tenantgpu.validate.context import DeclaredNode, Expectations, RunSettings, Targets
from tenantgpu.validate.runner import Result, run_check, run_suite

pytestmark = pytest.mark.slow

_CHECKS = {check.name: check for check in ALL_CHECKS}
_FAST = 4.0  # a broken lab must fail quickly; a healthy one answers in well under a second


@pytest.fixture(scope="module")
def lab_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The seed lab, up in the background in a private state dir for this module."""
    state = tmp_path_factory.mktemp("lab") / "state"
    command = [sys.executable, "-m", "tenantgpu"]
    up = subprocess.run(
        [*command, "up", "-d", "--state-dir", str(state)], capture_output=True, text=True, timeout=120
    )
    assert up.returncode == 0, f"tenantgpu up failed: {up.stderr}{up.stdout}"
    try:
        yield state
    finally:
        subprocess.run([*command, "down", "--state-dir", str(state)], capture_output=True, timeout=60)


def _targets(lab_dir: Path, **replace: KubeCluster) -> Targets:
    tenants = {
        path.name.removesuffix(".kubeconfig"): KubeCluster(path.name.removesuffix(".kubeconfig"), path)
        for path in sorted((lab_dir / "kubeconfigs").glob("*.kubeconfig"))
    }
    management = KubeCluster("management", lab_dir / "management.kubeconfig")
    tenants.update({k: v for k, v in replace.items() if k != "management"})
    return Targets(
        tenants, replace.get("management", management), Expectations.from_lab(load_lab(lab_dir / "lab.yaml"))
    )


def _one(check: str, targets: Targets, tenant: str | None = "tenant-a", timeout: float = _FAST) -> Result:
    return run_check(_CHECKS[check], targets, RunSettings(timeout_seconds=timeout), tenant)


@pytest.fixture(scope="module")
def healthy(lab_dir: Path) -> dict[str, list[Result]]:
    results = run_suite(_targets(lab_dir), ALL_CHECKS, RunSettings())
    by_check: dict[str, list[Result]] = {}
    for result in results:
        by_check.setdefault(result.check, []).append(result)
    return by_check


@pytest.mark.parametrize("check", [c.name for c in ALL_CHECKS])
def test_every_check_passes_on_the_healthy_lab(healthy: dict[str, list[Result]], check: str) -> None:
    results = healthy[check]
    assert results, f"{check} did not run"
    for result in results:
        assert result.outcome.status == "passed", f"{check} [{result.tenant}]: {result.outcome.explain()}"


def test_the_healthy_run_left_no_namespace_behind(lab_dir: Path, healthy: dict[str, list[Result]]) -> None:
    for name, cluster in _targets(lab_dir).tenants.items():
        left = [
            ns["metadata"]["name"]
            for ns in cluster.list("Namespace")
            if ns["metadata"]["name"].startswith("tenantgpu-validate-")
            and (ns.get("status") or {}).get("phase") != "Terminating"
        ]
        assert left == [], f"{name} still has {left}"


def test_validate_command_on_the_state_dir_prints_json_and_junit(lab_dir: Path, tmp_path: Path) -> None:
    junit = tmp_path / "validate.xml"
    command = [sys.executable, "-m", "tenantgpu", "validate", "--state-dir", str(lab_dir)]
    only = ["--only", "tenant-control-planes-ready,workers-joined,gpus-registered"]
    run = subprocess.run(
        [*command, *only, "-o", "json", "--junit-file", str(junit)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    data = json.loads(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    assert data["passed"] == 6 and data["failed"] == 0
    assert "<testsuite" in junit.read_text()


# -- broken on purpose ---------------------------------------------------------------------------


def _kubeconfig_copy(path: Path, tmp_path: Path, name: str, **cluster_fields: str) -> Path:
    config = yaml.safe_load(path.read_text())
    for entry in config["clusters"]:
        entry["cluster"].update(cluster_fields)
    target = tmp_path / f"{name}.kubeconfig"
    target.write_text(yaml.safe_dump(config))
    return target


def test_management_plane_that_does_not_answer_fails(lab_dir: Path, tmp_path: Path) -> None:
    dead = _kubeconfig_copy(lab_dir / "management.kubeconfig", tmp_path, "dead", server="https://127.0.0.1:9")
    result = _one(
        "management-plane-ready", _targets(lab_dir, management=KubeCluster("management", dead)), None
    )
    assert result.outcome.status == "failed"
    assert result.outcome.detail == "the management API does not answer"
    assert "127.0.0.1:9" in result.outcome.seen


def test_tenant_given_the_other_tenants_ca_fails(lab_dir: Path, tmp_path: Path) -> None:
    other = yaml.safe_load((lab_dir / "kubeconfigs" / "tenant-b.kubeconfig").read_text())
    ca = other["clusters"][0]["cluster"]["certificate-authority-data"]
    wrong = _kubeconfig_copy(
        lab_dir / "kubeconfigs" / "tenant-a.kubeconfig",
        tmp_path,
        "tenant-a",
        **{"certificate-authority-data": ca},
    )
    result = _one(
        "tenant-control-planes-ready", _targets(lab_dir, **{"tenant-a": KubeCluster("tenant-a", wrong)})
    )
    assert result.outcome.status == "failed"
    assert "certificate" in result.outcome.seen
    assert result.outcome.command.endswith(f"{wrong} version")


def test_a_missing_worker_fails_workers_joined(lab_dir: Path) -> None:
    targets = _targets(lab_dir)
    assert targets.expectations is not None
    declared = targets.expectations.nodes["tenant-a"] + (DeclaredNode("worker-a9", ()),)
    targets.expectations = Expectations({**targets.expectations.nodes, "tenant-a": declared})
    result = run_check(_CHECKS["workers-joined"], targets, RunSettings(timeout_seconds=_FAST), "tenant-a")
    assert result.outcome.status == "failed"
    assert "missing worker-a9" in result.outcome.detail
    assert result.outcome.seen == "worker-a1"


@contextlib.contextmanager
def _node_annotation(cluster: KubeCluster, node: str, key: str, value: str | None) -> Iterator[str | None]:
    """Set (or remove) a node annotation for the duration; restore the original afterwards."""
    original = ((cluster.get("Node", node) or {}).get("metadata", {}).get("annotations") or {}).get(key)
    cluster.patch("Node", node, {"metadata": {"annotations": {key: value}}})
    try:
        yield original
    finally:
        cluster.patch("Node", node, {"metadata": {"annotations": {key: original}}})


def test_a_gpu_missing_from_the_registration_fails_gpus_registered(lab_dir: Path) -> None:
    targets = _targets(lab_dir)
    cluster = targets.tenants["tenant-b"]
    register = cluster.get("Node", "worker-b1")["metadata"]["annotations"]["hami.io/node-nvidia-register"]
    gpus = json.loads(register)
    with _node_annotation(cluster, "worker-b1", "hami.io/node-nvidia-register", json.dumps(gpus[:1])):
        result = _one("gpus-registered", targets, "tenant-b")
    assert result.outcome.status == "failed"
    assert f"{gpus[1]['id']} (NVIDIA L4) not registered" in result.outcome.detail


@contextlib.contextmanager
def _without_webhooks(cluster: KubeCluster) -> Iterator[None]:
    saved = [
        c
        for c in cluster.list("MutatingWebhookConfiguration")
        if any("hami" in w.get("name", "") for w in c.get("webhooks") or [])
    ]
    assert saved, "the lab has no HAMi webhook configuration"
    for config in saved:
        cluster.delete("MutatingWebhookConfiguration", config["metadata"]["name"])
    try:
        yield
    finally:
        for config in saved:
            body = copy.deepcopy(config)
            for key in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
                body["metadata"].pop(key, None)
            cluster.create("MutatingWebhookConfiguration", body)


def test_deleted_webhook_configuration_fails_webhook_through_tunnel(lab_dir: Path) -> None:
    targets = _targets(lab_dir)
    with _without_webhooks(targets.tenants["tenant-a"]):
        result = _one("webhook-through-tunnel", targets)
    assert result.outcome.status == "failed"
    assert result.outcome.expected == "schedulerName hami-scheduler"
    assert "no HAMi webhook configured" in result.outcome.seen


def test_deleted_webhook_configuration_fails_scheduler_recovers(lab_dir: Path) -> None:
    targets = _targets(lab_dir)
    with _without_webhooks(targets.tenants["tenant-a"]):
        result = _one("scheduler-recovers", targets)
    assert result.outcome.status == "failed"
    assert "webhook did not mutate the pod" in result.outcome.detail


def test_cards_that_take_one_pod_each_fail_fractional_scheduling(lab_dir: Path) -> None:
    targets = _targets(lab_dir)
    cluster = targets.tenants["tenant-a"]
    gpus = json.loads(
        cluster.get("Node", "worker-a1")["metadata"]["annotations"]["hami.io/node-nvidia-register"]
    )
    single = json.dumps([{**gpu, "count": 1} for gpu in gpus])
    with _node_annotation(cluster, "worker-a1", "hami.io/node-nvidia-register", single):
        result = _one("fractional-scheduling", targets)
    assert result.outcome.status == "failed"
    assert "slice-2" in result.outcome.detail
    assert "CardTimeSlicingExhausted" in result.outcome.seen


def test_another_tenants_kubeconfig_fails_isolation(lab_dir: Path) -> None:
    b = KubeCluster("tenant-b", lab_dir / "kubeconfigs" / "tenant-b.kubeconfig")
    result = _one("tenant-isolation", _targets(lab_dir, **{"tenant-a": b}))
    assert result.outcome.status == "failed"
    assert "sees tenant-b's nodes worker-b1" in result.outcome.seen
    assert "its credentials work against tenant-b's API server" in result.outcome.seen


def test_a_held_node_lock_fails_no_lock_contention(lab_dir: Path) -> None:
    targets = _targets(lab_dir)
    cluster = targets.tenants["tenant-a"]
    holder = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "lock-holder"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeName": "worker-a1"},
    }
    cluster.create("Pod", holder, "default")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        with _node_annotation(cluster, "worker-a1", "hami.io/mutex.lock", f"{now},default,lock-holder"):
            result = _one("no-lock-contention", targets)
    finally:
        cluster.delete("Pod", "lock-holder", "default")
    assert result.outcome.status == "failed"
    assert "Running" in result.outcome.expected
    assert "burst-" in result.outcome.detail


def _users_slice(name: str, uuid: str | None = None) -> dict:
    """A workload of the tenant's own, as a user would leave it running beside the suite."""
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000", "nvidia.com/gpucores": "20"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"nvidia.com/use-gpuuuid": uuid} if uuid else {}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "cuda", "image": "busybox", "resources": {"limits": limits}}],
        },
    }


def _wait_allocated(cluster: KubeCluster, name: str, namespace: str) -> str:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        pod = cluster.get("Pod", name, namespace) or {}
        allocated = (pod.get("metadata") or {}).get("annotations", {}).get("hami.io/vgpu-devices-allocated")
        if allocated:
            return allocated
        time.sleep(0.05)
    raise AssertionError(f"{namespace}/{name} got no GPU")


def test_whole_card_checks_leave_a_users_running_slice_alone(lab_dir: Path) -> None:
    """The README's walk-through leaves a slice on tenant-a's one A100 and then runs the suite: the
    checks that need a whole card say why they cannot run there instead of failing, and on tenant-b
    they take the L4 nobody uses."""
    targets = _targets(lab_dir)
    a, b = targets.tenants["tenant-a"], targets.tenants["tenant-b"]
    l4s = json.loads(b.get("Node", "worker-b1")["metadata"]["annotations"]["hami.io/node-nvidia-register"])
    a.create("Pod", _users_slice("slice"), "default")
    b.create("Pod", _users_slice("slice", l4s[0]["id"]), "default")
    try:
        _wait_allocated(a, "slice", "default")
        assert l4s[0]["id"] in _wait_allocated(b, "slice", "default")
        for check in ("exclusive-card", "capacity-freed"):
            skipped = _one(check, targets, "tenant-a").outcome
            assert skipped.status == "skipped", skipped.explain()
            assert "needs an idle GPU" in skipped.detail and "by default/slice" in skipped.detail
            passed = _one(check, targets, "tenant-b", timeout=30.0).outcome
            assert passed.status == "passed", passed.explain()
            assert l4s[1]["id"] in passed.detail
    finally:
        for cluster in (a, b):
            cluster.delete("Pod", "slice", "default")
        deadline = time.monotonic() + 15  # the checks after this one need the cards free again
        while any(c.get("Pod", "slice", "default") for c in (a, b)) and time.monotonic() < deadline:
            time.sleep(0.05)


@contextlib.contextmanager
def _stopped(cluster: KubeCluster, component: str) -> Iterator[None]:
    control = lab_control.discover(cluster)
    assert control is not None, "the lab offers no lab control ConfigMap"
    control.stop(component)
    try:
        yield
    finally:
        control.start(component)


@pytest.mark.parametrize(
    ("check", "complaint"),
    [
        ("oversize-request-pending", "CardInsufficientMemory"),
        ("exclusive-card", "whole-card"),
        ("gpu-type-selection", "typed"),
        ("capacity-freed", "filler"),
        ("quota-enforced", "within"),
    ],
)
def test_scheduling_checks_fail_while_the_scheduler_is_stopped(
    lab_dir: Path, check: str, complaint: str
) -> None:
    targets = _targets(lab_dir)
    with _stopped(targets.tenants["tenant-a"], lab_control.SCHEDULER):
        result = _one(check, targets, timeout=2.0)
    assert result.outcome.status == "failed"
    assert complaint in result.outcome.detail
    assert result.outcome.command.startswith("kubectl --kubeconfig")


def test_webhook_with_failure_policy_fail_fails_webhook_unreachable_behaviour(lab_dir: Path) -> None:
    targets = _targets(lab_dir)
    cluster = targets.tenants["tenant-a"]
    configs = [
        c
        for c in cluster.list("MutatingWebhookConfiguration")
        if any("hami" in w["name"] for w in c["webhooks"])
    ]
    assert configs
    name = configs[0]["metadata"]["name"]
    original = configs[0]["webhooks"]
    strict = [{**w, "failurePolicy": "Fail"} for w in original]
    cluster.patch("MutatingWebhookConfiguration", name, {"webhooks": strict})
    try:
        result = _one("webhook-unreachable-behaviour", targets, timeout=10.0)
    finally:
        cluster.patch("MutatingWebhookConfiguration", name, {"webhooks": original})
    assert result.outcome.status == "failed"
    assert result.outcome.detail == "with no tunnel agent connected the API server rejected the GPU pod"
    assert "failurePolicy Fail" in result.outcome.seen


def test_demo_runs_the_seed_lab_end_to_end_and_cleans_up() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tenantgpu", "demo"], capture_output=True, text=True, timeout=180
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "GPU sharing" in run.stdout
    assert "without sharing the same pods would need" in run.stdout
    assert "demo passed" in run.stdout
