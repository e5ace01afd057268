"""Workers: each tenant sees exactly its own Ready nodes, and each node registered the GPUs the lab declares."""

from __future__ import annotations

from tenantgpu.validate import hami
from tenantgpu.validate.checks.base import Check
from tenantgpu.validate.cluster import JSON
from tenantgpu.validate.context import CheckContext
from tenantgpu.validate.outcome import Outcome


def _ready(node: JSON) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def workers_joined(ctx: CheckContext) -> Outcome:
    nodes = ctx.cluster.list("Node")
    names = sorted(n["metadata"]["name"] for n in nodes)
    command = ctx.kubectl("get nodes -o wide")
    declared = ctx.declared_nodes()
    if declared is not None:
        expected = sorted(d.name for d in declared)
        if names != expected:
            missing = sorted(set(expected) - set(names))
            extra = sorted(set(names) - set(expected))
            seen = ", ".join(names) or "no nodes"
            notes = []
            if missing:
                notes.append(f"missing {', '.join(missing)}")
            if extra:
                notes.append(f"not this tenant's: {', '.join(extra)}")
            return Outcome.failed(
                f"tenant {ctx.tenant} does not see exactly its own workers ({'; '.join(notes)})",
                expected=", ".join(expected),
                seen=seen,
                command=command,
            )
    elif not nodes:
        return Outcome.failed(
            f"tenant {ctx.tenant} has no nodes", expected="at least one worker", seen="none", command=command
        )
    else:
        # Without a lab spec, "its own" means: no node object shared with another tenant's view.
        mine = {n["metadata"].get("uid") for n in nodes}
        for other_name, other in ctx.others().items():
            shared = sorted(
                n["metadata"]["name"] for n in other.list("Node") if n["metadata"].get("uid") in mine
            )
            if shared:
                return Outcome.failed(
                    f"tenant {ctx.tenant} shares nodes with {other_name}",
                    expected="no node object visible to two tenants",
                    seen=", ".join(shared),
                    command=command,
                )
    not_ready = [n["metadata"]["name"] for n in nodes if not _ready(n)]
    if not_ready:
        return Outcome.failed(
            f"{len(not_ready)} of {len(nodes)} nodes are not Ready",
            expected="every node Ready",
            seen=", ".join(f"{name} NotReady" for name in sorted(not_ready)),
            command=command,
        )
    return Outcome.passed(f"{len(nodes)} node(s) Ready: {', '.join(names)}")


def _describe(gpu: hami.RegisteredGPU) -> str:
    health = "" if gpu.health else " unhealthy"
    return f"{gpu.uuid} {gpu.type} {gpu.devmem}MiB{health}"


def gpus_registered(ctx: CheckContext) -> Outcome:
    nodes = {n["metadata"]["name"]: n for n in ctx.cluster.list("Node")}
    declared = ctx.declared_nodes()
    split = ctx.targets.expectations.device_split_count if ctx.targets.expectations else None
    problems: list[str] = []
    seen: list[str] = []
    total = 0
    registered: dict[str, list[hami.RegisteredGPU]] = {}
    for name, node in sorted(nodes.items()):
        try:
            registered[name] = hami.node_gpus(node)
        except (ValueError, KeyError) as exc:
            problems.append(f"{name}: {hami.NODE_REGISTER} does not decode ({exc})")
            registered[name] = []
        seen.append(f"{name}: [{'; '.join(_describe(g) for g in registered[name])}]")
    if declared is not None:
        for declared_node in declared:
            gpus = registered.get(declared_node.name)
            if gpus is None:
                problems.append(f"{declared_node.name}: node missing")
                continue
            by_uuid = {g.uuid: g for g in gpus}
            for want in declared_node.gpus:
                got = by_uuid.get(want.uuid)
                if got is None:
                    problems.append(f"{declared_node.name}: {want.uuid} ({want.type}) not registered")
                    continue
                total += 1
                if got.type != want.type or got.devmem != want.devmem or got.health != want.health:
                    problems.append(
                        f"{declared_node.name}: {want.uuid} registered as {got.type} {got.devmem}MiB "
                        f"health={got.health}, declared {want.type} {want.devmem}MiB health={want.health}"
                    )
                elif split is not None and got.count != split:
                    problems.append(
                        f"{declared_node.name}: {want.uuid} registered with count {got.count}, "
                        f"the lab's deviceSplitCount is {split}"
                    )
            extra = sorted(set(by_uuid) - {g.uuid for g in declared_node.gpus})
            if extra:
                problems.append(f"{declared_node.name}: undeclared GPUs {', '.join(extra)}")
        expected = "; ".join(
            f"{n.name}: [{'; '.join(f'{g.uuid} {g.type} {g.devmem}MiB' for g in n.gpus)}]" for n in declared
        )
    else:
        total = sum(1 for gpus in registered.values() for g in gpus if g.health)
        if total == 0:
            problems.append("no node registers a healthy GPU")
        expected = "at least one healthy GPU registered"
    if problems:
        return Outcome.failed(
            f"GPU registration differs from what the lab declares: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            expected=expected,
            seen=" ".join(seen) or "no nodes",
            command=ctx.kubectl(
                "get nodes -o custom-columns='NAME:.metadata.name,GPUS:.metadata.annotations.hami\\.io/node-nvidia-register'"
            ),
        )
    return Outcome.passed(f"{total} GPU(s) registered: " + "; ".join(seen))


CHECKS = (
    Check("workers-joined", "each tenant sees exactly its own nodes, Ready", workers_joined),
    Check(
        "gpus-registered",
        "each node's hami.io/node-nvidia-register lists the GPUs the lab declares",
        gpus_registered,
    ),
)
