"""What a run targets (tenants' kubeconfigs, the management plane, what the lab declares) and the per-check context."""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tenantgpu.validate.cluster import Cluster
from tenantgpu.validate.lab_control import LabControl
from tenantgpu.validate.lab_control import discover as discover_lab_control
from tenantgpu.validate.outcome import Cancelled, CheckFailed

T = TypeVar("T")

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "tenantgpu-validate"
RUN_LABEL = "tenantgpu.io/validate-run"
CHECK_LABEL = "tenantgpu.io/validate-check"
NAMESPACE_PREFIX = "tenantgpu-validate-"


@dataclass(frozen=True)
class DeclaredGPU:
    """A GPU the lab spec declares, as the device plugin should register it."""

    uuid: str
    type: str
    devmem: int
    health: bool = True


def registered_type(model: str) -> str:
    """The type HAMi (≥ v2.8) registers for an NVML name: as is when it starts with NVIDIA, else `NVIDIA-<name>`."""
    return model if model.startswith("NVIDIA") else f"NVIDIA-{model}"


@dataclass(frozen=True)
class DeclaredNode:
    name: str
    gpus: tuple[DeclaredGPU, ...]


@dataclass(frozen=True)
class Expectations:
    """What a lab declares per tenant; absent for a real cluster, where checks fall back to weaker rules."""

    nodes: dict[str, tuple[DeclaredNode, ...]]
    device_split_count: int = 10

    @classmethod
    def from_lab(cls, lab: Any) -> Expectations:
        """From a lab spec (`tenantgpu.lab.spec.Lab`, read by shape so this package needs nothing from `lab`)."""
        hami = lab.spec.hami
        scaling = float(getattr(hami, "device_memory_scaling", 1.0))
        nodes = {
            tenant.name: tuple(
                DeclaredNode(
                    worker.name,
                    tuple(
                        DeclaredGPU(d.uuid, registered_type(d.type), int(d.memory * scaling), bool(d.health))
                        for d in worker.devices()
                    ),
                )
                for worker in tenant.workers
            )
            for tenant in lab.tenants
        }
        return cls(nodes, int(getattr(hami, "device_split_count", 10)))


@dataclass
class Targets:
    """Where the suite runs: tenant name → cluster, the optional management plane and lab declarations."""

    tenants: dict[str, Cluster]
    management: Cluster | None = None
    expectations: Expectations | None = None


@dataclass
class RunSettings:
    """One run's identity and its bounds; `cancel` is set on Ctrl-C so every wait gives up."""

    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    timeout_seconds: float = 25.0
    poll_seconds: float = 0.1
    cancel: threading.Event = field(default_factory=threading.Event)


@dataclass
class CheckContext:
    """Everything one check needs: the targets, the tenant it is about (None for lab-wide checks), helpers."""

    targets: Targets
    settings: RunSettings
    check_name: str
    tenant: str | None = None
    _lab_controls: dict[str, LabControl | None] = field(default_factory=dict)

    @property
    def cluster(self) -> Cluster:
        """The cluster of the tenant this check is about."""
        if self.tenant is None:
            raise RuntimeError("a lab-wide check has no single tenant cluster")
        return self.targets.tenants[self.tenant]

    def others(self) -> dict[str, Cluster]:
        return {name: c for name, c in self.targets.tenants.items() if name != self.tenant}

    def declared_nodes(self) -> tuple[DeclaredNode, ...] | None:
        expectations = self.targets.expectations
        if expectations is None or self.tenant is None:
            return None
        return expectations.nodes.get(self.tenant)

    def kubectl(self, args: str, cluster: Cluster | None = None) -> str:
        """A kubectl command line the user can paste to look for themselves."""
        target = cluster or self.cluster
        return f"kubectl --kubeconfig {target.kubeconfig} {args}"

    def lab_control(self) -> LabControl | None:
        if self.tenant is None:
            return None
        if self.tenant not in self._lab_controls:
            control = discover_lab_control(self.cluster)
            if control is not None:
                control.poll_seconds = self.settings.poll_seconds
                control.cancelled = self.settings.cancel.is_set
            self._lab_controls[self.tenant] = control
        return self._lab_controls[self.tenant]

    # -- waiting -----------------------------------------------------------------------------------

    def sleep(self, seconds: float) -> None:
        if self.settings.cancel.wait(seconds):
            raise Cancelled()

    def wait_for(
        self,
        probe: Callable[[], T | None],
        *,
        what: str,
        seen: Callable[[], str],
        command: str,
        timeout: float | None = None,
    ) -> T:
        """Poll `probe` until it returns something; on timeout fail with `what` expected and `seen()`."""
        limit = self.settings.timeout_seconds if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            result = probe()
            if result is not None:
                return result
            if time.monotonic() >= deadline:
                raise CheckFailed(
                    f"timed out after {limit:.0f} s waiting: {what}",
                    expected=what,
                    seen=seen(),
                    command=command,
                )
            self.sleep(self.settings.poll_seconds)

    def hold(self, probe: Callable[[], str | None], seconds: float) -> None:
        """Keep checking for `seconds` that nothing goes wrong; `probe` returns a complaint or None."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            complaint = probe()
            if complaint:
                raise CheckFailed(complaint)
            self.sleep(self.settings.poll_seconds)

    # -- the check's own namespace -----------------------------------------------------------------

    def namespace_name(self, suffix: str = "") -> str:
        tail = f"-{suffix}" if suffix else ""
        return f"{NAMESPACE_PREFIX}{self.check_name}{tail}-{self.settings.run_id}"[:63].rstrip("-")

    def labels(self) -> dict[str, str]:
        return {MANAGED_BY_LABEL: MANAGED_BY, RUN_LABEL: self.settings.run_id, CHECK_LABEL: self.check_name}

    @contextlib.contextmanager
    def namespace(self, cluster: Cluster | None = None, suffix: str = "") -> Iterator[str]:
        """A labelled namespace for this check, removed afterwards (pods first, so their GPU slices free up)."""
        target = cluster or self.cluster
        name = self.namespace_name(suffix)
        target.create(
            "Namespace",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": self.labels()}},
        )
        try:
            yield name
        finally:
            remove_namespace(target, name, self.settings)


def remove_namespace(cluster: Cluster, name: str, settings: RunSettings, wait_seconds: float = 15.0) -> None:
    """Delete the namespace's pods at once and wait for them to go (freeing GPU slices), then the namespace."""
    with contextlib.suppress(Exception):
        for pod in cluster.list("Pod", name):
            cluster.delete("Pod", pod["metadata"]["name"], name)
        deadline = time.monotonic() + wait_seconds
        while cluster.list("Pod", name) and time.monotonic() < deadline:
            time.sleep(settings.poll_seconds)
    with contextlib.suppress(Exception):
        cluster.delete("Namespace", name)


def sweep(targets: Targets, settings: RunSettings) -> list[str]:
    """Remove every namespace this run labelled, in every tenant; returns what was removed."""
    removed: list[str] = []
    for tenant, cluster in targets.tenants.items():
        try:
            namespaces = cluster.list("Namespace", label_selector=f"{RUN_LABEL}={settings.run_id}")
        except Exception:
            continue
        for namespace in namespaces:
            if (namespace.get("status") or {}).get("phase") == "Terminating":
                continue
            name = namespace["metadata"]["name"]
            remove_namespace(cluster, name, settings, wait_seconds=5.0)
            removed.append(f"{tenant}/{name}")
    return removed
