"""kube-apiserver's `rbac/bootstrap-roles` post-start hook (`pkg/registry/rbac/rest/storage_rbac.go` and
`component-helpers/auth/rbac/reconciliation`): the release's default ClusterRoles, ClusterRoleBindings,
Roles and RoleBindings are created when missing and reconciled on every start.

Reconciling never takes anything away: an object annotated `rbac.authorization.kubernetes.io/autoupdate:
"false"` is left alone; others get the labels and annotations they lack (their own values win), the rules
they do not cover, the aggregation selectors they lack and the subjects they lack. A binding whose
roleRef differs from the default one is deleted and created anew (a roleRef cannot change).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.kinds import Kind
from tenantgpu.apiserver.rbac import covers
from tenantgpu.apiserver.rbacpolicy import AUTOUPDATE, policy_objects
from tenantgpu.apiserver.registry import DeleteOptions, Registry

log = logging.getLogger(__name__)

Obj = dict[str, Any]
_APISERVER = UserInfo("system:apiserver", ("system:masters",))


def _merged(wanted: Obj | None, existing: Obj | None) -> Obj | None:
    """kube's merge(expected, existing): the existing values win."""
    if not wanted and not existing:
        return existing
    return {**(wanted or {}), **(existing or {})}


def _with_defaults_metadata(existing: Obj, wanted: Obj) -> tuple[Obj, bool]:
    """A copy of `existing` with the default object's annotations and labels merged in (the existing
    values win), and whether that added anything."""
    meta = existing["metadata"]
    result = {**existing, "metadata": dict(meta)}
    changed = False
    for field in ("annotations", "labels"):
        merged = _merged(wanted["metadata"].get(field), meta.get(field))
        if merged != meta.get(field):
            result["metadata"][field] = merged
            changed = True
    return result, changed


def _reconciled_role(existing: Obj, wanted: Obj) -> Obj | None:
    """The existing role with what the default one adds to it, or None when nothing is missing."""
    result, changed = _with_defaults_metadata(existing, wanted)
    rules = existing.get("rules") if isinstance(existing.get("rules"), list) else []
    wanted_rules = wanted.get("rules") or []
    # the usual case on a restart: the rules are the default ones still
    missing = [] if rules == wanted_rules else covers(rules, wanted_rules)[1]
    if missing:
        result["rules"] = [*rules, *missing]
        changed = True
    wanted_rule, existing_rule = wanted.get("aggregationRule"), existing.get("aggregationRule")
    if wanted_rule is None and existing_rule is not None:
        result.pop("aggregationRule")
        changed = True
    elif wanted_rule is not None:
        have = (existing_rule or {}).get("clusterRoleSelectors") or []
        lacking = [s for s in wanted_rule.get("clusterRoleSelectors") or [] if s not in have]
        if lacking:
            result["aggregationRule"] = {**(existing_rule or {}), "clusterRoleSelectors": [*have, *lacking]}
            changed = True
    return result if changed else None


def _reconciled_binding(existing: Obj, wanted: Obj) -> Obj | None:
    result, changed = _with_defaults_metadata(existing, wanted)
    have = existing.get("subjects") or []
    lacking = [s for s in wanted.get("subjects") or [] if s not in have]
    if lacking:
        result["subjects"] = [*have, *lacking]
        changed = True
    return result if changed else None


async def ensure_rbac_policy(registry: Registry, minor: int) -> bool:
    """Creates and reconciles the release's bootstrap objects; False if any could not be (try again)."""
    done = True
    for plural, objects in policy_objects(minor):
        kind = registry.kinds.resource("rbac.authorization.k8s.io", "v1", plural)
        if kind is None:
            continue
        reconcile = _reconciled_binding if plural.endswith("bindings") else _reconciled_role
        # all of a resource's at once: their writes share the datastore's commits
        results = await asyncio.gather(
            *(_ensure_one(registry, kind, wanted, reconcile) for wanted in objects), return_exceptions=True
        )
        for wanted, result in zip(objects, results, strict=True):
            if isinstance(result, errors.APIError):
                log.debug("%s %s not reconciled: %s", plural, wanted["metadata"]["name"], result)
                done = False
            elif isinstance(result, BaseException):
                raise result
    return done


async def _ensure_one(
    registry: Registry, kind: Kind, wanted: Obj, reconcile: Callable[[Obj, Obj], Obj | None]
) -> None:
    meta = wanted["metadata"]
    namespace, name = meta.get("namespace", ""), meta["name"]
    existing = registry.get_object(kind, namespace, name)
    if existing is None:
        try:
            await registry.create(kind, namespace, wanted, _APISERVER)
        except errors.APIError as error:
            if error.code != 409:  # created meanwhile by another start of this server
                raise
        return
    if (existing["metadata"].get("annotations") or {}).get(AUTOUPDATE) == "false":
        return  # protected from reconciliation
    if "roleRef" in wanted and existing.get("roleRef") != wanted["roleRef"]:
        await registry.delete(kind, namespace, name, DeleteOptions(), _APISERVER)
        await registry.create(kind, namespace, wanted, _APISERVER)
        return
    if reconcile(existing, wanted) is None:
        return

    def mutation(current: Obj) -> Obj:
        return reconcile(current, wanted) or current

    await registry.modify(kind, namespace, name, mutation, _APISERVER)
