"""The optional lab-control hook: stop and start a tenant's HAMi scheduler or tunnel agent via a ConfigMap.

The contract is written down in README-lab-control.md. A cluster without the ConfigMap offers no lab
control, and the checks that need it are skipped with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tenantgpu.validate.cluster import Cluster
from tenantgpu.validate.outcome import Cancelled

NAMESPACE = "kube-system"
NAME = "tenantgpu-lab-control"
SCHEDULER = "hami-scheduler"
TUNNEL_AGENT = "konnectivity-agent"
RUNNING = "running"
STOPPED = "stopped"


class LabControlError(Exception):
    """The lab did not confirm a requested state in time."""


@dataclass
class LabControl:
    """Desired/observed switches for one tenant's lab components, through its own API server."""

    cluster: Cluster
    poll_seconds: float = 0.1
    timeout_seconds: float = 20.0
    cancelled: Callable[[], bool] = lambda: False

    def components(self) -> set[str]:
        """The components the lab says it can stop (those with an `.observed` key)."""
        data = self._data()
        return {key.removesuffix(".observed") for key in data if key.endswith(".observed")}

    def observed(self, component: str) -> str | None:
        return self._data().get(f"{component}.observed")

    def stop(self, component: str) -> None:
        self._set(component, STOPPED)

    def start(self, component: str) -> None:
        self._set(component, RUNNING)

    def _set(self, component: str, state: str) -> None:
        self.cluster.patch("ConfigMap", NAME, {"data": {f"{component}.desired": state}}, NAMESPACE)
        deadline = time.monotonic() + self.timeout_seconds
        seen = None
        while time.monotonic() < deadline:
            if self.cancelled():
                raise Cancelled()
            seen = self.observed(component)
            if seen == state:
                return
            time.sleep(self.poll_seconds)
        raise LabControlError(
            f"the lab did not report {component}.observed={state} within {self.timeout_seconds:.0f} s "
            f"(last seen: {seen!r})"
        )

    def _data(self) -> dict[str, str]:
        config_map = self.cluster.get("ConfigMap", NAME, NAMESPACE)
        return dict((config_map or {}).get("data") or {})


def discover(cluster: Cluster) -> LabControl | None:
    """The tenant's lab control if its API server holds the ConfigMap, else None (a real cluster)."""
    if cluster.get("ConfigMap", NAME, NAMESPACE) is None:
        return None
    return LabControl(cluster)
