"""Validation of PersistentVolumeClaims, PersistentVolumes and StorageClasses in kube-apiserver's words.

The rules a user meets, from kubernetes/kubernetes v1.33 `pkg/apis/core/validation/validation.go`
(ValidatePersistentVolumeClaimSpec, ValidatePersistentVolumeClaimUpdate, ValidatePersistentVolumeSpec,
ValidatePersistentVolumeUpdate) and `pkg/apis/storage/validation/validation.go` (ValidateStorageClass,
ValidateStorageClassUpdate), with the release differences of 1.27-1.33 that show: the PVC update
message names volumeAttributesClassName from 1.29 on, and from 1.32 a bound claim may shrink its
request back towards its status (RecoverVolumeExpansionFailure). Where kube appends a Go diff of the
spec to an immutability error, the changed fields are named instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from tenantgpu.apiserver import featuregates
from tenantgpu.apiserver.dnsnames import dns_subdomain_errors
from tenantgpu.apiserver.fielderrors import (
    Cause,
    diff_lines,
    forbidden,
    invalid,
    not_supported,
    required,
    too_long,
)
from tenantgpu.apiserver.fieldversions import LATEST
from tenantgpu.apiserver.podvolumes import PERSISTENT_VOLUME_SOURCES, persistent_volume_source_causes
from tenantgpu.apiserver.quantity import QuantityError, canonical_or_same, parse_quantity
from tenantgpu.apiserver.selectors import SelectorError, match_selector_object, qualified_name_errors
from tenantgpu.gpushare.volumes import ANN_BETA_STORAGE_CLASS

__all__ = [
    "validate_persistent_volume",
    "validate_persistent_volume_claim",
    "validate_storage_class",
]

# Listed as kube lists them in an Unsupported value error (sorted).
_ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]
_VOLUME_MODES = ["Block", "Filesystem"]
_PV_RECLAIM_POLICIES = ["Delete", "Recycle", "Retain"]
_CLASS_RECLAIM_POLICIES = ["Delete", "Retain"]
_BINDING_MODES = ["Immediate", "WaitForFirstConsumer"]
_NOT_POSITIVE = "must be greater than zero"
_QUANTITY_FORM = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def _amount(value: Any) -> Decimal | None:
    try:
        return parse_quantity(value)
    except (QuantityError, TypeError):
        return None


def _access_modes(modes: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    once_pod = other = False
    for mode in modes if isinstance(modes, list) else []:
        if mode not in _ACCESS_MODES:
            causes.append(not_supported(path, mode, _ACCESS_MODES))
        elif mode == "ReadWriteOncePod":
            once_pod = True
        else:
            other = True
    if once_pod and other:
        causes.append(forbidden(path, "may not use ReadWriteOncePod with other access modes"))
    return causes


def _class_name(value: Any, path: str) -> list[Cause]:
    return [invalid(path, value, e) for e in dns_subdomain_errors(str(value))] if value else []


def _positive_storage(value: Any, path: str) -> list[Cause]:
    amount = _amount(value)
    if amount is None:
        return [invalid(path, value, _QUANTITY_FORM)]
    return [invalid(path, str(canonical_or_same(value)), _NOT_POSITIVE)] if amount <= 0 else []


def _claim_spec(spec: Mapping[str, Any]) -> list[Cause]:
    """ValidatePersistentVolumeClaimSpec."""
    causes: list[Cause] = []
    if not spec.get("accessModes"):
        causes.append(required("spec.accessModes", "at least 1 access mode is required"))
    selector = spec.get("selector")
    if selector is not None:
        try:
            match_selector_object(selector, {})
        except SelectorError as exc:
            causes.append(invalid("spec.selector", selector, str(exc)))
    causes += _access_modes(spec.get("accessModes"), "spec.accessModes")
    requests = (spec.get("resources") or {}).get("requests") or {}
    if "storage" not in requests:
        causes.append(required("spec.resources[storage]"))
    else:
        causes += _positive_storage(requests["storage"], "spec.resources[storage]")
    causes += _class_name(spec.get("storageClassName"), "spec.storageClassName")
    mode = spec.get("volumeMode")
    if mode is not None and mode not in _VOLUME_MODES:
        causes.append(not_supported("spec.volumeMode", mode, _VOLUME_MODES))
    for key in ("dataSource", "dataSourceRef"):
        source = spec.get(key)
        if isinstance(source, Mapping):
            for field in ("name", "kind"):
                if not source.get(field):
                    causes.append(required(f"spec.{key}.{field}"))
            if not source.get("apiGroup") and source.get("kind") != "PersistentVolumeClaim":
                causes.append(
                    invalid(
                        f"spec.{key}",
                        source.get("kind") or "",
                        "must be 'PersistentVolumeClaim' when referencing the default apiGroup",
                    )
                )
    causes += _class_name(spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName")
    return causes


def _claim_update_message(minor: int) -> str:
    bound = "resources.requests and volumeAttributesClassName" if minor >= 29 else "resources.requests"
    return f"spec is immutable after creation except {bound} for bound claims"


def validate_persistent_volume_claim(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, minor: int | None = None
) -> list[Cause]:
    """A claim's spec, and on an update what may change of it: the volume name once (the binder's),
    the class once from none, and for a bound claim its storage request (never below what it was, or
    from 1.32 no lower than the capacity it has)."""
    release = LATEST if minor is None else minor
    spec = obj.get("spec") or {}
    causes = _claim_spec(spec)
    if old is None:
        return causes
    old_spec = old.get("spec") or {}
    old_annotations = (old.get("metadata") or {}).get("annotations") or {}
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if annotations.get(ANN_BETA_STORAGE_CLASS) != old_annotations.get(ANN_BETA_STORAGE_CLASS):
        causes.append(
            invalid(
                f"metadata.annotations[{ANN_BETA_STORAGE_CLASS}]",
                annotations.get(ANN_BETA_STORAGE_CLASS, ""),
                "field is immutable",
            )
        )
    # The fields allowed to change are given the old value in a view of the new spec, which must then
    # equal the old one.
    view = dict(spec)
    if not old_spec.get("volumeName"):
        _set_or_drop(view, "volumeName", old_spec.get("volumeName"))
    if old_spec.get("storageClassName") is None and spec.get("storageClassName") is not None:
        beta = old_annotations.get(ANN_BETA_STORAGE_CLASS)
        if beta is None or beta == spec.get("storageClassName"):
            view.pop("storageClassName", None)
    bound = (obj.get("status") or {}).get("phase") == "Bound"
    if bound:
        requests = dict((view.get("resources") or {}).get("requests") or {})
        if "storage" in requests or "storage" in ((old_spec.get("resources") or {}).get("requests") or {}):
            _set_or_drop(
                requests, "storage", ((old_spec.get("resources") or {}).get("requests") or {}).get("storage")
            )
            view["resources"] = {**(view.get("resources") or {}), "requests": requests}
        if release >= 29 and view.get("volumeAttributesClassName") is not None:
            _set_or_drop(view, "volumeAttributesClassName", old_spec.get("volumeAttributesClassName"))
    if view != dict(old_spec):
        message = _claim_update_message(release) + "\n" + diff_lines(old_spec, view, "spec")
        causes.append(forbidden("spec", message))
    old_size = _amount(((old_spec.get("resources") or {}).get("requests") or {}).get("storage", 0))
    new_size = _amount(((spec.get("resources") or {}).get("requests") or {}).get("storage", 0))
    if old_size is not None and new_size is not None and new_size < old_size:
        path = "spec.resources.requests.storage"
        if not featuregates.enabled("RecoverVolumeExpansionFailure", release):
            causes.append(forbidden(path, "field can not be less than previous value"))
        else:
            capacity = _amount(((old.get("status") or {}).get("capacity") or {}).get("storage", 0))
            if capacity is not None and new_size <= capacity:
                causes.append(forbidden(path, "field can not be less than status.capacity"))
    if spec.get("volumeMode") != old_spec.get("volumeMode"):
        causes.append(invalid("volumeMode", spec.get("volumeMode"), "field is immutable"))
    attributes, old_attributes = (
        spec.get("volumeAttributesClassName"),
        old_spec.get("volumeAttributesClassName"),
    )
    if attributes != old_attributes and not featuregates.enabled("VolumeAttributesClass", release):
        causes.append(
            forbidden(
                "spec.volumeAttributesClassName",
                "update is forbidden when the VolumeAttributesClass feature gate is disabled",
            )
        )
    return causes


def _set_or_drop(target: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value


def _capacity(capacity: Any) -> list[Cause]:
    causes: list[Cause] = []
    if not capacity:
        causes.append(required("spec.capacity"))
    if not isinstance(capacity, Mapping) or "storage" not in capacity or len(capacity) > 1:
        # kube prints the Go value of the map here; an absent one is its nil.
        shown = "core.ResourceList(nil)" if capacity is None else f"core.ResourceList{_go_map(capacity)}"
        causes.append(
            Cause(
                "FieldValueNotSupported",
                f'Unsupported value: {shown}: supported values: "storage"',
                "spec.capacity",
            )
        )
    if isinstance(capacity, Mapping):
        for name, value in capacity.items():
            causes += _positive_storage(value, f"spec.capacity[{name}]")
    return causes


def _go_map(value: Any) -> str:
    if not isinstance(value, Mapping):
        return "{}"
    return "{" + ", ".join(f'"{k}":"{v}"' for k, v in value.items()) + "}"


def _node_affinity(affinity: Any) -> list[Cause]:
    if not isinstance(affinity, Mapping):
        return []
    required_terms = affinity.get("required")
    if required_terms is None:
        return [required("spec.nodeAffinity.required", "must specify required node constraints")]
    terms = required_terms.get("nodeSelectorTerms") if isinstance(required_terms, Mapping) else None
    if not terms:
        return [
            required(
                "spec.nodeAffinity.required.nodeSelectorTerms", "must have at least one node selector term"
            )
        ]
    return []


def validate_persistent_volume(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    """A volume's spec: access modes, a storage capacity, one valid source (a `local` one with node
    affinity), a known reclaim policy and volume mode; on an update its source, volume mode and node
    affinity stay."""
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    if not spec.get("accessModes"):
        causes.append(required("spec.accessModes"))
    causes += _access_modes(spec.get("accessModes"), "spec.accessModes")
    causes += _capacity(spec.get("capacity"))
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy and policy not in _PV_RECLAIM_POLICIES:
        causes.append(not_supported("spec.persistentVolumeReclaimPolicy", policy, _PV_RECLAIM_POLICIES))
    affinity = spec.get("nodeAffinity")
    causes += _node_affinity(affinity)
    causes += persistent_volume_source_causes(spec, "spec", node_affinity=isinstance(affinity, Mapping))
    host_path = spec.get("hostPath")
    if (
        isinstance(host_path, Mapping)
        and policy == "Recycle"
        and _clean(str(host_path.get("path") or "")) == "/"
    ):
        causes.append(
            forbidden(
                "spec.persistentVolumeReclaimPolicy", "may not be 'recycle' for a hostPath mount of '/'"
            )
        )
    causes += _class_name(spec.get("storageClassName"), "spec.storageClassName")
    mode = spec.get("volumeMode")
    if mode is not None and mode not in _VOLUME_MODES:
        causes.append(not_supported("spec.volumeMode", mode, _VOLUME_MODES))
    if old is None:
        return causes
    old_spec = old.get("spec") or {}
    source = {k: v for k, v in spec.items() if k in PERSISTENT_VOLUME_SOURCES}
    old_source = {k: v for k, v in old_spec.items() if k in PERSISTENT_VOLUME_SOURCES}
    if source != old_source:
        message = "spec.persistentvolumesource is immutable after creation\n" + diff_lines(
            old_source, source, "spec"
        )
        causes.append(forbidden("spec.persistentvolumesource", message))
    if mode != old_spec.get("volumeMode"):
        causes.append(invalid("volumeMode", mode, "field is immutable"))
    if old_spec.get("nodeAffinity") is not None and affinity != old_spec.get("nodeAffinity"):
        causes.append(invalid("nodeAffinity", affinity, "field is immutable"))
    return causes


def _clean(path: str) -> str:
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return "/" + "/".join(parts) if path.startswith("/") else "/".join(parts)


def validate_storage_class(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    """A class's provisioner (a qualified name), parameters, reclaim policy and binding mode; on an
    update none of these four may change."""
    causes: list[Cause] = []
    provisioner = obj.get("provisioner")
    if not provisioner:
        causes.append(required("provisioner"))
    else:
        lowered = str(provisioner).lower()
        causes += [invalid("provisioner", lowered, e) for e in qualified_name_errors(lowered)]
    parameters = obj.get("parameters") or {}
    if isinstance(parameters, Mapping):
        if len(parameters) > 512:
            causes.append(too_long("parameters", 512))
        causes += [invalid("parameters", "", "field can not be empty.") for key in parameters if not key]
    policy = obj.get("reclaimPolicy")
    if policy and policy not in _CLASS_RECLAIM_POLICIES:
        causes.append(not_supported("reclaimPolicy", policy, _CLASS_RECLAIM_POLICIES))
    mode = obj.get("volumeBindingMode")
    if mode is None:
        causes.append(required("volumeBindingMode"))
    elif mode not in _BINDING_MODES:
        causes.append(not_supported("volumeBindingMode", mode, _BINDING_MODES))
    if old is None:
        return causes
    if (obj.get("parameters") or {}) != (old.get("parameters") or {}):
        causes.append(forbidden("parameters", "updates to parameters are forbidden."))
    if provisioner != old.get("provisioner"):
        causes.append(forbidden("provisioner", "updates to provisioner are forbidden."))
    if policy != old.get("reclaimPolicy"):
        causes.append(forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden."))
    if mode != old.get("volumeBindingMode"):
        causes.append(invalid("volumeBindingMode", mode, "field is immutable"))
    return causes
