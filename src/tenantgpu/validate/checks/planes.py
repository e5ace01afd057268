"""Control planes: the management plane and every TenantControlPlane Ready; each tenant API its own endpoint and CA."""

from __future__ import annotations

from tenantgpu.validate.checks.base import Check, Need
from tenantgpu.validate.cluster import ApiError, Unreachable
from tenantgpu.validate.context import CheckContext
from tenantgpu.validate.outcome import Outcome


def _tcp_status(tcp: dict) -> str:
    return (((tcp.get("status") or {}).get("kubernetesResources") or {}).get("version") or {}).get(
        "status"
    ) or "Unknown"


def management_plane_ready(ctx: CheckContext) -> Outcome:
    management = ctx.targets.management
    if management is None:
        return Outcome.skipped("no management kubeconfig given (--management-kubeconfig or a state dir)")
    command = ctx.kubectl("get tenantcontrolplanes -A", management)
    try:
        version = management.version()
    except (ApiError, Unreachable) as exc:
        return Outcome.failed(
            "the management API does not answer",
            expected=f"{management.server()} answers /version",
            seen=str(exc),
            command=ctx.kubectl("version", management),
        )
    try:
        tcps = management.list("TenantControlPlane")
    except (ApiError, Unreachable) as exc:
        return Outcome.failed(
            "cannot list TenantControlPlanes (kamaji.clastix.io/v1alpha1)",
            expected="the TenantControlPlane kind is served",
            seen=str(exc),
            command=command,
        )
    if not tcps:
        return Outcome.failed(
            "the management plane hosts no TenantControlPlane",
            expected="one TenantControlPlane per tenant",
            seen="none",
            command=command,
        )
    states = {f"{t['metadata'].get('namespace', '')}/{t['metadata']['name']}": _tcp_status(t) for t in tcps}
    not_ready = {name: status for name, status in states.items() if status != "Ready"}
    if not_ready:
        return Outcome.failed(
            f"{len(not_ready)} of {len(states)} TenantControlPlanes are not Ready",
            expected="status.kubernetesResources.version.status = Ready for all",
            seen=", ".join(f"{name}: {status}" for name, status in sorted(not_ready.items())),
            command=command,
        )
    names = {t["metadata"]["name"] for t in tcps}
    missing = sorted(set(ctx.targets.tenants) - names)
    note = (
        f"; no TenantControlPlane named {', '.join(missing)} (names may differ on a real cluster)"
        if missing
        else ""
    )
    return Outcome.passed(
        f"management API {version.get('gitVersion', '?')} at {management.server()}; "
        f"{len(tcps)} TenantControlPlanes Ready ({', '.join(sorted(states))}){note}"
    )


def tenant_control_planes_ready(ctx: CheckContext) -> Outcome:
    cluster = ctx.cluster
    try:
        version = cluster.version()
    except (ApiError, Unreachable) as exc:
        return Outcome.failed(
            f"tenant {ctx.tenant}'s API does not answer",
            expected=f"{cluster.server()} answers /version over TLS verified with the tenant's CA",
            seen=str(exc),
            command=ctx.kubectl("version"),
        )
    fingerprint = cluster.ca_fingerprint()
    clashes: list[str] = []
    management = ctx.targets.management
    others = dict(ctx.others())
    if management is not None:
        others["management plane"] = management
    for name, other in others.items():
        if other.server() == cluster.server():
            clashes.append(f"same endpoint {cluster.server()} as {name}")
        if fingerprint is not None and other.ca_fingerprint() == fingerprint:
            clashes.append(f"same CA as {name}")
    if clashes:
        return Outcome.failed(
            f"tenant {ctx.tenant} does not have a control plane of its own",
            expected="its own endpoint and its own certificate authority",
            seen="; ".join(clashes),
            command=ctx.kubectl("config view --minify --raw"),
        )
    ca = f"CA sha256 {fingerprint[:12]}…" if fingerprint else "system CA store"
    return Outcome.passed(f"{cluster.server()} answers ({version.get('gitVersion', '?')}), {ca}")


CHECKS = (
    Check(
        "management-plane-ready",
        "the management API answers; every TenantControlPlane is Ready",
        management_plane_ready,
        needs=frozenset({Need.MANAGEMENT}),
        per_tenant=False,
    ),
    Check(
        "tenant-control-planes-ready",
        "each tenant API answers with its own endpoint and CA",
        tenant_control_planes_ready,
    ),
)
