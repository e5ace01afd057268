"""Validation of core kinds in kube-apiserver's words (field paths, reasons, messages); re-exports default."""

from __future__ import annotations

import base64
import binascii
import copy
import functools
import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tenantgpu.apiserver import certificates, featuregates, podresize
from tenantgpu.apiserver.cronschedule import ScheduleError, parse_schedule, time_zone_error
from tenantgpu.apiserver.defaults import default, pod_qos_class
from tenantgpu.apiserver.disabledfields import every_container, pod_spec
from tenantgpu.apiserver.dnsnames import config_key_errors
from tenantgpu.apiserver.dnsnames import dns1035_label_errors as _dns1035_errors
from tenantgpu.apiserver.dnsnames import dns_label_errors as _dns_label_errors
from tenantgpu.apiserver.dnsnames import dns_subdomain_errors as _dns_subdomain_errors
from tenantgpu.apiserver.downwardapi import ENV_FIELD_PATHS, object_field_causes, resource_field_causes
from tenantgpu.apiserver.fielderrors import ROOT, Cause
from tenantgpu.apiserver.fielderrors import differences as _differences
from tenantgpu.apiserver.fielderrors import duplicate as _duplicate
from tenantgpu.apiserver.fielderrors import forbidden as _forbidden
from tenantgpu.apiserver.fielderrors import invalid as _invalid
from tenantgpu.apiserver.fielderrors import not_found as _not_found
from tenantgpu.apiserver.fielderrors import not_supported as _not_supported
from tenantgpu.apiserver.fielderrors import required as _required
from tenantgpu.apiserver.fielderrors import show as _show
from tenantgpu.apiserver.fielderrors import too_long as _too_long
from tenantgpu.apiserver.kamajischemas import GROUP as KAMAJI_GROUP
from tenantgpu.apiserver.kamajischemas import VERSION as KAMAJI_VERSION
from tenantgpu.apiserver.kamajischemas import crd_schema
from tenantgpu.apiserver.podvolumes import (
    validate_volume_devices,
    validate_volume_mounts,
    validate_volumes,
    volume_device_paths,
)
from tenantgpu.apiserver.quantity import QuantityError, canonical_or_same, parse_quantity
from tenantgpu.apiserver.selectors import (
    SelectorError,
    label_value_errors,
    match_selector_object,
    qualified_name_errors,
)
from tenantgpu.apiserver.structural import Violation, violations
from tenantgpu.apiserver.volumevalidation import (
    validate_persistent_volume,
    validate_persistent_volume_claim,
    validate_storage_class,
)

__all__ = [
    "Cause",
    "default",
    "invalid_message",
    "invalid_status",
    "pod_qos_class",
    "qualified_kind",
    "validate",
]

_GROUPS = {
    "Deployment": "apps",
    "ReplicaSet": "apps",
    "DaemonSet": "apps",
    "StatefulSet": "apps",
    "ControllerRevision": "apps",
    "Job": "batch",
    "CronJob": "batch",
    "MutatingWebhookConfiguration": "admissionregistration.k8s.io",
    "ValidatingWebhookConfiguration": "admissionregistration.k8s.io",
    "Lease": "coordination.k8s.io",
    "Role": "rbac.authorization.k8s.io",
    "ClusterRole": "rbac.authorization.k8s.io",
    "RoleBinding": "rbac.authorization.k8s.io",
    "ClusterRoleBinding": "rbac.authorization.k8s.io",
    "Ingress": "networking.k8s.io",
    "IngressClass": "networking.k8s.io",
    "NetworkPolicy": "networking.k8s.io",
    "PriorityClass": "scheduling.k8s.io",
    "PodDisruptionBudget": "policy",
    "StorageClass": "storage.k8s.io",
    "RuntimeClass": "node.k8s.io",
    "CertificateSigningRequest": "certificates.k8s.io",
    "TenantControlPlane": "kamaji.clastix.io",
    "DataStore": "kamaji.clastix.io",
    "SelfSubjectAccessReview": "authorization.k8s.io",
}


def qualified_kind(kind: str) -> str:
    """`Pod` for core kinds, `Lease.coordination.k8s.io` for grouped ones, as kube names them in errors."""
    group = _GROUPS.get(kind)
    return f"{kind}.{group}" if group else kind


def invalid_message(kind: str, name: str, causes: list[Cause]) -> str:
    """The message of a 422 Invalid Status: `Pod "x" is invalid: spec.containers: Required value`."""
    body = str(causes[0]) if len(causes) == 1 else "[" + ", ".join(str(c) for c in causes) + "]"
    return f"{qualified_kind(kind)} {json.dumps(name)} is invalid: {body}"


def invalid_status(kind: str, name: str, causes: list[Cause]) -> dict[str, Any]:
    """The 422 `Status` kube-apiserver answers with when validation fails."""
    details: dict[str, Any] = {"name": name}
    if kind in _GROUPS:
        details["group"] = _GROUPS[kind]
    details["kind"] = kind
    details["causes"] = [c.to_status_cause() for c in causes]
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": invalid_message(kind, name, causes),
        "reason": "Invalid",
        "details": details,
        "code": 422,
    }


@dataclass(frozen=True)
class PodOptions:
    """What a pod spec's validation depends on beyond the spec (kube's PodValidationOptions): the
    tenant's release and the gates it turns on, and what an update's stored spec already uses."""

    relaxed_env: bool = False  # AllowRelaxedEnvironmentVariableValidation
    host_ips: bool = True  # AllowHostIPsField
    minor: int | None = None  # the tenant's release; None = the newest rules


_PLAIN = PodOptions()


# --- env var names ------------------------------------------------------------------------------------

_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_ENV_NAME_MSG = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', "
    "and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex "
    "used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"
)
_RELAXED_ENV_NAME_MSG = (
    "a valid environment variable name must consist only of printable ASCII characters other than '='"
)
_IANA_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


def _env_name_errors(name: str, relaxed: bool) -> list[str]:
    """kube's IsEnvVarName, or IsRelaxedEnvVarName where RelaxedEnvironmentVariableValidation is on.

    The strict rule also refuses a name that is or starts with `..` (hasChDirPrefix); the relaxed one
    takes any printable ASCII but '='. An empty name is the caller's: kube reports it as required and
    checks no further.
    """
    if not name:
        return []
    if relaxed:
        return [] if all(" " <= ch <= "~" and ch != "=" for ch in name) else [_RELAXED_ENV_NAME_MSG]
    errors = [] if _ENV_NAME.match(name) else [_ENV_NAME_MSG]
    if name in (".", ".."):
        errors.append(f"must not be '{name}'")
    elif name.startswith(".."):
        errors.append("must not start with '..'")
    return errors


def _relaxed_only_names(spec: Mapping[str, Any]) -> set[str]:
    """The env var names and envFrom prefixes of a pod spec that only the relaxed rule takes."""
    names = set()
    for ctr in every_container(spec):
        candidates = [env.get("name") or "" for env in ctr.get("env") or []]
        candidates += [source.get("prefix") or "" for source in ctr.get("envFrom") or []]
        names.update(n for n in candidates if _env_name_errors(n, False) and not _env_name_errors(n, True))
    return names


# --- the kinds ----------------------------------------------------------------------------------------

_CLUSTER_SCOPED = {
    "Namespace",
    "Node",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "PersistentVolume",
    "ClusterRole",
    "ClusterRoleBinding",
    "PriorityClass",
    "DataStore",
    "CustomResourceDefinition",
    "APIService",
    "StorageClass",
    "RuntimeClass",
    "IngressClass",
    "CertificateSigningRequest",
    "CSIDriver",
    "CSINode",
    "VolumeAttachment",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "FlowSchema",
    "PriorityLevelConfiguration",
}
# Reviews are create-only questions with no stored name; kube skips object-meta checks for them.
_REVIEWS = {
    "SelfSubjectAccessReview",
    "SubjectAccessReview",
    "LocalSubjectAccessReview",
    "SelfSubjectRulesReview",
    "SelfSubjectReview",
    "TokenReview",
}
_LABEL_NAMED = {"Namespace"}
_DNS1035_NAMED = {"Service"}
# RBAC's objects are named like `system:controller:job-controller`: kube asks only for a path segment.
_PATH_SEGMENT_NAMED = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
# kube does not care what certificate requests are called (ValidateCertificateRequestName)
_ANY_NAME = {"CertificateSigningRequest"}


def _path_segment_errors(name: str) -> list[str]:
    """kube's IsValidPathSegmentName."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def validate(
    kind: str,
    obj: Mapping[str, Any],
    *,
    old: Mapping[str, Any] | None = None,
    namespaced: bool | None = None,
    subresource: str = "",
    minor: int | None = None,
) -> list[Cause]:
    """Every reason kube-apiserver would refuse `obj` on create (or on update from `old`, through
    `subresource` when given).

    `namespaced` overrides the built-in idea of the kind's scope (needed for kinds this module does not
    know, such as custom resources). `minor` is the tenant's release where a rule depends on it (env var
    names); without it, the rules of releases before 1.32.
    """
    if kind in _POD_SPEC_CHECKS:
        if kind == "Pod" and old is not None and obj.get("spec") is old.get("spec"):
            # a status or metadata write shares the stored spec, which _validate_pod does not check again:
            # no env name is read, so the stored spec need not be walked for relaxed-only names
            opts = _PLAIN
        else:
            opts = PodOptions(_relaxed_env(kind, obj, old, minor), _host_ips_field(kind, old, minor), minor)
        if kind == "Pod" and subresource == "ephemeralcontainers" and old is not None:
            return validate_ephemeral_containers_update(obj, old, opts=opts)
        if kind == "Pod" and subresource == "resize" and old is not None:
            meta, old_meta = obj.get("metadata") or {}, old.get("metadata") or {}
            checked = _validate_metadata(kind, meta, old_meta, True)
            checked.extend(_validate_pod_spec(obj.get("spec") or {}, opts=opts))
            return podresize.resize_causes(obj, old, checked)
    if kind in _REVIEWS:
        check = _KIND_CHECKS.get(kind)
        return check(obj, old) if check is not None else []
    scoped = (kind not in _CLUSTER_SCOPED) if namespaced is None else namespaced
    causes = _validate_metadata(kind, obj.get("metadata") or {}, (old or {}).get("metadata"), scoped)
    if kind in _POD_SPEC_CHECKS:
        causes.extend(_POD_SPEC_CHECKS[kind](obj, old, opts=opts))
        return causes
    if kind == "CertificateSigningRequest":
        # what each of its subresources may change is part of the kind's validation
        causes.extend(certificates.validate_csr(obj, old, subresource))
        return causes
    release_check = _RELEASE_CHECKS.get(kind)
    if release_check is not None:
        causes.extend(release_check(obj, old, minor))
        return causes
    check = _KIND_CHECKS.get(kind)
    if check is not None:
        causes.extend(check(obj, old))
    return causes


def _host_ips_field(kind: str, old: Mapping[str, Any] | None, minor: int | None) -> bool:
    """kube's AllowHostIPsField: the PodHostIPs gate (on from 1.29), or an update of a pod spec whose env
    already reads `status.hostIPs`. Before 1.28 there is no such check: the field itself is unknown."""
    if minor is None or minor < 28 or featuregates.enabled("PodHostIPs", minor):
        return True
    spec = pod_spec(kind, old) if old is not None else None
    return any(
        ((env.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") == "status.hostIPs"
        for ctr in every_container(spec or {})
        for env in ctr.get("env") or []
    )


def _relaxed_env(kind: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None, minor: int | None) -> bool:
    """kube's AllowRelaxedEnvironmentVariableValidation (pkg/api/pod/util.go): the gate (on from 1.32), or
    an update that keeps a name the stored pod spec already has and only the relaxed rule takes."""
    if minor is not None and featuregates.enabled("RelaxedEnvironmentVariableValidation", minor):
        return True
    if old is None:
        return False
    kept = _relaxed_only_names(pod_spec(kind, old) or {})
    return bool(kept and kept & _relaxed_only_names(pod_spec(kind, obj) or {}))


def _validate_metadata(
    kind: str, meta: Mapping[str, Any], old_meta: Mapping[str, Any] | None, namespaced: bool
) -> list[Cause]:
    causes: list[Cause] = []
    name = meta.get("name") or ""
    # On an update the stored name and namespace passed these checks already (and may not change).
    old_name = (old_meta or {}).get("name")
    if name and name == old_name:
        pass
    elif not name:
        if meta.get("generateName"):
            pass  # the registry fills the name in before it validates
        else:
            causes.append(_required("metadata.name", "name or generateName is required"))
    else:
        name_check = (
            (lambda _name: [])
            if kind in _ANY_NAME
            else _dns_label_errors
            if kind in _LABEL_NAMED
            else _dns1035_errors
            if kind in _DNS1035_NAMED
            else _path_segment_errors
            if kind in _PATH_SEGMENT_NAMED
            else _dns_subdomain_errors
        )
        causes.extend(_invalid("metadata.name", name, e) for e in name_check(name))
    namespace = meta.get("namespace") or ""
    if not namespaced:
        if namespace:
            causes.append(_forbidden("metadata.namespace", "not allowed on this type"))
    elif not namespace:
        causes.append(_required("metadata.namespace"))
    elif namespace != (old_meta or {}).get("namespace"):
        causes.extend(_invalid("metadata.namespace", namespace, e) for e in _dns_label_errors(namespace))
    # On an update, what the stored object already had passed these checks when it was written; only
    # new label pairs and new annotation keys can be refused (most updates change neither).
    old_labels = (old_meta or {}).get("labels") or {}
    labels = meta.get("labels") or {}
    for key, value in labels.items():
        if key in old_labels and old_labels[key] == value:
            continue
        causes.extend(_invalid("metadata.labels", key, e) for e in qualified_name_errors(key))
        if not isinstance(value, str):
            causes.append(_invalid(f"metadata.labels[{key}]", value, "must be a string"))
        else:
            causes.extend(_invalid("metadata.labels", value, e) for e in label_value_errors(value))
    old_annotations = (old_meta or {}).get("annotations") or {}
    annotations = meta.get("annotations") or {}
    total = 0
    for key, value in annotations.items():
        if key not in old_annotations:
            causes.extend(
                _invalid("metadata.annotations", key, e) for e in qualified_name_errors(key.lower())
            )
        total += len(key) + len(str(value))
    if total > 256 * 1024:
        causes.append(_too_long("metadata.annotations", 256 * 1024))
    if old_meta is not None:
        for field_name in ("name", "namespace", "uid", "creationTimestamp"):
            if (meta.get(field_name) or "") != (old_meta.get(field_name) or "") and old_meta.get(field_name):
                causes.append(
                    _invalid(f"metadata.{field_name}", meta.get(field_name) or "", "field is immutable")
                )
    return causes


def _quantity(path: str, value: Any, causes: list[Cause], *, integer: bool = False) -> Decimal | None:
    try:
        amount = parse_quantity(value)
    except (QuantityError, TypeError):
        causes.append(
            _invalid(
                path,
                value,
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            )
        )
        return None
    if amount < 0:
        causes.append(_invalid(path, value, "must be greater than or equal to 0"))
    elif integer and amount != amount.to_integral_value():
        causes.append(_invalid(path, value, "must be an integer"))
    return amount


_NATIVE_RESOURCES = {"cpu", "memory", "storage", "ephemeral-storage", "pods"}


def _is_extended_resource(name: str) -> bool:
    """Extended resources are domain-qualified names outside kubernetes.io, like `nvidia.com/gpu`."""
    if "/" not in name or name.startswith("requests.") or name.startswith("limits."):
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def _validate_resource_names(
    path: str,
    resources: Mapping[str, Any],
    causes: list[Cause],
    unqualified: str = "must be a standard resource for containers",
) -> None:
    for name in resources:
        if name in _NATIVE_RESOURCES or name.startswith("hugepages-"):
            continue
        if "/" not in name:
            causes.append(_invalid(f"{path}[{name}]", name, unqualified))
        else:
            causes.extend(_invalid(f"{path}[{name}]", name, e) for e in qualified_name_errors(name))


def _validate_resources(path: str, resources: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    _validate_resource_names(f"{path}.limits", limits, causes)
    _validate_resource_names(f"{path}.requests", requests, causes)
    limit_values = {
        name: _quantity(f"{path}.limits[{name}]", value, causes, integer=_is_extended_resource(name))
        for name, value in limits.items()
    }
    for name, value in requests.items():
        amount = _quantity(f"{path}.requests[{name}]", value, causes, integer=_is_extended_resource(name))
        limit = limit_values.get(name)
        if _is_extended_resource(name):
            # Extended resources cannot be overcommitted: a request needs an equal limit.
            if name not in limits:
                causes.append(
                    _required(f"{path}.limits", "Limit must be set for non overcommitable resources")
                )
            elif amount is not None and limit is not None and amount != limit:
                causes.append(
                    _invalid(
                        f"{path}.requests",
                        str(value),
                        f"must be equal to {name} limit of {limits[name]}",
                    )
                )
        elif amount is not None and limit is not None and amount > limit:
            causes.append(
                _invalid(
                    f"{path}.requests",
                    str(value),
                    f"must be less than or equal to {name} limit of {limits[name]}",
                )
            )
    return causes


def _resize_policy_causes(policies: Any, path: str, restart_policy: Any) -> list[Cause]:
    """validateResizePolicy: one entry per resource, cpu or memory, each NotRequired or RestartContainer;
    a pod whose restartPolicy is Never allows only NotRequired (kubernetes#118768, 1.28). kube reports
    all but a repeat under the list's path, without the index."""
    causes: list[Cause] = []
    if not isinstance(policies, list):
        return causes
    seen: set[Any] = set()
    for i, entry in enumerate(policies):
        entry = entry if isinstance(entry, Mapping) else {}
        resource, restart = entry.get("resourceName") or "", entry.get("restartPolicy") or ""
        if resource in seen:
            causes.append(_duplicate(f"{path}[{i}]", resource))
        seen.add(resource)
        if not resource:
            causes.append(_required(path))
        elif resource not in ("cpu", "memory"):
            causes.append(_not_supported(path, resource, ["cpu", "memory"]))
        if not restart:
            causes.append(_required(path))
        elif restart not in _RESIZE_RESTART_POLICIES:
            causes.append(_not_supported(path, restart, list(_RESIZE_RESTART_POLICIES)))
        if restart_policy == "Never" and restart != "NotRequired":
            causes.append(_invalid(path, restart, "must be 'NotRequired' when `restartPolicy` is 'Never'"))
    return causes


_RESIZE_RESTART_POLICIES = ("NotRequired", "RestartContainer")


def _validate_container(
    path: str,
    ctr: Mapping[str, Any],
    volumes: Mapping[str, Mapping[str, Any]],
    *,
    opts: PodOptions = _PLAIN,
    restart_policy: Any = "Always",
) -> list[Cause]:
    causes: list[Cause] = []
    name = ctr.get("name") or ""
    if not name:
        causes.append(_required(f"{path}.name"))
    else:
        causes.extend(_invalid(f"{path}.name", name, e) for e in _dns_label_errors(name))
    if not ctr.get("image"):
        causes.append(_required(f"{path}.image"))
    policy = ctr.get("imagePullPolicy")
    if policy is not None and policy not in ("Always", "IfNotPresent", "Never"):
        causes.append(_not_supported(f"{path}.imagePullPolicy", policy, ["Always", "IfNotPresent", "Never"]))
    seen_ports: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ctr.get("ports") or []):
        ppath = f"{path}.ports[{i}]"
        number = port.get("containerPort")
        if not isinstance(number, int) or not 1 <= number <= 65535:
            causes.append(
                _invalid(f"{ppath}.containerPort", number, "must be between 1 and 65535, inclusive")
            )
        protocol = port.get("protocol", "TCP")
        if protocol not in ("TCP", "UDP", "SCTP"):
            causes.append(_not_supported(f"{ppath}.protocol", protocol, ["SCTP", "TCP", "UDP"]))
        if (number, protocol) in seen_ports:
            causes.append(_duplicate(ppath, f"{number}/{protocol}"))
        seen_ports.add((number, protocol))
    for i, env in enumerate(ctr.get("env") or []):
        env_name = env.get("name") or ""
        if not env_name:
            causes.append(_required(f"{path}.env[{i}].name"))
        causes.extend(
            _invalid(f"{path}.env[{i}].name", env_name, e)
            for e in _env_name_errors(env_name, opts.relaxed_env)
        )
        if env.get("valueFrom") is not None:
            causes.extend(_value_from_causes(env, f"{path}.env[{i}].valueFrom", opts))
    for i, source in enumerate(ctr.get("envFrom") or []):
        if env_prefix := source.get("prefix") or "":
            causes.extend(
                _invalid(f"{path}.envFrom[{i}].prefix", env_prefix, e)
                for e in _env_name_errors(env_prefix, opts.relaxed_env)
            )
        causes.extend(_env_from_causes(source, f"{path}.envFrom", f"{path}.envFrom[{i}]"))
    privileged = bool((ctr.get("securityContext") or {}).get("privileged"))
    mounts, devices = ctr.get("volumeMounts") or [], ctr.get("volumeDevices") or []
    causes.extend(
        validate_volume_mounts(
            mounts,
            volumes,
            f"{path}.volumeMounts",
            devices=volume_device_paths(devices) if devices else None,
            privileged=privileged,
        )
    )
    if devices:
        causes.extend(validate_volume_devices(devices, volumes, mounts, f"{path}.volumeDevices"))
    causes.extend(_validate_resources(f"{path}.resources", ctr.get("resources") or {}))
    if "resizePolicy" in ctr:
        causes.extend(_resize_policy_causes(ctr["resizePolicy"], f"{path}.resizePolicy", restart_policy))
    return causes


def _key_selector_causes(selector: Mapping[str, Any], path: str) -> list[Cause]:
    """validateConfigMapKeySelector / validateSecretKeySelector: the name (a subdomain) and the key."""
    name = str(selector.get("name") or "")
    causes = [_invalid(f"{path}.name", name, e) for e in _dns_subdomain_errors(name)]
    key = str(selector.get("key") or "")
    if not key:
        causes.append(_required(f"{path}.key"))
    else:
        causes.extend(_invalid(f"{path}.key", key, e) for e in config_key_errors(key))
    return causes


def _value_from_causes(env: Mapping[str, Any], path: str, opts: PodOptions) -> list[Cause]:
    """validateEnvVarValueFrom: exactly one source, each checked, and no `value` beside it."""
    value_from = env.get("valueFrom") or {}
    causes: list[Cause] = []
    sources = 0
    if (field_ref := value_from.get("fieldRef")) is not None:
        sources += 1
        causes.extend(object_field_causes(field_ref, ENV_FIELD_PATHS, f"{path}.fieldRef", minor=opts.minor))
        if not opts.host_ips and field_ref.get("fieldPath") == "status.hostIPs":
            causes.append(
                _forbidden(f"{path}.fieldRef", "may not be set when feature gate 'PodHostIPs' is not enabled")
            )
    if (resource_ref := value_from.get("resourceFieldRef")) is not None:
        sources += 1
        causes.extend(resource_field_causes(resource_ref, f"{path}.resourceFieldRef", volume=False))
    for key in ("configMapKeyRef", "secretKeyRef"):
        if (selector := value_from.get(key)) is not None:
            sources += 1
            causes.extend(_key_selector_causes(selector, f"{path}.{key}"))
    if sources == 0:
        causes.append(
            _invalid(
                path,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            )
        )
    elif env.get("value"):
        causes.append(_invalid(path, "", "may not be specified when `value` is not empty"))
    elif sources > 1:
        causes.append(_invalid(path, "", "may not have more than one field specified at a time"))
    return causes


def _env_from_causes(source: Mapping[str, Any], list_path: str, path: str) -> list[Cause]:
    """ValidateEnvFrom: one of configMapRef or secretRef, naming a valid object. kube reports a missing or
    doubled source under the list's path."""
    causes: list[Cause] = []
    sources = 0
    for key in ("configMapRef", "secretRef"):
        ref = source.get(key)
        if ref is None:
            continue
        sources += 1
        name = str(ref.get("name") or "")
        if not name:
            causes.append(_required(f"{path}.{key}.name"))
        else:
            # kube checks it as a generateName prefix: apimachinery's maskTrailingDash puts one `a` for
            # the last two characters of a name ending in '-' before the subdomain check.
            masked = name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name
            causes.extend(_invalid(f"{path}.{key}.name", name, e) for e in _dns_subdomain_errors(masked))
    if sources == 0:
        causes.append(_invalid(list_path, "", "must specify one of: `configMapRef` or `secretRef`"))
    elif sources > 1:
        causes.append(_invalid(list_path, "", "may not have more than one field specified at a time"))
    return causes


_POD_ENUMS = {
    "restartPolicy": ["Always", "OnFailure", "Never"],
    "dnsPolicy": ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
    "preemptionPolicy": ["Never", "PreemptLowerPriority"],
}
_TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]


def _validate_pod_spec(
    spec: Mapping[str, Any], path: str = "spec", *, opts: PodOptions = _PLAIN
) -> list[Cause]:
    causes: list[Cause] = []
    volumes, volume_causes = validate_volumes(spec.get("volumes") or [], f"{path}.volumes")
    causes.extend(volume_causes)
    containers = spec.get("containers") or []
    if not containers:
        causes.append(_required(f"{path}.containers"))
    names: set[str] = set()
    for group in ("initContainers", "containers"):
        for i, ctr in enumerate(spec.get(group) or []):
            cpath = f"{path}.{group}[{i}]"
            causes.extend(
                _validate_container(cpath, ctr, volumes, opts=opts, restart_policy=spec.get("restartPolicy"))
            )
            cname = ctr.get("name") or ""
            if cname and cname in names:
                causes.append(_duplicate(f"{cpath}.name", cname))
            names.add(cname)
    for field_name, allowed in _POD_ENUMS.items():
        value = spec.get(field_name)
        if value is not None and value not in allowed:
            causes.append(_not_supported(f"{path}.{field_name}", value, allowed))
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is not None and (not isinstance(grace, int) or grace < 0):
        causes.append(
            _invalid(f"{path}.terminationGracePeriodSeconds", grace, "must be greater than or equal to 0")
        )
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not isinstance(deadline, int) or deadline <= 0):
        causes.append(
            _invalid(f"{path}.activeDeadlineSeconds", deadline, "must be between 1 and 2147483647, inclusive")
        )
    node_name = spec.get("nodeName")
    if node_name:
        causes.extend(_invalid(f"{path}.nodeName", node_name, e) for e in _dns_subdomain_errors(node_name))
    for i, tol in enumerate(spec.get("tolerations") or []):
        tpath = f"{path}.tolerations[{i}]"
        operator = tol.get("operator", "Equal")
        if operator not in ("Equal", "Exists"):
            causes.append(_not_supported(f"{tpath}.operator", operator, ["Equal", "Exists"]))
        if operator == "Exists" and tol.get("value"):
            causes.append(
                _invalid(
                    f"{tpath}.operator", tol.get("value"), "value must be empty when `operator` is 'Exists'"
                )
            )
        if not tol.get("key") and operator != "Exists":
            causes.append(
                _invalid(
                    f"{tpath}.operator",
                    operator,
                    "operator must be Exists when `key` is empty, "
                    'which means "match all values and all keys"',
                )
            )
        effect = tol.get("effect")
        if effect and effect not in _TAINT_EFFECTS:
            causes.append(_not_supported(f"{tpath}.effect", effect, _TAINT_EFFECTS))
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            causes.append(
                _invalid(
                    f"{tpath}.effect",
                    effect or "",
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                )
            )
    overhead = spec.get("overhead")
    if isinstance(overhead, Mapping):
        # validateOverhead: a pod's overhead is checked as a container's limits (`spec.overhead.limits[…]`)
        causes.extend(_validate_resources(f"{path}.overhead", {"limits": overhead}))
    return causes


_POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def _mutable_pod_spec_view(spec: Mapping[str, Any], old_spec: Mapping[str, Any]) -> dict[str, Any]:
    """`spec` with the fields a pod update may change replaced by their old values."""
    view = copy.deepcopy(dict(spec))
    for group in ("containers", "initContainers"):
        old_ctrs = old_spec.get(group) or []
        new_ctrs = view.get(group) or []
        if len(old_ctrs) == len(new_ctrs):
            for new_ctr, old_ctr in zip(new_ctrs, old_ctrs, strict=True):
                if "image" in old_ctr:
                    new_ctr["image"] = old_ctr["image"]
    view["activeDeadlineSeconds"] = old_spec.get("activeDeadlineSeconds")
    old_tolerations = old_spec.get("tolerations") or []
    new_tolerations = view.get("tolerations") or []
    if all(t in new_tolerations for t in old_tolerations):
        view["tolerations"] = old_tolerations
    grace_old = old_spec.get("terminationGracePeriodSeconds")
    if isinstance(grace_old, int) and grace_old < 0 and view.get("terminationGracePeriodSeconds") == 1:
        view["terminationGracePeriodSeconds"] = grace_old
    return {k: v for k, v in view.items() if v is not None}


def _validate_pod(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, *, opts: PodOptions = _PLAIN
) -> list[Cause]:
    spec = obj.get("spec") or {}
    if old is not None and spec == (old.get("spec") or {}):
        # Most pod updates (annotations, status, finalizers) leave the spec alone, and the stored spec
        # passed validation when it was written: nothing in it can be refused now.
        return []
    causes = _validate_pod_spec(spec, opts=opts)
    if old is None and spec.get("ephemeralContainers"):
        causes.append(_forbidden("spec.ephemeralContainers", "cannot be set on create"))
    if old is not None:
        old_spec = old.get("spec") or {}
        before = {k: v for k, v in old_spec.items() if v is not None}
        after = _mutable_pod_spec_view(spec, old_spec)
        if after != before:
            # kube appends a diff of the spec; ours names each changed field, old value then new.
            lines = [
                f"-  {path}: {_show(was)}\n+  {path}: {_show(now)}"
                for path, was, now in _differences(before, after, "spec")[:10]
            ]
            causes.append(_forbidden("spec", _POD_UPDATE_FORBIDDEN + "\n" + "\n".join(lines)))
        deadline_old = old_spec.get("activeDeadlineSeconds")
        deadline_new = spec.get("activeDeadlineSeconds")
        if deadline_old is not None and (deadline_new is None or deadline_new > deadline_old):
            causes.append(
                _invalid(
                    "spec.activeDeadlineSeconds",
                    deadline_new,
                    "must be less than or equal to previous value",
                )
            )
    return causes


# The fields an ephemeral container may have (kube's allow list); any other one set is refused, since
# a debugging container must not carry ports, probes, resources or lifecycle hooks.
_EPHEMERAL_CONTAINER_FIELDS = frozenset(
    {
        "name",
        "image",
        "command",
        "args",
        "workingDir",
        "envFrom",
        "env",
        "volumeMounts",
        "volumeDevices",
        "terminationMessagePath",
        "terminationMessagePolicy",
        "imagePullPolicy",
        "securityContext",
        "stdin",
        "stdinOnce",
        "tty",
        "targetContainerName",
    }
)
_NOT_FOR_EPHEMERAL = "cannot be set for an Ephemeral Container"


# A static pod's copy in the API, which its kubelet keeps (ephemeral containers and service accounts
# are refused on it).
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"


def validate_ephemeral_containers_update(
    obj: Mapping[str, Any], old: Mapping[str, Any], *, opts: PodOptions = _PLAIN
) -> list[Cause]:
    """An update through `pods/ephemeralcontainers` (what `kubectl debug` sends): new ephemeral
    containers are checked as kube does, and existing ones may be neither removed nor changed."""
    annotations = (old.get("metadata") or {}).get("annotations") or {}
    if MIRROR_POD_ANNOTATION in annotations:
        return [_forbidden(ROOT, "static pods do not support ephemeral containers")]
    spec = obj.get("spec") or {}
    path = "spec.ephemeralContainers"
    others = {
        c.get("name") or "" for group in ("containers", "initContainers") for c in spec.get(group) or []
    }
    volumes, _ = validate_volumes(spec.get("volumes") or [], "spec.volumes")
    causes: list[Cause] = []
    names = set(others)
    ephemeral = spec.get("ephemeralContainers") or []
    for i, ctr in enumerate(ephemeral):
        cpath = f"{path}[{i}]"
        bare = {k: v for k, v in ctr.items() if k != "resources"}
        causes.extend(
            _validate_container(cpath, bare, volumes, opts=opts, restart_policy=spec.get("restartPolicy"))
        )
        name = ctr.get("name") or ""
        if name and name in names:
            causes.append(_duplicate(f"{cpath}.name", name))
        names.add(name)
        target = ctr.get("targetContainerName")
        if target and target not in others:
            causes.append(_not_found(f"{cpath}.targetContainerName", target))
        for field_name, value in ctr.items():
            if field_name not in _EPHEMERAL_CONTAINER_FIELDS and value not in (None, {}, [], "", False, 0):
                causes.append(_forbidden(f"{cpath}.{field_name}", _NOT_FOR_EPHEMERAL))
        for j, mount in enumerate(ctr.get("volumeMounts") or []):
            for sub in ("subPath", "subPathExpr"):
                if mount.get(sub):
                    causes.append(_forbidden(f"{cpath}.volumeMounts[{j}].{sub}", _NOT_FOR_EPHEMERAL))
    by_name = {c.get("name"): c for c in ephemeral}
    for was in (old.get("spec") or {}).get("ephemeralContainers") or []:
        now = by_name.get(was.get("name"))
        if now is None:
            causes.append(
                _forbidden(path, f'existing ephemeral containers "{was.get("name")}" may not be removed')
            )
        elif now != was:
            causes.append(
                _forbidden(path, f'existing ephemeral containers "{was.get("name")}" may not be changed')
            )
    return causes


_JOB_FEATURES_NOT_SIMULATED = (
    "podFailurePolicy",
    "successPolicy",
    "backoffLimitPerIndex",
    "maxFailedIndexes",
)


def _validate_job(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, *, opts: PodOptions = _PLAIN
) -> list[Cause]:
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    for field_name in (
        "parallelism",
        "completions",
        "backoffLimit",
        "activeDeadlineSeconds",
        "ttlSecondsAfterFinished",
    ):
        value = spec.get(field_name)
        if value is not None and (not isinstance(value, int) or value < 0):
            causes.append(_invalid(f"spec.{field_name}", value, "must be greater than or equal to 0"))
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and deadline == 0:
        causes.append(_invalid("spec.activeDeadlineSeconds", deadline, "must be greater than 0"))
    mode = spec.get("completionMode")
    if mode not in ("NonIndexed", "Indexed"):
        causes.append(_not_supported("spec.completionMode", mode, ["NonIndexed", "Indexed"]))
    elif mode == "Indexed":
        # Accepting an Indexed Job and running it as NonIndexed would hand out no completion indexes.
        causes.append(_invalid("spec.completionMode", mode, "Indexed Jobs are not simulated by tenantgpu"))
    for field_name in _JOB_FEATURES_NOT_SIMULATED:
        if spec.get(field_name) is not None:
            causes.append(_forbidden(f"spec.{field_name}", "not simulated by tenantgpu"))
    causes.extend(_validate_selected_template(spec, old, empty_selector_ok=True, opts=opts))
    template = spec.get("template") or {}
    restart = (template.get("spec") or {}).get("restartPolicy")
    if restart is None:
        causes.append(_required("spec.template.spec.restartPolicy", 'valid values: "OnFailure", "Never"'))
    elif restart not in ("OnFailure", "Never"):
        causes.append(_not_supported("spec.template.spec.restartPolicy", restart, ["OnFailure", "Never"]))
    if old is not None:
        old_spec = old.get("spec") or {}
        if spec.get("completions") != old_spec.get("completions"):
            causes.append(_invalid("spec.completions", spec.get("completions"), "field is immutable"))
        if template != (old_spec.get("template") or {}) and not old_spec.get("suspend"):
            causes.append(_invalid("spec.template", "", "field is immutable"))
    return causes


_CONCURRENCY_POLICIES = ["Allow", "Forbid", "Replace"]


def _validate_cron_job(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, *, opts: PodOptions = _PLAIN
) -> list[Cause]:
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    name = (obj.get("metadata") or {}).get("name") or ""
    if len(name) > 52:  # 63 minus the 11 characters of the Jobs' time suffix
        causes.append(_invalid("metadata.name", name, "must be no more than 52 characters"))
    schedule = spec.get("schedule")
    if not schedule:
        causes.append(_required("spec.schedule"))
    else:
        # kube's validateScheduleFormat: robfig's parse, then the TZ rule, each a cause of its own.
        try:
            parse_schedule(schedule)
        except ScheduleError as error:
            causes.append(_invalid("spec.schedule", schedule, str(error)))
        if "TZ" in schedule:
            causes.append(
                _invalid(
                    "spec.schedule",
                    schedule,
                    "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                )
            )
    zone_name = spec.get("timeZone")
    if zone_name is not None:
        problem = time_zone_error(zone_name)
        if problem:
            causes.append(_invalid("spec.timeZone", zone_name, problem))
    policy = spec.get("concurrencyPolicy")
    if policy not in _CONCURRENCY_POLICIES:
        causes.append(_not_supported("spec.concurrencyPolicy", policy, _CONCURRENCY_POLICIES))
    for field_name in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        value = spec.get(field_name)
        if value is not None and (not isinstance(value, int) or value < 0):
            causes.append(_invalid(f"spec.{field_name}", value, "must be greater than or equal to 0"))
    job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    prefix = "spec.jobTemplate.spec"
    for field_name in _JOB_FEATURES_NOT_SIMULATED:
        if job_spec.get(field_name) is not None:
            causes.append(_forbidden(f"{prefix}.{field_name}", "not simulated by tenantgpu"))
    if job_spec.get("completionMode") == "Indexed":
        causes.append(
            _invalid(f"{prefix}.completionMode", "Indexed", "Indexed Jobs are not simulated by tenantgpu")
        )
    template_spec = (job_spec.get("template") or {}).get("spec") or {}
    causes.extend(_validate_pod_spec(template_spec, f"{prefix}.template.spec", opts=opts))
    restart = template_spec.get("restartPolicy")
    if restart is None:
        causes.append(
            _required(f"{prefix}.template.spec.restartPolicy", 'valid values: "OnFailure", "Never"')
        )
    elif restart not in ("OnFailure", "Never"):
        causes.append(
            _not_supported(f"{prefix}.template.spec.restartPolicy", restart, ["OnFailure", "Never"])
        )
    return causes


def _validate_replicated(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, *, opts: PodOptions = _PLAIN
) -> list[Cause]:
    """What apps/v1 Deployments and ReplicaSets share: replicas, selector, template."""
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    replicas = spec.get("replicas")
    if not isinstance(replicas, int) or replicas < 0:
        causes.append(_invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    causes.extend(_validate_selected_template(spec, old, empty_selector_ok=False, opts=opts))
    restart = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    if restart != "Always":
        causes.append(_not_supported("spec.template.spec.restartPolicy", restart, ["Always"]))
    return causes


def _validate_selected_template(
    spec: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    *,
    empty_selector_ok: bool,
    workload: str = "deployment",
    opts: PodOptions = _PLAIN,
) -> list[Cause]:
    """A workload's selector (required, immutable, matching the template's labels) and its pod template."""
    causes: list[Cause] = []
    selector = spec.get("selector")
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if selector is None:
        causes.append(_required("spec.selector"))
    elif not empty_selector_ok and not (selector.get("matchLabels") or selector.get("matchExpressions")):
        causes.append(_invalid("spec.selector", selector, f"empty selector is invalid for {workload}"))
    elif not match_selector_object(selector, labels):
        causes.append(
            _invalid("spec.template.metadata.labels", labels, "`selector` does not match template `labels`")
        )
    causes.extend(_validate_pod_spec(template.get("spec") or {}, "spec.template.spec", opts=opts))
    if old is not None and spec.get("selector") != (old.get("spec") or {}).get("selector"):
        causes.append(_invalid("spec.selector", spec.get("selector"), "field is immutable"))
    return causes


def _int_or_percent(value: Any) -> int:
    return (
        int(value[:-1])
        if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit()
        else int(value if isinstance(value, int) else 0)
    )


def _validate_daemon_set(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, *, opts: PodOptions = _PLAIN
) -> list[Cause]:
    spec = obj.get("spec") or {}
    causes = _validate_selected_template(spec, old, empty_selector_ok=False, workload="daemonset", opts=opts)
    template_spec = (spec.get("template") or {}).get("spec") or {}
    restart = template_spec.get("restartPolicy")
    if restart != "Always":
        causes.append(_not_supported("spec.template.spec.restartPolicy", restart, ["Always"]))
    if template_spec.get("activeDeadlineSeconds") is not None:
        causes.append(
            _forbidden(
                "spec.template.spec.activeDeadlineSeconds",
                "activeDeadlineSeconds in DaemonSet is not Supported",
            )
        )
    for field_name in ("minReadySeconds", "revisionHistoryLimit"):
        value = spec.get(field_name)
        if value is not None and (not isinstance(value, int) or value < 0):
            causes.append(_invalid(f"spec.{field_name}", value, "must be greater than or equal to 0"))
    strategy = spec.get("updateStrategy") or {}
    kind = strategy.get("type")
    if kind == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if rolling is None:
            causes.append(_required("spec.updateStrategy.rollingUpdate"))
            return causes
        for name in ("maxUnavailable", "maxSurge"):
            path = f"spec.updateStrategy.rollingUpdate.{name}"
            causes.extend(_int_or_percent_causes(path, rolling.get(name), at_most_100=True))
        unavailable = _int_or_percent(rolling.get("maxUnavailable"))
        surge = _int_or_percent(rolling.get("maxSurge"))
        if unavailable and surge:
            causes.append(
                _invalid(
                    "spec.updateStrategy.rollingUpdate.maxSurge",
                    rolling.get("maxSurge"),
                    "may not be set when maxUnavailable is non-zero",
                )
            )
        elif not unavailable and not surge:
            causes.append(
                _required(
                    "spec.updateStrategy.rollingUpdate.maxUnavailable", "cannot be 0 when maxSurge is 0"
                )
            )
    elif kind != "OnDelete":
        causes.append(_not_supported("spec.updateStrategy", strategy, ["RollingUpdate", "OnDelete"]))
    return causes


_STATEFUL_SET_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)


def _with_claim_volumes(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """The set's spec as its pods will have it: each volumeClaimTemplate a claim volume of its name in
    the template, in place of a template volume of that name (the controller's updateStorage), so a
    container may mount a claim template; kube's own check is the union of the two (it validates the
    template's volumes apart only when its pods are made)."""
    names = [
        ((t or {}).get("metadata") or {}).get("name", "")
        for t in spec.get("volumeClaimTemplates") or ()
        if isinstance(t, Mapping)
    ]
    template = spec.get("template") or {}
    if not names or not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        return spec
    pod_spec = template["spec"]
    volumes = [
        *({"name": name, "persistentVolumeClaim": {"claimName": name}} for name in names if name),
        *(
            v
            for v in pod_spec.get("volumes") or ()
            if not (isinstance(v, Mapping) and v.get("name") in names)
        ),
    ]
    return {**spec, "template": {**template, "spec": {**pod_spec, "volumes": volumes}}}


def _validate_stateful_set(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, *, opts: PodOptions = _PLAIN
) -> list[Cause]:
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    replicas = spec.get("replicas")
    if not isinstance(replicas, int) or replicas < 0:
        causes.append(_invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    causes.extend(
        _validate_selected_template(
            _with_claim_volumes(spec), old, empty_selector_ok=False, workload="statefulset", opts=opts
        )
    )
    restart = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    if restart != "Always":
        causes.append(_not_supported("spec.template.spec.restartPolicy", restart, ["Always"]))
    policy = spec.get("podManagementPolicy")
    if policy not in ("OrderedReady", "Parallel"):
        causes.append(_not_supported("spec.podManagementPolicy", policy, ["OrderedReady", "Parallel"]))
    strategy = spec.get("updateStrategy") or {}
    if strategy.get("type") not in ("RollingUpdate", "OnDelete"):
        causes.append(
            _not_supported("spec.updateStrategy.type", strategy.get("type"), ["OnDelete", "RollingUpdate"])
        )
    partition = (strategy.get("rollingUpdate") or {}).get("partition", 0)
    if not isinstance(partition, int) or partition < 0:
        causes.append(
            _invalid(
                "spec.updateStrategy.rollingUpdate.partition", partition, "must be greater than or equal to 0"
            )
        )
    if old is not None:
        old_spec = old.get("spec") or {}
        if any(
            spec.get(k) != old_spec.get(k)
            for k in set(spec) | set(old_spec)
            if k not in _STATEFUL_SET_MUTABLE
        ):
            causes.append(
                _forbidden(
                    "spec",
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
                    "'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
                )
            )
    return causes


def _validate_controller_revision(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    revision = obj.get("revision")
    if not isinstance(revision, int) or revision < 0:
        causes.append(_invalid("revision", revision, "must be greater than or equal to 0"))
    if old is not None and obj.get("data") != old.get("data"):
        causes.append(_invalid("data", "", "field is immutable"))
    return causes


def _validate_binding_role(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, *, namespaced: bool
) -> list[Cause]:
    """A (Cluster)RoleBinding's roleRef: required, a Role (namespaced bindings only) or ClusterRole, never
    changed."""
    causes: list[Cause] = []
    ref = obj.get("roleRef") or {}
    allowed = ["ClusterRole", "Role"] if namespaced else ["ClusterRole"]
    if ref.get("apiGroup") != "rbac.authorization.k8s.io":
        causes.append(
            _not_supported("roleRef.apiGroup", ref.get("apiGroup", ""), ["rbac.authorization.k8s.io"])
        )
    if ref.get("kind") not in allowed:
        causes.append(_not_supported("roleRef.kind", ref.get("kind", ""), allowed))
    if not ref.get("name"):
        causes.append(_required("roleRef.name"))
    for i, subject in enumerate(obj.get("subjects") or []):
        if subject.get("kind") not in ("Group", "ServiceAccount", "User"):
            causes.append(
                _not_supported(
                    f"subjects[{i}].kind", subject.get("kind", ""), ["ServiceAccount", "User", "Group"]
                )
            )
        if not subject.get("name"):
            causes.append(_required(f"subjects[{i}].name"))
    if old is not None and ref != (old.get("roleRef") or {}):
        causes.append(_invalid("roleRef", ref, "cannot change roleRef"))
    return causes


def _validate_priority_class(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    value = obj.get("value")
    if not isinstance(value, int) or isinstance(value, bool):
        causes.append(_required("value"))
    policy = obj.get("preemptionPolicy")
    if policy not in ("PreemptLowerPriority", "Never"):
        causes.append(_not_supported("preemptionPolicy", policy, ["Never", "PreemptLowerPriority"]))
    if old is not None:
        if value != old.get("value"):
            causes.append(_forbidden("value", "may not be changed in an update."))
        if policy != old.get("preemptionPolicy"):
            causes.append(_invalid("preemptionPolicy", policy, "field is immutable"))
    return causes


def _go_toleration(toleration: Mapping[str, Any]) -> str:
    """A toleration as kube's Duplicate error shows it: Go's %#v of the internal struct. A set
    `tolerationSeconds` is a pointer there, printed as its address; its value is shown instead."""
    seconds = toleration.get("tolerationSeconds")
    fields = ", ".join(
        f"{go}:{json.dumps(str(toleration.get(key) or ''))}"
        for go, key in (("Key", "key"), ("Operator", "operator"), ("Value", "value"), ("Effect", "effect"))
    )
    pointer = "(*int64)(nil)" if seconds is None else f"(*int64)({seconds})"
    return f"core.Toleration{{{fields}, TolerationSeconds:{pointer}}}"


def _toleration_causes(tolerations: Any, path: str) -> list[Cause]:
    """kube's ValidateTolerations, in its order for each toleration: the key a label name, an empty key
    only with Exists, tolerationSeconds only with NoExecute, the value a label value (Equal) or empty
    (Exists), the effect one of the three taint effects."""
    causes: list[Cause] = []
    for i, toleration in enumerate(tolerations if isinstance(tolerations, list) else []):
        toleration = toleration if isinstance(toleration, Mapping) else {}
        tpath = f"{path}[{i}]"
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or ""
        value = toleration.get("value") or ""
        effect = toleration.get("effect") or ""
        if key:
            causes.extend(_invalid(f"{tpath}.key", key, e) for e in qualified_name_errors(key))
        if not key and operator != "Exists":
            causes.append(
                _invalid(
                    f"{tpath}.operator",
                    operator,
                    'operator must be Exists when `key` is empty, which means "match all values and all keys"',
                )
            )
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            causes.append(
                _invalid(
                    f"{tpath}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"
                )
            )
        if operator in ("Equal", ""):
            if errors := label_value_errors(value):
                causes.append(_invalid(f"{tpath}.operator", value, ";".join(errors)))
        elif operator == "Exists":
            if value:
                causes.append(
                    _invalid(f"{tpath}.operator", value, "value must be empty when `operator` is 'Exists'")
                )
        else:
            causes.append(_not_supported(f"{tpath}.operator", operator, ["Equal", "Exists"]))
        if effect and effect not in _TAINT_EFFECTS:
            causes.append(_not_supported(f"{tpath}.effect", effect, _TAINT_EFFECTS))
    return causes


def _validate_runtime_class(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    """kube's ValidateRuntimeClass and ValidateRuntimeClassUpdate (pkg/apis/node/validation): the handler a
    DNS label (an empty one gets the label's messages, there is no Required), the overhead checked as a
    container's limits (so under `overhead.limits[...]`), the node selector's labels, the tolerations
    (kube validates them one level deeper, at `scheduling.tolerations.tolerations[i]`, and reports a
    repeated key/operator/value/effect at `scheduling.tolerations[i]`); on update the handler may not
    change."""
    causes: list[Cause] = []
    handler = obj.get("handler")
    handler = handler if isinstance(handler, str) else ""
    causes.extend(_invalid("handler", handler, e) for e in _dns_label_errors(handler))
    overhead = obj.get("overhead")
    if isinstance(overhead, Mapping):
        pod_fixed = overhead.get("podFixed")
        causes.extend(
            _validate_resources("overhead", {"limits": pod_fixed if isinstance(pod_fixed, Mapping) else {}})
        )
    scheduling = obj.get("scheduling")
    if isinstance(scheduling, Mapping):
        selector = scheduling.get("nodeSelector")
        for key, value in (selector if isinstance(selector, Mapping) else {}).items():
            causes.extend(_invalid("scheduling.nodeSelector", key, e) for e in qualified_name_errors(key))
            causes.extend(
                _invalid("scheduling.nodeSelector", value, e) for e in label_value_errors(str(value or ""))
            )
        tolerations = scheduling.get("tolerations")
        causes.extend(_toleration_causes(tolerations, "scheduling.tolerations.tolerations"))
        seen: set[tuple[str, ...]] = set()
        for i, toleration in enumerate(tolerations if isinstance(tolerations, list) else []):
            toleration = toleration if isinstance(toleration, Mapping) else {}
            list_key = tuple(str(toleration.get(f) or "") for f in ("key", "operator", "value", "effect"))
            if list_key in seen:
                causes.append(
                    Cause(
                        "FieldValueDuplicate",
                        f"Duplicate value: {_go_toleration(toleration)}",
                        f"scheduling.tolerations[{i}]",
                    )
                )
            seen.add(list_key)
    if old is not None:
        old_handler = old.get("handler") or ""
        if handler != old_handler:
            causes.append(_invalid("handler", handler, "field is immutable"))
    return causes


def _int_or_percent_causes(path: str, value: Any, *, at_most_100: bool) -> list[Cause]:
    """kube's ValidatePositiveIntOrPercent (and IsNotMoreThan100Percent when `at_most_100`) of an
    IntOrString: a count of at least 0 or a whole percentage. An absent value passes."""
    if isinstance(value, int) and value < 0:
        return [_invalid(path, value, "must be greater than or equal to 0")]
    if not isinstance(value, str):
        return []
    if not re.fullmatch(r"[0-9]+%", value):
        return [_invalid(path, value, _PERCENT_RULE)]
    if at_most_100 and int(value[:-1]) > 100:
        return [_invalid(path, value, "must not be greater than 100%")]
    return []


def _positive_int_or_percent(path: str, value: Any) -> list[Cause]:
    """A PodDisruptionBudget's minAvailable or maxUnavailable: an IntOrString of at most 100 %."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return [_invalid(path, value, "must be an integer or percentage (e.g '5%')")]
    return _int_or_percent_causes(path, value, at_most_100=True)


def _validate_pod_disruption_budget(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    least, most = spec.get("minAvailable"), spec.get("maxUnavailable")
    if least is not None and most is not None:
        causes.append(_invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
    if least is not None:
        causes.extend(_positive_int_or_percent("spec.minAvailable", least))
    if most is not None:
        causes.extend(_positive_int_or_percent("spec.maxUnavailable", most))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in ("IfHealthyBudget", "AlwaysAllow"):
        causes.append(
            _not_supported("spec.unhealthyPodEvictionPolicy", policy, ["AlwaysAllow", "IfHealthyBudget"])
        )
    selector = spec.get("selector")
    if selector is not None:
        try:
            match_selector_object(selector, {})
        except SelectorError as exc:
            causes.append(_invalid("spec.selector", selector, str(exc)))
    return causes


def _is_cidr(value: Any) -> bool:
    try:
        ipaddress.ip_network(str(value), strict=False)
    except ValueError:
        return False
    return "/" in str(value)


def is_ip(value: Any) -> bool:
    """Whether `value` is one IPv4 or IPv6 address."""
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return False
    return True


def _cel(path: str, kind: str, message: str) -> Cause:
    # How kube-apiserver words a failed x-kubernetes-validations rule: the value is shown by its type.
    return _invalid(path, kind, message)


_VIOLATION_REASONS = {
    "type": "FieldValueTypeInvalid",
    "required": "FieldValueRequired",
    "enum": "FieldValueNotSupported",
    "maxItems": "FieldValueTooMany",
    "maxLength": "FieldValueTooLong",
}
_BOUND_WORDS = {
    "minimum": "should be greater than or equal to {}",
    "maximum": "should be less than or equal to {}",
    "minItems": "should have at least {} items",
    "minLength": "should be at least {} chars long",
}
# What apiextensions-apiserver adds when a schema error keeps it from evaluating the CEL rules.
CEL_SKIPPED = Cause(
    "FieldValueInvalid",
    'Invalid value: "null": some validation rules were not checked because the object was invalid; '
    "correct the existing errors to complete validation",
    "<nil>",
)


def _violation_cause(v: Violation) -> Cause:
    if v.code == "type":
        return Cause(
            "FieldValueTypeInvalid",
            f'Invalid value: "{v.value}": {v.path} in body must be of type {v.limit}: "{v.value}"',
            v.path,
        )
    if v.code == "format":  # kube-openapi's InvalidType, with the value where a type error has its type
        return Cause(
            "FieldValueTypeInvalid",
            f"Invalid value: {_show(v.value)}: {v.path} in body must be of type {v.limit}: {_show(v.value)}",
            v.path,
        )
    if v.code == "pattern":
        return _invalid(v.path, v.value, f"{v.path} in body should match '{v.limit}'")
    if v.code == "required":
        return _required(v.path)
    if v.code == "enum":
        return _not_supported(v.path, v.value, [str(e) for e in v.limit])
    if v.code == "maxItems":
        return Cause("FieldValueTooMany", f"Too many: {v.value}: must have at most {v.limit} items", v.path)
    if v.code == "maxLength":  # field.TooLongMaxLength as kube 1.31 words it
        return Cause("FieldValueTooLong", f"Too long: may not be longer than {v.limit}", v.path)
    return _invalid(v.path, v.value, f"{v.path} in body " + _BOUND_WORDS[v.code].format(v.limit))


_ABSENT = object()
_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _value_at(obj: Any, path: str) -> Any:
    """The value a cause's field names (`spec.a[0].b`), or _ABSENT."""
    value = obj
    for name, index in _PATH_PART.findall(path):
        if index:
            if not isinstance(value, list) or int(index) >= len(value):
                return _ABSENT
            value = value[int(index)]
        elif isinstance(value, Mapping) and name in value:
            value = value[name]
        else:
            return _ABSENT
    return value


def _ratcheted(causes: list[Cause], obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    """kube's validation ratcheting of custom resources (on by default since 1.30): an update is not
    refused for what it left as it was, so an object stored under an older or laxer schema can still
    have its metadata and status written (a finalizer removed)."""
    if old is None:
        return causes
    return [c for c in causes if c.field == "<nil>" or _value_at(obj, c.field) != _value_at(old, c.field)]


def _schema_causes(
    obj: Mapping[str, Any], kind: str, old: Mapping[str, Any] | None
) -> tuple[list[Cause], bool]:
    """kube's errors for what a Kamaji object breaks of its CRD's schema, and whether one of them blocks
    the CEL rules (a wrong type, a missing required field, a value not in the enum, too many items or
    too long a string, as apiextensions-apiserver decides)."""
    schema = crd_schema(KAMAJI_GROUP, KAMAJI_VERSION, kind)
    if schema is None:
        return [], False
    causes = _ratcheted([_violation_cause(v) for v in violations(schema, obj)], obj, old)
    return causes, any(c.reason in _VIOLATION_REASONS.values() for c in causes)


def _custom_resource(
    kind: str, rules: Callable[[Mapping[str, Any], Mapping[str, Any] | None], list[Cause]]
) -> Callable[[Mapping[str, Any], Mapping[str, Any] | None], list[Cause]]:
    """A Kamaji kind's validation as apiextensions-apiserver runs it: the CRD's schema, then (unless a
    schema error blocks them) its CEL rules, both ratcheted on update."""

    def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        causes, blocking = _schema_causes(obj, kind, old)
        if blocking:
            return [*causes, CEL_SKIPPED]
        return [*causes, *_ratcheted(rules(obj, old), obj, old)]

    return validate


def _validate_tenant_control_plane(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    """The CEL rules of Kamaji's CRD for a TenantControlPlane (its schema is checked before them)."""
    causes: list[Cause] = []
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return [_required("spec")]
    service_type = ((spec.get("controlPlane") or {}).get("service") or {}).get("serviceType")
    network = spec.get("networkProfile") or {}
    for field_name, label in (("serviceCidr", "serviceCidr"), ("podCidr", "podCidr")):
        value = network.get(field_name)
        if value not in (None, "") and not _is_cidr(value):
            causes.append(
                _cel(f"spec.networkProfile.{field_name}", "string", f"{label} must be empty or a valid CIDR")
            )
    for field_name in ("serviceCidrs", "podCidrs"):
        if not all(_is_cidr(v) for v in network.get(field_name) or []):
            causes.append(
                _cel(
                    f"spec.networkProfile.{field_name}",
                    "array",
                    f"all {field_name} entries must be valid CIDRs",
                )
            )
    address = network.get("advertiseAddress")
    if address not in (None, "") and not is_ip(address):
        causes.append(
            _cel(
                "spec.networkProfile.advertiseAddress",
                "string",
                "advertiseAddress must be a valid IP address",
            )
        )
    if network.get("loadBalancerSourceRanges") and service_type != "LoadBalancer":
        causes.append(
            _cel(
                "spec",
                "object",
                "LoadBalancer source ranges are supported only with LoadBalancer service type",
            )
        )
    if network.get("loadBalancerClass") is not None and service_type != "LoadBalancer":
        causes.append(
            _cel("spec", "object", "LoadBalancerClass is supported only with LoadBalancer service type")
        )
    if old is not None:
        old_spec = old.get("spec") or {}
        for field_name in ("dataStore", "dataStoreSchema", "dataStoreUsername"):
            if field_name in old_spec and field_name not in spec:
                causes.append(_cel("spec", "object", f"unsetting the {field_name} is not supported"))
        for field_name in ("dataStoreSchema", "dataStoreUsername"):
            if field_name in old_spec and field_name in spec and spec[field_name] != old_spec[field_name]:
                causes.append(
                    _cel(f"spec.{field_name}", "string", f"changing the {field_name} is not supported")
                )
        old_domain = (old_spec.get("networkProfile") or {}).get("clusterDomain")
        if old_domain is not None and network.get("clusterDomain", old_domain) != old_domain:
            causes.append(
                _cel(
                    "spec.networkProfile.clusterDomain",
                    "string",
                    "changing the cluster domain is not supported",
                )
            )
    return causes


_KINE_DRIVERS = ("MySQL", "PostgreSQL", "NATS")
# Kamaji's CEL rules for an etcd DataStore: the path that must hold `secretReference` or `content`.
_ETCD_RULES = (
    ("tlsConfig.certificateAuthority.privateKey", "certificateAuthority privateKey"),
    ("tlsConfig.clientCertificate.certificate", "clientCertificate"),
    ("tlsConfig.clientCertificate.privateKey", "clientCertificate privateKey"),
)


def _cel_has_content(spec: Mapping[str, Any], path: str) -> bool | str:
    """`has(<path>.secretReference) || has(<path>.content)` in CEL: a bool, or the missing key that
    makes the rule's evaluation fail (CEL's `no such key`)."""
    value: Any = spec
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return part
        value = value[part]
    return isinstance(value, Mapping) and ("secretReference" in value or "content" in value)


def _validate_data_store(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    """The CEL rules of Kamaji's CRD for a DataStore, on the credentials each driver needs (its schema,
    with the driver enum where `sqlite` is the lab's, is checked before them)."""
    causes: list[Cause] = []
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return causes
    driver = spec.get("driver")
    if driver == "etcd":
        for path, what in _ETCD_RULES:
            message = f"{what} must have secretReference or content when driver is etcd"
            found = _cel_has_content(spec, path)
            if isinstance(found, str):
                causes.append(_cel("spec", "object", f"no such key: {found} evaluating rule: {message}"))
            elif not found:
                causes.append(_cel("spec", "object", message))
    elif driver in _KINE_DRIVERS and "tlsConfig" not in spec and "basicAuth" not in spec:
        causes.append(
            _cel("spec", "object", "When driver is not etcd, either tlsConfig or basicAuth must be provided")
        )
    return causes


def _validate_deployment(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, *, opts: PodOptions = _PLAIN
) -> list[Cause]:
    causes = _validate_replicated(obj, old, opts=opts)
    strategy = (obj.get("spec") or {}).get("strategy") or {}
    kind = strategy.get("type")
    if kind not in ("RollingUpdate", "Recreate"):
        causes.append(_not_supported("spec.strategy.type", kind, ["Recreate", "RollingUpdate"]))
    elif kind == "Recreate" and strategy.get("rollingUpdate"):
        causes.append(
            _forbidden(
                "spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"
            )
        )
    elif kind == "RollingUpdate":
        rolling = strategy.get("rollingUpdate") or {}
        bad = False
        for name in ("maxSurge", "maxUnavailable"):
            path = f"spec.strategy.rollingUpdate.{name}"
            found = _int_or_percent_causes(path, rolling.get(name), at_most_100=name == "maxUnavailable")
            causes.extend(found)
            bad = bad or bool(found)
        if not bad and rolling.get("maxSurge") in (0, "0%") and rolling.get("maxUnavailable") in (0, "0%"):
            causes.append(
                _invalid(
                    "spec.strategy.rollingUpdate.maxUnavailable",
                    rolling.get("maxUnavailable"),
                    "may not be 0 when `maxSurge` is 0",
                )
            )
    return causes


_PERCENT_RULE = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', "
    "regex used for validation is '[0-9]+%')"
)


def _validate_node(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    spec = obj.get("spec") or {}
    for i, taint in enumerate(spec.get("taints") or []):
        if not taint.get("key"):
            causes.append(_required(f"spec.taints[{i}].key"))
        effect = taint.get("effect")
        if not effect:
            causes.append(_required(f"spec.taints[{i}].effect"))
        elif effect not in _TAINT_EFFECTS:
            causes.append(_not_supported(f"spec.taints[{i}].effect", effect, _TAINT_EFFECTS))
    status = obj.get("status") or {}
    old_status = (old or {}).get("status") or {}
    for section in ("capacity", "allocatable"):
        amounts = status.get(section) or {}
        if old is not None and amounts == (old_status.get(section) or {}):
            continue  # unchanged since it passed (the node lock's updates touch annotations only)
        for name, value in amounts.items():
            _quantity(f"status.{section}[{name}]", value, causes)
    return causes


_SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]


def _validate_service(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    spec = obj.get("spec") or {}
    service_type = spec.get("type", "ClusterIP")
    if service_type not in _SERVICE_TYPES:
        causes.append(_not_supported("spec.type", service_type, _SERVICE_TYPES))
    ports = spec.get("ports") or []
    headless = spec.get("clusterIP") == "None"
    if not ports and service_type != "ExternalName" and not headless:
        causes.append(_required("spec.ports"))
    names: set[str] = set()
    seen: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ports):
        path = f"spec.ports[{i}]"
        pname = port.get("name") or ""
        if len(ports) > 1 and not pname:
            causes.append(_required(f"{path}.name"))
        if pname:
            if pname in names:
                causes.append(_duplicate(f"{path}.name", pname))
            causes.extend(_invalid(f"{path}.name", pname, e) for e in _dns_label_errors(pname))
            names.add(pname)
        number = port.get("port")
        if not isinstance(number, int) or not 1 <= number <= 65535:
            causes.append(_invalid(f"{path}.port", number, "must be between 1 and 65535, inclusive"))
        protocol = port.get("protocol", "TCP")
        if protocol not in ("TCP", "UDP", "SCTP"):
            causes.append(_not_supported(f"{path}.protocol", protocol, ["SCTP", "TCP", "UDP"]))
        if (number, protocol) in seen:
            causes.append(_duplicate(path, {"port": number, "protocol": protocol}))
        seen.add((number, protocol))
        target = port.get("targetPort")
        if isinstance(target, int):
            if not 1 <= target <= 65535:
                causes.append(
                    _invalid(f"{path}.targetPort", target, "must be between 1 and 65535, inclusive")
                )
        elif isinstance(target, str) and (not _IANA_SVC_NAME.match(target) or len(target) > 15):
            causes.append(
                _invalid(
                    f"{path}.targetPort",
                    target,
                    "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                )
            )
    return causes


_QUOTA_NAMES = frozenset(
    {
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_QUOTA_PREFIXES = ("requests.", "limits.", "count/")


def _validate_resource_quota(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    spec = obj.get("spec") or {}
    hard = spec.get("hard") or {}
    # Quota-only names (object counts, requests./limits. prefixes) are standard too.
    rest = {k: v for k, v in hard.items() if k not in _QUOTA_NAMES and not k.startswith(_QUOTA_PREFIXES)}
    _validate_resource_names("spec.hard", rest, causes, "must be a standard resource type or fully qualified")
    for name, value in hard.items():
        _quantity(f"spec.hard[{name}]", value, causes)
    scopes = [
        "Terminating",
        "NotTerminating",
        "BestEffort",
        "NotBestEffort",
        "PriorityClass",
        "CrossNamespacePodAffinity",
    ]
    for i, scope in enumerate(spec.get("scopes") or []):
        if scope not in scopes:
            causes.append(_not_supported(f"spec.scopes[{i}]", scope, scopes))
    return causes


_ADDRESS_TYPES = ("IPv4", "IPv6", "FQDN")


def _validate_endpoint_slice(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    """ValidateEndpointSlice's main rules: a supported, immutable addressType, 1-100 addresses of that
    type per endpoint, ports with a protocol kube knows."""
    causes: list[Cause] = []
    kind = obj.get("addressType")
    if not kind:
        causes.append(_required("addressType"))
    elif kind not in _ADDRESS_TYPES:
        causes.append(_not_supported("addressType", kind, list(_ADDRESS_TYPES)))
    elif old is not None and old.get("addressType") != kind:
        causes.append(_invalid("addressType", kind, "field is immutable"))
    for i, endpoint in enumerate(obj.get("endpoints") or []):
        addresses = (endpoint or {}).get("addresses") or []
        path = f"endpoints[{i}].addresses"
        if not addresses:
            causes.append(_required(path, "must contain at least 1 address"))
        elif len(addresses) > 100:
            causes.append(
                Cause("FieldValueTooMany", f"Too many: {len(addresses)}: must have at most 100 items", path)
            )
        for j, address in enumerate(addresses):
            version = 4 if kind == "IPv4" else 6 if kind == "IPv6" else 0
            if version and not (is_ip(address) and ipaddress.ip_address(str(address)).version == version):
                causes.append(_invalid(f"{path}[{j}]", address, f"must be a valid IPv{version} address"))
    for i, port in enumerate(obj.get("ports") or []):
        protocol = (port or {}).get("protocol")
        if protocol is not None and protocol not in ("TCP", "UDP", "SCTP"):
            causes.append(_not_supported(f"ports[{i}].protocol", protocol, ["SCTP", "TCP", "UDP"]))
    return causes


_LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")


def _validate_limit_range(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    """ValidateLimitRange: known (or qualified) types, resource names and quantities, and for each
    resource min <= defaultRequest <= default <= max, a ratio of at least 1 that min and max allow."""
    causes: list[Cause] = []
    limits = (obj.get("spec") or {}).get("limits") or []
    if not isinstance(limits, list):
        return [_invalid("spec.limits", limits, "must be a list")]
    for i, item in enumerate(limits):
        path = f"spec.limits[{i}]"
        if not isinstance(item, dict):
            causes.append(_invalid(path, item, "must be an object"))
            continue
        kind = item.get("type") or ""
        type_errors = qualified_name_errors(kind) if isinstance(kind, str) else ["must be a string"]
        causes.extend(_invalid(f"{path}.type", kind, e) for e in type_errors)
        if not type_errors and "/" not in kind and kind not in _LIMIT_TYPES:
            causes.append(_invalid(f"{path}.type", kind, "must be a standard limit type or fully qualified"))
        values: dict[str, dict[str, Decimal]] = {}
        for key in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            given = item.get(key) or {}
            if kind == "Pod" and key in ("default", "defaultRequest") and given:
                causes.append(_forbidden(f"{path}.{key}", "may not be specified when `type` is 'Pod'"))
                continue
            if kind in ("Pod", "Container"):
                _validate_resource_names(f"{path}.{key}", given, causes)
            else:
                _validate_resource_names(
                    f"{path}.{key}", given, causes, "must be a standard resource type or fully qualified"
                )
            values[key] = {}
            for name, value in given.items():
                amount = _quantity(f"{path}.{key}[{name}]", value, causes)
                if amount is not None:
                    values[key][name] = amount
        if (
            kind == "PersistentVolumeClaim"
            and "storage" not in values["min"]
            and "storage" not in values["max"]
        ):
            causes.append(
                _required(
                    f"{path}.limits",
                    "either minimum or maximum storage value is required, but neither was provided",
                )
            )
        causes.extend(_limit_range_item_bounds(path, item, values))
    return causes


def _limit_range_item_bounds(
    path: str, item: Mapping[str, Any], values: dict[str, dict[str, Decimal]]
) -> list[Cause]:
    """The order a LimitRange item's quantities of one resource must keep, in kube's words."""
    causes: list[Cause] = []
    low, high = values.get("min", {}), values.get("max", {})
    default, request = values.get("default", {}), values.get("defaultRequest", {})
    ratios = values.get("maxLimitRequestRatio", {})

    def shown(key: str, name: str) -> str:
        return str(canonical_or_same((item.get(key) or {})[name]))

    for name in sorted(set().union(*values.values())):
        at = f"[{name}]"
        if name in low and name in high and low[name] > high[name]:
            causes.append(
                _invalid(
                    f"{path}.min{at}",
                    shown("min", name),
                    f"min value {shown('min', name)} is greater than max value {shown('max', name)}",
                )
            )
        if name in request and name in low and low[name] > request[name]:
            causes.append(
                _invalid(
                    f"{path}.defaultRequest{at}",
                    shown("defaultRequest", name),
                    f"min value {shown('min', name)} is greater than default request value {shown('defaultRequest', name)}",
                )
            )
        if name in request and name in high and request[name] > high[name]:
            causes.append(
                _invalid(
                    f"{path}.defaultRequest{at}",
                    shown("defaultRequest", name),
                    f"default request value {shown('defaultRequest', name)} is greater than max value {shown('max', name)}",
                )
            )
        if name in request and name in default and request[name] > default[name]:
            causes.append(
                _invalid(
                    f"{path}.defaultRequest{at}",
                    shown("defaultRequest", name),
                    f"default request value {shown('defaultRequest', name)} is greater than default limit value {shown('default', name)}",
                )
            )
        if name in default and name in low and low[name] > default[name]:
            causes.append(
                _invalid(
                    f"{path}.default{at}",
                    shown("min", name),
                    f"min value {shown('min', name)} is greater than default value {shown('default', name)}",
                )
            )
        if name in default and name in high and default[name] > high[name]:
            causes.append(
                _invalid(
                    f"{path}.default{at}",
                    shown("max", name),
                    f"default value {shown('default', name)} is greater than max value {shown('max', name)}",
                )
            )
        if name in ratios and ratios[name] < 1:
            shown_ratio = shown("maxLimitRequestRatio", name)
            causes.append(
                _invalid(
                    f"{path}.maxLimitRequestRatio{at}", shown_ratio, f"ratio {shown_ratio} is less than 1"
                )
            )
        if name in ratios and name in low and name in high and low[name] > 0:
            allowed = high[name] / low[name]
            if ratios[name] > allowed:
                shown_ratio = shown("maxLimitRequestRatio", name)
                causes.append(
                    _invalid(
                        f"{path}.maxLimitRequestRatio{at}",
                        shown_ratio,
                        f"ratio {shown_ratio} is greater than max/min = {float(allowed):f}",
                    )
                )
        # extended resources (GPUs) are not overcommitted: a default limit and request must agree
        if (
            _is_extended_resource(name)
            and name in default
            and name in request
            and default[name] != request[name]
        ):
            causes.append(
                _invalid(
                    f"{path}.defaultRequest{at}",
                    shown("defaultRequest", name),
                    f"default value {shown('default', name)} must equal to defaultRequest value {shown('defaultRequest', name)} in {name}",
                )
            )
    return causes


def _validate_lease(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    spec = obj.get("spec") or {}
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or duration <= 0):
        causes.append(_invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if transitions is not None and (not isinstance(transitions, int) or transitions < 0):
        causes.append(_invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0"))
    return causes


def _validate_event(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    meta = obj.get("metadata") or {}
    involved = obj.get("involvedObject") or {}
    involved_ns = involved.get("namespace") or ""
    if involved_ns and involved_ns != (meta.get("namespace") or ""):
        causes.append(_invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
    event_type = obj.get("type")
    if event_type and event_type not in ("Normal", "Warning"):
        causes.append(_not_supported("type", event_type, ["Normal", "Warning"]))
    return causes


def _validate_data_keys(path: str, data: Mapping[str, Any], causes: list[Cause]) -> None:
    for key in data:
        causes.extend(_invalid(path, key, e) for e in config_key_errors(key))


def _validate_secret(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    data = obj.get("data") or {}
    _validate_data_keys("data", data, causes)
    _validate_data_keys("stringData", obj.get("stringData") or {}, causes)
    total = 0
    for key, value in data.items():
        try:
            total += len(base64.b64decode(str(value), validate=True))
        except (binascii.Error, ValueError):
            causes.append(_invalid(f"data[{key}]", "<secret contents redacted>", "illegal base64 data"))
    if total > 1024 * 1024:
        causes.append(_too_long("data", 1024 * 1024))
    if old is not None and old.get("immutable") and (obj.get("data") != old.get("data")):
        causes.append(_forbidden("data", "field is immutable when `immutable` is set"))
    if old is not None and (old.get("type") or "Opaque") != (obj.get("type") or "Opaque"):
        causes.append(_invalid("type", obj.get("type"), "field is immutable"))
    return causes


def _validate_config_map(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    data = obj.get("data") or {}
    binary = obj.get("binaryData") or {}
    _validate_data_keys("data", data, causes)
    _validate_data_keys("binaryData", binary, causes)
    causes.extend(_duplicate("data", key) for key in data if key in binary)
    size = sum(len(k) + len(str(v)) for k, v in data.items()) + sum(
        len(k) + len(str(v)) for k, v in binary.items()
    )
    if size > 1024 * 1024:
        causes.append(_too_long("", 1024 * 1024))
    if (
        old is not None
        and old.get("immutable")
        and (data != old.get("data") or binary != old.get("binaryData"))
    ):
        causes.append(_forbidden("data", "field is immutable when `immutable` is set"))
    return causes


_OPERATIONS = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]


def _validate_webhooks(
    mutating: bool,
) -> Callable[[Mapping[str, Any], Mapping[str, Any] | None], list[Cause]]:
    def check(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        causes: list[Cause] = []
        names: set[str] = set()
        for i, hook in enumerate(obj.get("webhooks") or []):
            path = f"webhooks[{i}]"
            name = hook.get("name") or ""
            if not name:
                causes.append(_required(f"{path}.name"))
            else:
                causes.extend(_invalid(f"{path}.name", name, e) for e in _dns_subdomain_errors(name))
                if name.count(".") < 2:
                    causes.append(
                        _invalid(
                            f"{path}.name",
                            name,
                            "should be a domain with at least three segments separated by dots",
                        )
                    )
                if name in names:
                    causes.append(_duplicate(f"{path}.name", name))
                names.add(name)
            causes.extend(_validate_client_config(f"{path}.clientConfig", hook.get("clientConfig") or {}))
            side_effects = hook.get("sideEffects")
            if side_effects is None:
                causes.append(_required(f"{path}.sideEffects", "must specify one of None, NoneOnDryRun"))
            elif side_effects not in ("None", "NoneOnDryRun"):
                causes.append(_not_supported(f"{path}.sideEffects", side_effects, ["None", "NoneOnDryRun"]))
            versions = hook.get("admissionReviewVersions") or []
            if not versions:
                causes.append(_required(f"{path}.admissionReviewVersions", "must specify one of v1, v1beta1"))
            elif not any(v in ("v1", "v1beta1") for v in versions):
                causes.append(
                    _invalid(
                        f"{path}.admissionReviewVersions",
                        versions,
                        "must include at least one of v1, v1beta1",
                    )
                )
            enums = {"failurePolicy": ["Fail", "Ignore"], "matchPolicy": ["Equivalent", "Exact"]}
            if mutating:
                enums["reinvocationPolicy"] = ["IfNeeded", "Never"]
            for field_name, allowed in enums.items():
                value = hook.get(field_name)
                if value is not None and value not in allowed:
                    causes.append(_not_supported(f"{path}.{field_name}", value, allowed))
            timeout = hook.get("timeoutSeconds")
            if timeout is not None and (not isinstance(timeout, int) or not 1 <= timeout <= 30):
                causes.append(
                    _invalid(
                        f"{path}.timeoutSeconds",
                        timeout,
                        "the timeout value must be between 1 and 30 seconds",
                    )
                )
            for j, rule in enumerate(hook.get("rules") or []):
                rpath = f"{path}.rules[{j}]"
                operations = rule.get("operations") or []
                if not operations:
                    causes.append(_required(f"{rpath}.operations"))
                for k, op in enumerate(operations):
                    if op not in _OPERATIONS:
                        causes.append(_not_supported(f"{rpath}.operations[{k}]", op, _OPERATIONS))
                for key in ("apiGroups", "apiVersions", "resources"):
                    if not rule.get(key):
                        causes.append(_required(f"{rpath}.{key}"))
                scope = rule.get("scope")
                if scope is not None and scope not in ("*", "Cluster", "Namespaced"):
                    causes.append(_not_supported(f"{rpath}.scope", scope, ["*", "Cluster", "Namespaced"]))
        return causes

    return check


def _validate_client_config(path: str, config: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    url = config.get("url")
    service = config.get("service")
    if (url is None) == (service is None):
        causes.append(_required(path, "exactly one of url or service is required"))
    if url is not None:
        scheme, _, rest = str(url).partition("://")
        if scheme != "https":
            causes.append(_invalid(f"{path}.url", scheme, "'https' is the only allowed URL scheme"))
        elif not rest or rest.startswith("/"):
            causes.append(_invalid(f"{path}.url", url, "host must be specified"))
    if service is not None:
        if not service.get("namespace"):
            causes.append(_required(f"{path}.service.namespace", "service namespace is required"))
        if not service.get("name"):
            causes.append(_required(f"{path}.service.name", "service name is required"))
        port = service.get("port")
        if port is not None and (not isinstance(port, int) or not 1 <= port <= 65535):
            causes.append(
                _invalid(
                    f"{path}.service.port", port, "port is not valid: must be between 1 and 65535, inclusive"
                )
            )
        svc_path = service.get("path")
        if svc_path is not None and not str(svc_path).startswith("/"):
            causes.append(_invalid(f"{path}.service.path", svc_path, "must start with a '/'"))
    return causes


def _validate_namespace(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    for i, finalizer in enumerate((obj.get("spec") or {}).get("finalizers") or []):
        causes.extend(
            _invalid(f"spec.finalizers[{i}]", finalizer, e) for e in qualified_name_errors(finalizer)
        )
    return causes


def _validate_binding(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    target = obj.get("target") or {}
    kind = target.get("kind") or ""
    if kind and kind != "Node":
        # kube only binds pods to nodes
        causes.append(_not_supported("target.kind", kind, ["Node", "<empty>"]))
    if not target.get("name"):
        causes.append(_required("target.name"))
    return causes


def _validate_access_review(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    spec = obj.get("spec") or {}
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if (resource is None) == (non_resource is None):
        shown = "null" if resource is None else json.dumps(resource, separators=(",", ":"))
        return [
            _invalid(
                "spec.resourceAttributes",
                shown,
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )
        ]
    return []


_POD_SPEC_CHECKS: dict[str, Callable[..., list[Cause]]] = {
    "Pod": _validate_pod,
    "Job": _validate_job,
    "CronJob": _validate_cron_job,
    "Deployment": _validate_deployment,
    "ReplicaSet": _validate_replicated,
    "DaemonSet": _validate_daemon_set,
    "StatefulSet": _validate_stateful_set,
}

_KIND_CHECKS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any] | None], list[Cause]]] = {
    **_POD_SPEC_CHECKS,
    "RoleBinding": functools.partial(_validate_binding_role, namespaced=True),
    "ClusterRoleBinding": functools.partial(_validate_binding_role, namespaced=False),
    "PriorityClass": _validate_priority_class,
    "PodDisruptionBudget": _validate_pod_disruption_budget,
    "PersistentVolume": validate_persistent_volume,
    "StorageClass": validate_storage_class,
    "RuntimeClass": _validate_runtime_class,
    "TenantControlPlane": _custom_resource("TenantControlPlane", _validate_tenant_control_plane),
    "DataStore": _custom_resource("DataStore", _validate_data_store),
    "ControllerRevision": _validate_controller_revision,
    "Binding": _validate_binding,
    "SelfSubjectAccessReview": _validate_access_review,
    "Node": _validate_node,
    "Namespace": _validate_namespace,
    "Service": _validate_service,
    "ResourceQuota": _validate_resource_quota,
    "LimitRange": _validate_limit_range,
    "EndpointSlice": _validate_endpoint_slice,
    "Lease": _validate_lease,
    "Event": _validate_event,
    "Secret": _validate_secret,
    "ConfigMap": _validate_config_map,
    "MutatingWebhookConfiguration": _validate_webhooks(mutating=True),
    "ValidatingWebhookConfiguration": _validate_webhooks(mutating=False),
}

# Kinds whose rules differ by release: given the tenant's (None: the newest rules).
_RELEASE_CHECKS: dict[
    str, Callable[[Mapping[str, Any], Mapping[str, Any] | None, int | None], list[Cause]]
] = {
    "PersistentVolumeClaim": validate_persistent_volume_claim,
}
