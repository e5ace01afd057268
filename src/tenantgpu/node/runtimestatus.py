"""What a container runtime reports about a created container, as the kubelet of 1.33 copies it into the
container's status: the resources it applied (`resources`) and the identity it runs as (`user`).

Read from kubernetes/kubernetes' `pkg/kubelet/kubelet_pods.go` (`convertToAPIContainerStatuses`) and
`pkg/kubelet/kuberuntime/helpers_linux.go`:
- `resources` (InPlacePodVerticalScaling, beta and on in 1.33) is the container's allocated resources,
  and `allocatedResources` its allocated requests (omitted without any).
  For a running container the cgroup's values replace three of them: the CPU limit (from the CFS quota),
  the CPU request (from the CPU shares, rounded up to the milli-CPU) and the memory limit, which the
  runtime reports in bytes, so a limit of `1G` reads `1000000000` and one of `128Mi` reads `128Mi`. A
  container that is not running reports its allocation as it is. A container with no resources reports
  `{}`. Extended resources such as `nvidia.com/gpu` are copied with the others.
- `user` (SupplementalGroupsPolicy, beta and on in 1.33, with a runtime that reports it as containerd 2
  does) is the uid and gid the process runs as and its groups. The simulated images define no users
  or groups, so the process runs as root unless a security context says otherwise. Its groups are the
  gid, the pod's `fsGroup` and `supplementalGroups`, sorted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tenantgpu.gpushare.quantity import QuantityError, ceil_value, parse_quantity

# kube's cm.MinShares: the fewest CPU shares a cgroup takes, and the milli-CPU at or below which
# the kubelet keeps the allocated request rather than the value read back.
_MIN_SHARES = 2
_SHARES_PER_CPU = 1024
_MIN_MILLI_CPU_LIMIT = 10  # kube's cm.MinMilliCPULimit (the smallest CFS quota, 1 ms per 100 ms)

_GROUPS = (("containers", "containerStatuses"), ("initContainers", "initContainerStatuses"),
           ("ephemeralContainers", "ephemeralContainerStatuses"))  # fmt: skip


def with_runtime_fields(
    status: dict[str, Any],
    spec: dict[str, Any],
    *,
    applied: dict[str, Any] | None = None,
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """`status` with `resources` and `user` on each entry of a container the runtime created (one with a
    `containerID`); a waiting container not yet created has neither. The entries are copied, not
    changed, since the kubelet keeps some of them between writes. While a resize is under way the
    runtime still applies `applied` (the spec before it); `prepare` changes an entry first (a restart)."""
    out = status
    for group, key in _GROUPS:
        entries = status.get(key)
        if not entries:
            continue
        specs = {c.get("name", ""): c for c in spec.get(group) or ()}
        before = {c.get("name", ""): c for c in (applied or {}).get(group) or ()}
        fresh = []
        for entry in entries:
            container = specs.get(entry.get("name", ""))
            if container is None or "containerID" not in entry:
                fresh.append(entry)
                continue
            was = before.get(entry.get("name", ""))
            entry = entry if prepare is None else prepare(entry)
            fresh.append(
                runtime_entry(entry, spec, container, None if was is None else was.get("resources") or {})
            )
        if out is status:
            out = dict(status)
        out[key] = fresh
    return out


def runtime_entry(
    entry: dict[str, Any],
    spec: dict[str, Any],
    container: dict[str, Any],
    applied: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A copy of a created container's status entry with what the runtime reports of `container` (as
    the kubelet allocated it): `allocatedResources` (its requests, where it has any), `resources` (what
    the runtime applied: `applied`, while a resize is under way, else the allocation) and `user`."""
    out = {k: v for k, v in entry.items() if k not in ("allocatedResources", "resources", "user")}
    allocated = container.get("resources") or {}
    if allocated.get("requests"):
        out["allocatedResources"] = dict(allocated["requests"])
    running = "running" in (entry.get("state") or {})
    out["resources"] = status_resources(allocated if applied is None else applied, running=running)
    out["user"] = container_user(spec, container)
    return out


def status_resources(allocated: dict[str, Any], *, running: bool) -> dict[str, Any]:
    """A container status's `resources`: the allocated requests and limits, with a running container's
    CPU and memory as its cgroup reports them."""
    resources: dict[str, Any] = {
        part: dict(allocated[part])
        for part in ("requests", "limits")
        if isinstance(allocated.get(part), dict)
    }
    if not running:
        return resources
    limits = resources.get("limits")
    if limits is not None:
        if "cpu" in limits:
            milli = _milli(limits["cpu"])
            if milli is not None and milli > _MIN_MILLI_CPU_LIMIT:
                limits["cpu"] = _milli_text(milli)  # the quota gives the limit back exactly
        if "memory" in limits:
            size = _bytes(limits["memory"])
            if size is not None and size > 0:
                limits["memory"] = binary_bytes(size)
    requests = resources.get("requests")
    if requests is not None:
        milli = _milli(requests.get("cpu", "0"))
        if milli is not None:
            shares = max(_MIN_SHARES, milli * _SHARES_PER_CPU // 1000)
            read = -(-shares * 1000 // _SHARES_PER_CPU)  # the kubelet rounds the shares' milli-CPU up
            if read > _MIN_SHARES or milli > _MIN_SHARES:
                requests["cpu"] = _milli_text(read)
    return resources


def container_user(spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    """`user.linux` of a container: the security context's runAsUser and runAsGroup (the container's
    over the pod's; root without them) and the groups the process gets."""
    pod_context = spec.get("securityContext") or {}
    own = container.get("securityContext") or {}
    uid = _first_int(own.get("runAsUser"), pod_context.get("runAsUser"))
    gid = _first_int(own.get("runAsGroup"), pod_context.get("runAsGroup"))
    groups = {gid}
    if isinstance(pod_context.get("fsGroup"), int):
        groups.add(pod_context["fsGroup"])
    groups.update(g for g in pod_context.get("supplementalGroups") or () if isinstance(g, int))
    return {"linux": {"uid": uid, "gid": gid, "supplementalGroups": sorted(groups)}}


def binary_bytes(size: int) -> str:
    """A byte count as apimachinery prints a binary-SI quantity: the largest power of 1024 that
    divides it (`128Mi`), the bare number when none does (`1000000000`)."""
    if -1024 < size < 1024:
        return str(size)
    suffixes = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
    step = 0
    while step < len(suffixes) - 1 and size % 1024 == 0:
        size //= 1024
        step += 1
    return f"{size}{suffixes[step]}"


def _first_int(*values: Any) -> int:
    return next((v for v in values if isinstance(v, int) and not isinstance(v, bool)), 0)


def _milli(value: Any) -> int | None:
    """Go's Quantity.MilliValue (rounded up), None for what is no quantity."""
    try:
        return math.ceil(parse_quantity(value) * 1000)
    except QuantityError:
        return None


def _bytes(value: Any) -> int | None:
    try:
        return ceil_value(value)
    except QuantityError:
        return None


def _milli_text(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
