"""Tenant isolation: no tenant sees another's objects or GPUs, and its credentials open no other API server."""

from __future__ import annotations

from tenantgpu.validate import hami
from tenantgpu.validate.checks.base import Check, Need
from tenantgpu.validate.cluster import ApiError, Cluster, Unreachable
from tenantgpu.validate.context import CheckContext
from tenantgpu.validate.outcome import CheckSkipped, Outcome


def _gpu_uuids(cluster: Cluster) -> set[str]:
    uuids: set[str] = set()
    for node in cluster.list("Node"):
        try:
            uuids.update(g.uuid for g in hami.node_gpus(node))
        except ValueError:
            continue
    return uuids


def _leaks(mine: Cluster, theirs: Cluster) -> list[str]:
    """What of `theirs` is visible through `mine`: nodes by name, namespaces and pods by UID, GPU UUIDs."""
    leaks: list[str] = []
    my_nodes = {n["metadata"]["name"] for n in mine.list("Node")}
    their_nodes = {n["metadata"]["name"] for n in theirs.list("Node")}
    if shared := sorted(my_nodes & their_nodes):
        leaks.append(f"nodes {', '.join(shared)}")
    for kind in ("Namespace", "Pod"):
        my_objects = {o["metadata"].get("uid"): o["metadata"] for o in mine.list(kind)}
        shared_uids = [
            uid for uid in (o["metadata"].get("uid") for o in theirs.list(kind)) if uid in my_objects
        ]
        if shared_uids:
            names = [
                f"{my_objects[u].get('namespace', '')}/{my_objects[u]['name']}".lstrip("/")
                for u in shared_uids
            ]
            leaks.append(f"{kind.lower()}s {', '.join(sorted(names)[:5])}")
    if shared_gpus := sorted(_gpu_uuids(mine) & _gpu_uuids(theirs)):
        leaks.append(f"GPUs {', '.join(shared_gpus)}")
    return leaks


def _accepted(probe: Cluster) -> str | None:
    """None if the credentials were rejected; otherwise what the server let them do."""
    try:
        probe.list("Namespace")
    except Unreachable:
        return (
            None  # the TLS handshake refused the client certificate (the server itself answers: see caller)
        )
    except ApiError as exc:
        if exc.code == 401 or (exc.code == 403 and "system:anonymous" in exc.message):
            return None
        return f"authenticated but answered {exc.code} {exc.reason}: {exc.message}"
    return "listed namespaces"


def _answers(cluster: Cluster) -> str | None:
    """None if the server answers its own credentials, else why not (a rejection proves nothing then)."""
    try:
        cluster.version()
    except (ApiError, Unreachable) as exc:
        return str(exc)
    return None


def tenant_isolation(ctx: CheckContext) -> Outcome:
    others = ctx.others()
    management = ctx.targets.management
    if not others and management is None:
        raise CheckSkipped("only one tenant and no management plane: nothing to be isolated from")
    problems: list[str] = []
    for name, other in sorted(others.items()):
        if leaks := _leaks(ctx.cluster, other):
            problems.append(f"sees {name}'s {'; '.join(leaks)}")
    targets = dict(sorted(others.items()))
    if management is not None:
        targets["the management plane"] = management
    for name, other in targets.items():
        if down := _answers(other):
            problems.append(
                f"cannot test its credentials against {name}: that API server does not answer ({down})"
            )
        elif accepted := _accepted(ctx.cluster.with_credentials_against(other)):
            problems.append(f"its credentials work against {name}'s API server ({accepted})")
    if problems:
        return Outcome.failed(
            f"tenant {ctx.tenant} is not isolated: {problems[0]}",
            expected="no shared nodes, namespaces, pods or GPU UUIDs; credentials rejected elsewhere",
            seen="; ".join(problems),
            command=ctx.kubectl("get nodes,namespaces,pods -A"),
        )
    compared = ", ".join(sorted(others)) or "no other tenant"
    rejected = ", ".join(targets)
    return Outcome.passed(f"nothing of {compared} visible; credentials rejected by {rejected}")


CHECKS = (
    Check(
        "tenant-isolation",
        "a tenant lists none of another's nodes, pods, namespaces or GPUs; its credentials open no other API server",
        tenant_isolation,
        needs=frozenset({Need.TWO_TENANTS}),
    ),
)
