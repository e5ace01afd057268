"""The shape of a check: a stable name, a one-line description, what it needs, and `run(ctx) -> Outcome`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from tenantgpu.validate.context import CheckContext
from tenantgpu.validate.outcome import Outcome


class Need(StrEnum):
    """Something a check needs beyond a tenant kubeconfig; without it the check is skipped, saying so."""

    MANAGEMENT = "the management plane's kubeconfig"
    LAB_CONTROL = "lab control (ConfigMap kube-system/tenantgpu-lab-control) to stop a component"
    TWO_TENANTS = "a second tenant to compare against (or the management plane)"


@dataclass(frozen=True)
class Check:
    """One validation check; `per_tenant` checks run once for each tenant, the others once for the lab."""

    name: str
    description: str
    run: Callable[[CheckContext], Outcome]
    needs: frozenset[Need] = frozenset()
    per_tenant: bool = True
    # Checks that stop lab components or fill whole cards run after the gentle ones of the same tenant.
    disruptive: bool = False
