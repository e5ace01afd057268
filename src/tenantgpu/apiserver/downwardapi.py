"""kube's validation of the downward API's selectors (`fieldRef`, `resourceFieldRef`), shared by a
container's env vars and by downwardAPI volumes (validation.go's validateObjectFieldSelector and
validateContainerResourceFieldSelector, pods/helpers.go's ConvertDownwardAPIFieldLabel)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tenantgpu.apiserver.fielderrors import Cause, invalid, not_supported, required
from tenantgpu.apiserver.quantity import QuantityError, canonical_quantity, parse_quantity
from tenantgpu.apiserver.selectors import qualified_name_errors

ENV_FIELD_PATHS = frozenset(
    {
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "spec.nodeName",
        "spec.serviceAccountName",
        "status.hostIP",
        "status.hostIPs",
        "status.podIP",
        "status.podIPs",
    }
)
VOLUME_FIELD_PATHS = frozenset(
    {"metadata.name", "metadata.namespace", "metadata.labels", "metadata.annotations", "metadata.uid"}
)
# What a v1 pod's field label may be at all, before the env or volume list narrows it.
_CONVERTIBLE = frozenset(
    {
        "metadata.annotations",
        "metadata.labels",
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.schedulerName",
        "status.phase",
        "status.hostIP",
        "status.hostIPs",
        "status.podIP",
        "status.podIPs",
    }
)
_RESOURCES = (
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
)
_HUGEPAGES = ("limits.hugepages-", "requests.hugepages-")
_BYTE_DIVISORS = frozenset(
    {"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"}
)
# The resources measured in bytes, as kube's divisor message names them.
_BYTE_RESOURCES = {
    "limits.memory": "memory",
    "requests.memory": "memory",
    "limits.ephemeral-storage": "local ephemeral storage",
    "requests.ephemeral-storage": "local ephemeral storage",
}
_BYTE_DIVISORS_TEXT = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei"


def split_subscript(path: str) -> tuple[str, str] | None:
    """`metadata.labels['app']` → (`metadata.labels`, `app`); None for a path without a subscript."""
    if not path.endswith("']"):
        return None
    head, sep, key = path[:-2].partition("['")
    if not sep or not head:
        return None
    return head, key


_HOST_IPS_FROM_MINOR = 28  # status.hostIPs came with the PodHostIPs gate, alpha in 1.28


def _converted(api_version: str, field_path: str, minor: int | None) -> tuple[str, str]:
    """ConvertDownwardAPIFieldLabel: the internal path, or why there is none."""
    if api_version != "v1":
        return "", f"unsupported pod version: {api_version}"
    subscripted = split_subscript(field_path)
    if subscripted is not None:
        if subscripted[0] in ("metadata.annotations", "metadata.labels"):
            return field_path, ""
        return "", f"field label does not support subscript: {field_path}"
    if field_path == "spec.host":  # what old v1 clients sent for spec.nodeName
        return "spec.nodeName", ""
    too_new = field_path == "status.hostIPs" and minor is not None and minor < _HOST_IPS_FROM_MINOR
    if field_path in _CONVERTIBLE and not too_new:
        return field_path, ""
    return "", f"field label not supported: {field_path}"


def object_field_causes(
    selector: Mapping[str, Any], allowed: frozenset[str], path: str, *, minor: int | None = None
) -> list[Cause]:
    """Why a `fieldRef` is refused; `allowed` is the env's or the volume's list of paths, `minor` the
    tenant's release (None: the newest)."""
    api_version = str(selector.get("apiVersion") or "")
    field_path = str(selector.get("fieldPath") or "")
    if not api_version:
        return [required(f"{path}.apiVersion")]
    if not field_path:
        return [required(f"{path}.fieldPath")]
    if minor is not None and minor < _HOST_IPS_FROM_MINOR:
        allowed = allowed - {"status.hostIPs"}
    internal, error = _converted(api_version, field_path, minor)
    if error:
        return [invalid(f"{path}.fieldPath", field_path, f"error converting fieldPath: {error}")]
    subscripted = split_subscript(internal)
    if subscripted is not None:
        head, key = subscripted
        key = key.lower() if head == "metadata.annotations" else key
        return [invalid(path, key, e) for e in qualified_name_errors(key)]
    if internal not in allowed:
        return [not_supported(f"{path}.fieldPath", internal, sorted(allowed))]
    return []


def _divisor_causes(resource: str, divisor: Any, path: str) -> list[Cause]:
    if divisor is None:
        return []
    try:
        if parse_quantity(divisor) == 0:
            return []
        shown = canonical_quantity(divisor)
    except QuantityError:
        return []  # the quantity's own syntax is checked where the body is decoded
    if resource in ("limits.cpu", "requests.cpu"):
        if shown not in ("1m", "1"):
            return [
                invalid(
                    f"{path}.divisor",
                    resource,
                    "only divisor's values 1m and 1 are supported with the cpu resource",
                )
            ]
        return []
    what = _BYTE_RESOURCES.get(resource)
    if what is None and resource.startswith(_HUGEPAGES):
        what = "hugepages"
    if what is not None and shown not in _BYTE_DIVISORS:
        return [
            invalid(
                f"{path}.divisor",
                resource,
                f"only divisor's values {_BYTE_DIVISORS_TEXT} are supported with the {what} resource",
            )
        ]
    return []


def resource_field_causes(selector: Mapping[str, Any], path: str, *, volume: bool) -> list[Cause]:
    """Why a `resourceFieldRef` is refused. A volume's must name its container; an env var's is its own."""
    resource = str(selector.get("resource") or "")
    causes: list[Cause] = []
    if volume and not selector.get("containerName"):
        causes.append(required(f"{path}.containerName"))
    elif not resource:
        causes.append(required(f"{path}.resource"))
    elif resource not in _RESOURCES and not resource.startswith(_HUGEPAGES):
        causes.append(not_supported(f"{path}.resource", resource, list(_RESOURCES)))
    causes.extend(_divisor_causes(resource, selector.get("divisor"), path))
    return causes
