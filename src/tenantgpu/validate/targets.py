"""Where the targets come from: a lab state directory, or kubeconfig files named on the command line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_STATE_DIR = ".tenantgpu"


class TargetError(Exception):
    """The targets cannot be found or read; the message says which file and why."""


@dataclass(frozen=True)
class KubeconfigPaths:
    """Tenant name → kubeconfig path, the management kubeconfig and the lab spec file, if any."""

    tenants: dict[str, Path]
    management: Path | None = None
    lab_file: Path | None = None


def from_state_dir(root: str | Path) -> KubeconfigPaths:
    """A lab's state dir: `kubeconfigs/<tenant>.kubeconfig`, `management.kubeconfig`, `lab.yaml`."""
    root = Path(root)
    if not root.is_dir():
        raise TargetError(f"{root}: no such state directory (is the lab up? `tenantgpu up -d`)")
    tenants = {
        p.name.removesuffix(".kubeconfig"): p for p in sorted((root / "kubeconfigs").glob("*.kubeconfig"))
    }
    if not tenants:
        raise TargetError(f"{root}: no tenant kubeconfigs under kubeconfigs/ (is the lab up?)")
    management = root / "management.kubeconfig"
    lab_file = root / "lab.yaml"
    return KubeconfigPaths(
        tenants,
        management if management.is_file() else None,
        lab_file if lab_file.is_file() else None,
    )


def from_arguments(pairs: list[str], management: str | None) -> KubeconfigPaths:
    """`TENANT=PATH` pairs (each file must exist) and an optional management kubeconfig."""
    tenants: dict[str, Path] = {}
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise TargetError(f"--kubeconfig {pair!r}: expected TENANT=PATH")
        if name in tenants:
            raise TargetError(f"--kubeconfig: tenant {name!r} given twice")
        if not Path(path).is_file():
            raise TargetError(f"--kubeconfig {pair}: {path} is not a file")
        tenants[name] = Path(path)
    if management is not None and not Path(management).is_file():
        raise TargetError(f"--management-kubeconfig: {management} is not a file")
    return KubeconfigPaths(tenants, Path(management) if management else None)
