"""bench/lab's burst comes from one client per tenant, each waiting for a create's answer before the next."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

from bench.lab import Observations, _create_all


class _Client:
    """Stands in for a tenant's KubeClient: records how many creates it has open at once."""

    def __init__(
        self, open_now: collections.Counter[str], most: collections.Counter[str], tenant: str
    ) -> None:
        self._open, self._most, self._tenant = open_now, most, tenant

    async def create(self, resource: str, body: dict[str, Any], namespace: str) -> dict[str, Any]:
        self._open[self._tenant] += 1
        self._open["all"] += 1
        self._most[self._tenant] = max(self._most[self._tenant], self._open[self._tenant])
        self._most["all"] = max(self._most["all"], self._open["all"])
        await asyncio.sleep(0.002)
        self._open[self._tenant] -= 1
        self._open["all"] -= 1
        return body


def _burst(in_flight: int, per_tenant: bool) -> tuple[collections.Counter[str], Observations]:
    open_now: collections.Counter[str] = collections.Counter()
    most: collections.Counter[str] = collections.Counter()
    tenants = ["tenant-00", "tenant-01", "tenant-02"]
    clients = {t: _Client(open_now, most, t) for t in tenants}
    names = [(tenants[i % 3], f"bench-{i:05d}") for i in range(30)]
    seen = Observations(expected=30)
    asyncio.run(_create_all(clients, seen, names, in_flight, rate=None, per_tenant=per_tenant))
    return most, seen


def test_each_tenants_client_keeps_one_create_open_and_the_tenants_create_side_by_side() -> None:
    most, seen = _burst(1, per_tenant=True)
    assert [most[t] for t in ("tenant-00", "tenant-01", "tenant-02")] == [1, 1, 1]
    assert most["all"] == 3
    assert all(t.created >= t.sent > 0 for t in seen.pods.values())


def test_the_overload_keeps_its_requests_open_across_tenants() -> None:
    most, _ = _burst(12, per_tenant=False)
    assert most["all"] == 12
    assert max(most[t] for t in ("tenant-00", "tenant-01", "tenant-02")) > 1
