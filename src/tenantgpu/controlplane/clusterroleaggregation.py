"""kube-controller-manager's ClusterRole aggregation controller (`pkg/controller/clusterroleaggregation`).

A ClusterRole with an `aggregationRule` gets, as its rules, the rules of every other ClusterRole its
selectors pick, in selector order and by name within a selector, each rule once. So `admin`, `edit` and
`view` hold what the `aggregate-to-*` roles give them, including roles added later (a CRD's
`rbac.authorization.k8s.io/aggregate-to-edit: "true"` role). Any change to a ClusterRole brings every
aggregated role up to date; one informer (one watch) serves it all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from tenantgpu.apiserver.selectors import SelectorError, match_selector_object
from tenantgpu.apiserver.sharing import share_rbac_object
from tenantgpu.kubeclient import ApiError, Informer, KubeClient
from tenantgpu.kubeclient.resources import ResourceKind

log = logging.getLogger(__name__)

Obj = dict[str, Any]
CLUSTER_ROLES = ResourceKind("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
FIELD_MANAGER = "clusterrole-aggregation-controller"
SETTLE_SECONDS = 0.05


def aggregated_rules(role: Obj, roles: list[Obj]) -> list[Obj] | None:
    """The rules `role` aggregates from `roles`, or None if it has no aggregation rule (kube's
    syncClusterRole; a selector that cannot be read stops the role's sync)."""
    rule = role.get("aggregationRule")
    if not isinstance(rule, dict):
        return None
    name = role["metadata"]["name"]
    by_name = sorted(roles, key=lambda r: r["metadata"]["name"])
    rules: list[Obj] = []
    for selector in rule.get("clusterRoleSelectors") or []:
        for other in by_name:
            if other["metadata"]["name"] == name:
                continue
            if not match_selector_object(selector, other["metadata"].get("labels")):
                continue
            for candidate in other.get("rules") or []:
                if candidate not in rules:
                    rules.append(candidate)
    return rules


class ClusterRoleAggregationController:
    def __init__(self, client: KubeClient, *, roles: Informer | None = None) -> None:
        self.client = client
        # the cached roles share their rules with every other tenant's (they are never changed in place)
        self.roles = roles or Informer(client, CLUSTER_ROLES, transform=share_rbac_object)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.roles.add_handler(self._changed)
        await self.roles.start()
        self._task = asyncio.create_task(self._run(), name="clusterrole-aggregation")
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.roles.stop()

    def _changed(self, event: str, obj: Obj, old: Obj | None) -> None:
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            # a burst of changes (the bootstrap roles arriving) makes one sync, not one each
            await asyncio.sleep(SETTLE_SECONDS)
            self._wake.clear()
            again = False
            for role in self.roles.items():
                try:
                    await self._sync(role)
                except (ApiError, SelectorError) as err:
                    log.debug("clusterrole %s not aggregated: %s", role["metadata"]["name"], err)
                    again = isinstance(err, ApiError) and err.code not in (404, 422)
            if again:  # e.g. a conflict: the next watch event or this retry brings it back
                await asyncio.sleep(1.0)
                self._wake.set()

    async def _sync(self, role: Obj) -> None:
        rules = aggregated_rules(role, self.roles.items())
        if rules is None or rules == (role.get("rules") or []):
            return
        # kube applies the rules with this field manager; a merge patch replaces the list alike
        await self.client.patch(
            CLUSTER_ROLES, role["metadata"]["name"], {"rules": rules}, field_manager=FIELD_MANAGER
        )
