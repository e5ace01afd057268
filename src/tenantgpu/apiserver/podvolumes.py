"""kube's validation of a pod's volumes and of its containers' mounts of them (validation.go's
ValidateVolumes, validateVolumeSource and ValidateVolumeMounts), with kube's field paths and words.

A volume with any error is left out of the names its mounts may use, as kube does, so a mount of it
reports `Not found` too.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tenantgpu.apiserver.dnsnames import dns_label_errors, dns_subdomain_errors
from tenantgpu.apiserver.downwardapi import VOLUME_FIELD_PATHS, object_field_causes, resource_field_causes
from tenantgpu.apiserver.fielderrors import (
    Cause,
    duplicate,
    forbidden,
    invalid,
    not_found,
    not_supported,
    required,
    too_long,
)
from tenantgpu.apiserver.quantity import QuantityError, parse_quantity

_FILE_MODE = "must be a number between 0 and 0777 (octal), both inclusive"
_ONE_TYPE = "may not specify more than 1 volume type"
_HOST_PATH_TYPES = [
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
]


def _has_backsteps(target: str) -> bool:
    # kube splits on the apiserver's path separator (filepath.ToSlash): on Linux only '/'
    return ".." in target.split("/")


def _no_backsteps(target: str, path: str) -> list[Cause]:
    return [invalid(path, target, "must not contain '..'")] if _has_backsteps(target) else []


def _local_descending_path(target: str, path: str) -> list[Cause]:
    """validateLocalDescendingPath: relative, without `..` elements (subPath, gitRepo's directory)."""
    causes = [invalid(path, target, "must be a relative path")] if target.startswith("/") else []
    return causes + _no_backsteps(target, path)


def _local_non_reserved_path(target: str, path: str) -> list[Cause]:
    causes = _local_descending_path(target, path)
    if target.startswith("..") and not target.startswith("../"):
        causes.append(invalid(path, target, "must not start with '..'"))
    return causes


def _mode(value: Any, path: str) -> list[Cause]:
    if isinstance(value, int) and not 0 <= value <= 0o777:
        return [invalid(path, value, _FILE_MODE)]
    return []


def _key_to_path(item: Mapping[str, Any], path: str) -> list[Cause]:
    causes = []
    if not item.get("key"):
        causes.append(required(f"{path}.key"))
    target = str(item.get("path") or "")
    if not target:
        causes.append(required(f"{path}.path"))
    causes += _local_non_reserved_path(target, f"{path}.path")
    return causes + _mode(item.get("mode"), f"{path}.mode")


def _items(source: Mapping[str, Any], path: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, item in enumerate(source.get("items") or []):
        causes += _key_to_path(item, f"{path}.items[{i}]")
    return causes


def _files(source: Mapping[str, Any], path: str) -> list[Cause]:
    """A secret's or configMap's files: the default mode and the items."""
    return _mode(source.get("defaultMode"), f"{path}.defaultMode") + _items(source, path)


def _downward_file(item: Mapping[str, Any], path: str) -> list[Cause]:
    """One item of a downwardAPI volume or projection. kube reports its fields under the volume's own
    path, not the item's index."""
    target = str(item.get("path") or "")
    causes = [] if target else [required(f"{path}.path")]
    causes += _local_non_reserved_path(target, f"{path}.path")
    field_ref, resource_ref = item.get("fieldRef"), item.get("resourceFieldRef")
    if field_ref is not None:
        causes += object_field_causes(field_ref, VOLUME_FIELD_PATHS, f"{path}.fieldRef")
        if resource_ref is not None:
            causes.append(
                invalid(path, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously")
            )
    elif resource_ref is not None:
        causes += resource_field_causes(resource_ref, f"{path}.resourceFieldRef", volume=True)
    else:
        causes.append(required(path, "one of fieldRef and resourceFieldRef is required"))
    return causes + _mode(item.get("mode"), f"{path}.mode")


def _downward_api(source: Mapping[str, Any], path: str) -> list[Cause]:
    causes = _mode(source.get("defaultMode"), f"{path}.defaultMode")
    for item in source.get("items") or []:
        causes += _downward_file(item, path)
    return causes


def _projected(source: Mapping[str, Any], path: str) -> list[Cause]:
    causes = _mode(source.get("defaultMode"), f"{path}.defaultMode")
    seen: set[str] = set()

    def unique(target: str, shown: Any) -> None:
        if target in seen:
            causes.append(invalid(path, shown, "conflicting duplicate paths"))
        seen.add(target)

    for i, projection in enumerate(source.get("sources") or []):
        spath = f"{path}.sources[{i}]"
        kinds = 0
        for key in ("secret", "configMap"):
            ref = projection.get(key)
            if ref is None:
                continue
            kinds += 1
            if not ref.get("name"):
                causes.append(required(f"{spath}.{key}.name"))
            for j, item in enumerate(ref.get("items") or []):
                causes.extend(_key_to_path(item, f"{spath}.{key}.items[{j}]"))
                if item.get("path"):
                    unique(str(item["path"]), ref.get("name") or "")
        if (downward := projection.get("downwardAPI")) is not None:
            kinds += 1
            for item in downward.get("items") or []:
                causes.extend(_downward_file(item, f"{spath}.downwardAPI"))
                if item.get("path"):
                    unique(str(item["path"]), str(item["path"]))
        if (token := projection.get("serviceAccountToken")) is not None:
            kinds += 1
            seconds = token.get("expirationSeconds")
            tpath = f"{spath}.serviceAccountToken.expirationSeconds"
            if isinstance(seconds, int) and seconds < 600:
                causes.append(invalid(tpath, seconds, "may not specify a duration less than 10 minutes"))
            if isinstance(seconds, int) and seconds > 1 << 32:
                causes.append(invalid(tpath, seconds, "may not specify a duration larger than 2^32 seconds"))
            # kube names the projection's path here, not the token's: `spec.volumes[0].projected.path`.
            if not token.get("path"):
                causes.append(required(f"{path}.path"))
            else:
                causes.extend(_local_non_reserved_path(str(token["path"]), f"{path}.path"))
        if projection.get("clusterTrustBundle") is not None:
            kinds += 1
        if kinds > 1:
            causes.append(forbidden(spath, _ONE_TYPE))
    return causes


def _host_path(source: Mapping[str, Any], path: str) -> list[Cause]:
    target = str(source.get("path") or "")
    if not target:
        return [required(f"{path}.path")]
    causes = _no_backsteps(target, f"{path}.path")
    kind = source.get("type")
    if kind is not None and kind not in _HOST_PATH_TYPES:
        causes.append(not_supported(f"{path}.type", kind, _HOST_PATH_TYPES))
    return causes


def _empty_dir(source: Mapping[str, Any], path: str) -> list[Cause]:
    limit = source.get("sizeLimit")
    try:
        negative = limit is not None and parse_quantity(limit) < 0
    except QuantityError:
        negative = False
    return (
        [forbidden(f"{path}.sizeLimit", "SizeLimit field must be a valid resource quantity")]
        if negative
        else []
    )


def _git_repo(source: Mapping[str, Any], path: str) -> list[Cause]:
    causes = [] if source.get("repository") else [required(f"{path}.repository")]
    return causes + _local_descending_path(str(source.get("directory") or ""), f"{path}.directory")


def _nfs(source: Mapping[str, Any], path: str) -> list[Cause]:
    causes = [required(f"{path}.{key}") for key in ("server", "path") if not source.get(key)]
    target = str(source.get("path") or "")
    if not posixpath.isabs(target):
        causes.append(invalid(f"{path}.path", target, "must be an absolute path"))
    return causes


def _csi(source: Mapping[str, Any], path: str) -> list[Cause]:
    driver = str(source.get("driver") or "")
    causes = [] if driver else [required(f"{path}.driver")]
    if len(driver) > 63:
        causes.append(too_long(f"{path}.driver", 63))
    causes += [invalid(f"{path}.driver", driver, e) for e in dns_subdomain_errors(driver.lower())]
    secret = source.get("nodePublishSecretRef")
    if secret is not None:
        name = str(secret.get("name") or "")
        if not name:
            causes.append(required(f"{path}.nodePublishSecretRef.name"))
        else:  # kube's path here is the source's `name`
            causes += [invalid(f"{path}.name", name, e) for e in dns_subdomain_errors(name)]
    return causes


def _partition(source: Mapping[str, Any], path: str) -> list[Cause]:
    part = source.get("partition")
    if isinstance(part, int) and not 0 <= part <= 255:
        return [invalid(f"{path}.partition", part, "must be between 1 and 255, inclusive")]
    return []


_Check = Callable[[Mapping[str, Any], str], list[Cause]]


def _requiring(*keys: str, extra: _Check | None = None) -> _Check:
    """A source whose validation is that some fields are set, and maybe one more check."""

    def check(source: Mapping[str, Any], path: str) -> list[Cause]:
        causes = [required(f"{path}.{key}") for key in keys if not source.get(key)]
        return causes + (extra(source, path) if extra else [])

    return check


# kube's iscsiInitiator*Regex (an IQN's pattern is searched, not anchored at its start)
_IQN = re.compile(r"iqn\.\d{4}-\d{2}\.([A-Za-z0-9\-.]+)(:[^,;*&$|\s]+)$")
_EUI = re.compile(r"^eui.[A-Za-z0-9]{16}$")
_NAA = re.compile(r"^naa.[A-Za-z0-9]{32}$")
_ISCSI_PREFIX = "must be valid format starting with iqn, eui, or naa"


def _iscsi_name_malformed(name: str) -> bool:
    pattern = {"iqn": _IQN, "eui": _EUI, "naa": _NAA}.get(name[:3])
    return pattern is not None and (pattern.search(name) if pattern is _IQN else pattern.match(name)) is None


def _iscsi(source: Mapping[str, Any], path: str) -> list[Cause]:
    """validateISCSIVolumeSource: an IQN and an initiator name in iqn, eui or naa form, a LUN of 0-255,
    and a secret for CHAP."""
    causes = _requiring("targetPortal")(source, path)
    iqn = source.get("iqn")
    if not iqn:
        causes.append(required(f"{path}.iqn"))
    elif not str(iqn).startswith(("iqn", "eui", "naa")):
        causes.append(invalid(f"{path}.iqn", iqn, _ISCSI_PREFIX))
    elif _iscsi_name_malformed(str(iqn)):
        causes.append(invalid(f"{path}.iqn", iqn, "must be valid format"))
    lun = source.get("lun", 0)
    if isinstance(lun, int) and not 0 <= lun <= 255:
        causes.append(invalid(f"{path}.lun", lun, "must be between 0 and 255, inclusive"))
    if (source.get("chapAuthDiscovery") or source.get("chapAuthSession")) and source.get("secretRef") is None:
        causes.append(required(f"{path}.secretRef"))
    initiator = source.get("initiatorName")
    if initiator is not None:
        initiator = str(initiator)
        # kube checks the prefix and the form apart, so an empty name gets the first error only
        if not initiator.startswith(("iqn", "eui", "naa")):
            causes.append(invalid(f"{path}.initiatorname", initiator, _ISCSI_PREFIX))
        if _iscsi_name_malformed(initiator):
            causes.append(invalid(f"{path}.initiatorname", initiator, "must be valid format"))
    return causes


def _ephemeral(source: Mapping[str, Any], path: str) -> list[Cause]:
    return [] if source.get("volumeClaimTemplate") is not None else [required(f"{path}.volumeClaimTemplate")]


# kube's order (which decides the source the "more than 1" error names), with the name each source's
# errors are reported under: a few differ from the JSON field, as in kube (`gcePersistentDisk`'s are
# under `persistentDisk`, `cephfs`'s "more than 1" under `cephFS`, `downwardAPI`'s under `downwarAPI`).
_SOURCES: tuple[tuple[str, str, str, _Check | None], ...] = (
    ("emptyDir", "emptyDir", "emptyDir", _empty_dir),
    ("hostPath", "hostPath", "hostPath", _host_path),
    ("gitRepo", "gitRepo", "gitRepo", _git_repo),
    ("gcePersistentDisk", "gcePersistentDisk", "persistentDisk", _requiring("pdName", extra=_partition)),
    (
        "awsElasticBlockStore",
        "awsElasticBlockStore",
        "awsElasticBlockStore",
        _requiring("volumeID", extra=_partition),
    ),
    ("secret", "secret", "secret", _requiring("secretName", extra=_files)),
    ("nfs", "nfs", "nfs", _nfs),
    ("iscsi", "iscsi", "iscsi", _iscsi),
    ("glusterfs", "glusterfs", "glusterfs", _requiring("endpoints", "path")),
    ("flocker", "flocker", "flocker", None),
    ("persistentVolumeClaim", "persistentVolumeClaim", "persistentVolumeClaim", _requiring("claimName")),
    ("rbd", "rbd", "rbd", _requiring("monitors", "image")),
    ("cinder", "cinder", "cinder", _requiring("volumeID")),
    ("cephfs", "cephFS", "cephfs", _requiring("monitors")),
    ("quobyte", "quobyte", "quobyte", _requiring("volume")),
    ("downwardAPI", "downwarAPI", "downwardAPI", _downward_api),
    ("fc", "fc", "fc", None),
    ("flexVolume", "flexVolume", "flexVolume", _requiring("driver")),
    ("configMap", "configMap", "configMap", _requiring("name", extra=_files)),
    ("azureFile", "azureFile", "azureFile", _requiring("secretName", "shareName")),
    ("vsphereVolume", "vsphereVolume", "vsphereVolume", _requiring("volumePath")),
    ("photonPersistentDisk", "photonPersistentDisk", "photonPersistentDisk", _requiring("pdID")),
    ("portworxVolume", "portworxVolume", "portworxVolume", _requiring("volumeID")),
    ("azureDisk", "azureDisk", "azureDisk", _requiring("diskName", "diskURI")),
    ("storageos", "storageos", "storageos", _requiring("volumeName")),
    ("projected", "projected", "projected", _projected),
    ("scaleIO", "scaleIO", "scaleIO", _requiring("gateway", "system", "volumeName")),
    ("csi", "csi", "csi", _csi),
    ("ephemeral", "ephemeral", "ephemeral", _ephemeral),
    ("image", "image", "image", None),
)


def _source_causes(volume: Mapping[str, Any], path: str) -> list[Cause]:
    causes: list[Cause] = []
    kinds = 0
    for key, second_name, errors_name, check in _SOURCES:
        source = volume.get(key)
        if source is None:
            continue
        if kinds:
            causes.append(forbidden(f"{path}.{second_name}", _ONE_TYPE))
            continue
        kinds += 1
        if check is not None and isinstance(source, Mapping):
            causes.extend(check(source, f"{path}.{errors_name}"))
    if not kinds:
        causes.append(required(path, "must specify a volume type"))
    return causes


def validate_volumes(
    volumes: Sequence[Mapping[str, Any]], path: str
) -> tuple[dict[str, Mapping[str, Any]], list[Cause]]:
    """The pod's valid volumes by name (the ones its mounts and devices may name), and the errors."""
    names: dict[str, Mapping[str, Any]] = {}
    causes: list[Cause] = []
    for i, volume in enumerate(volumes):
        vpath = f"{path}[{i}]"
        name = str(volume.get("name") or "")
        found = _source_causes(volume, vpath)
        if not name:
            found.append(required(f"{vpath}.name"))
        else:
            found += [invalid(f"{vpath}.name", name, e) for e in dns_label_errors(name)]
        if name in names:
            found.append(duplicate(f"{vpath}.name", name))
        if found:
            causes += found
        else:
            names[name] = volume
    return names, causes


def validate_volume_mounts(
    mounts: Sequence[Mapping[str, Any]],
    volumes: Mapping[str, Any],
    path: str,
    *,
    devices: Mapping[str, str] | None = None,
    privileged: bool = False,
) -> list[Cause]:
    """ValidateVolumeMounts: each mount names a valid volume, once per mount path, neither a name nor a
    path the container's block devices use (`devices`, name to device path); kube reports the errors of
    a subPath, a propagation and a recursive read-only mode under the list's path, without the index."""
    causes: list[Cause] = []
    targets: set[str] = set()
    devices = devices or {}
    device_paths = set(devices.values())
    for i, mount in enumerate(mounts):
        mpath = f"{path}[{i}]"
        name = str(mount.get("name") or "")
        if not name:
            causes.append(required(f"{mpath}.name"))
        if name not in volumes:
            causes.append(not_found(f"{mpath}.name", name))
        target = str(mount.get("mountPath") or "")
        if not target:
            causes.append(required(f"{mpath}.mountPath"))
        if target in targets:
            causes.append(invalid(f"{mpath}.mountPath", target, "must be unique"))
        targets.add(target)
        if name in devices:
            causes.append(invalid(f"{mpath}.name", name, "must not already exist in volumeDevices"))
        if target in device_paths:
            causes.append(
                invalid(f"{mpath}.mountPath", target, "must not already exist as a path in volumeDevices")
            )
        sub_path, sub_expr = str(mount.get("subPath") or ""), str(mount.get("subPathExpr") or "")
        if sub_path:
            causes += _local_descending_path(sub_path, f"{path}.subPath")
        if sub_expr:
            if sub_path:
                causes.append(
                    invalid(
                        f"{mpath}.subPathExpr", sub_expr, "subPathExpr and subPath are mutually exclusive"
                    )
                )
            causes += _local_descending_path(sub_expr, f"{path}.subPathExpr")
        propagation = mount.get("mountPropagation")
        if propagation is not None:
            allowed = ["Bidirectional", "HostToContainer", "None"]
            if propagation not in allowed:
                causes.append(not_supported(f"{path}.mountPropagation", propagation, allowed))
            if propagation == "Bidirectional" and not privileged:
                causes.append(
                    forbidden(
                        f"{path}.mountPropagation",
                        "Bidirectional mount propagation is available only to privileged containers",
                    )
                )
        causes += _recursive_read_only(mount, f"{path}.recursiveReadOnly")
    return causes


def _recursive_read_only(mount: Mapping[str, Any], path: str) -> list[Cause]:
    """validateMountRecursiveReadOnly: Enabled and IfPossible need a read-only mount that propagates
    nothing."""
    mode = mount.get("recursiveReadOnly")
    if mode is None or mode == "Disabled":
        return []
    if mode not in ("Enabled", "IfPossible"):
        return [not_supported(path, mode, ["Disabled", "Enabled", "IfPossible"])]
    causes = []
    if not mount.get("readOnly"):
        causes.append(forbidden(path, "may only be specified when readOnly is true"))
    if mount.get("mountPropagation") not in (None, "None"):
        causes.append(forbidden(path, "may only be specified when mountPropagation is None or not specified"))
    return causes


def volume_device_paths(devices: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """GetVolumeDeviceMap: a container's block devices, name to device path (the last of a name wins)."""
    return {str(d.get("name") or ""): str(d.get("devicePath") or "") for d in devices}


def validate_volume_devices(
    devices: Sequence[Mapping[str, Any]],
    volumes: Mapping[str, Mapping[str, Any]],
    mounts: Sequence[Mapping[str, Any]],
    path: str,
) -> list[Cause]:
    """ValidateVolumeDevices: each raw block device names a volume of a claim (persistentVolumeClaim or
    ephemeral), once, at a path of its own that no mount of the container uses."""
    causes: list[Cause] = []
    mounted = {str(m.get("name") or ""): str(m.get("mountPath") or "") for m in mounts}
    mount_paths = set(mounted.values())
    names: set[str] = set()
    paths: set[str] = set()
    for i, device in enumerate(devices):
        dpath = f"{path}[{i}]"
        name = str(device.get("name") or "")
        target = str(device.get("devicePath") or "")
        volume = volumes.get(name)
        if not name:
            causes.append(required(f"{dpath}.name"))
        if name in names:
            causes.append(invalid(f"{dpath}.name", name, "must be unique"))
        if (
            volume is not None
            and volume.get("persistentVolumeClaim") is None
            and volume.get("ephemeral") is None
        ):
            causes.append(
                invalid(
                    f"{dpath}.name",
                    name,
                    "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode",
                )
            )
        if volume is None:
            causes.append(not_found(f"{dpath}.name", name))
        if not target:
            causes.append(required(f"{dpath}.devicePath"))
        if target in paths:
            causes.append(invalid(f"{dpath}.devicePath", target, "must be unique"))
        if target and _has_backsteps(target):
            causes.append(invalid(f"{dpath}.devicePath", target, "can not contain backsteps ('..')"))
        else:
            paths.add(target)
        if name in mounted:
            causes.append(invalid(f"{dpath}.name", name, "must not already exist in volumeMounts"))
        if target in mount_paths:
            causes.append(
                invalid(f"{dpath}.devicePath", target, "must not already exist as a path in volumeMounts")
            )
        if name:
            names.add(name)
    return causes


# --- a PersistentVolume's source (ValidatePersistentVolumeSpec) ------------------------------------------


def _local(source: Mapping[str, Any], path: str) -> list[Cause]:
    target = str(source.get("path") or "")
    return _no_backsteps(target, f"{path}.path") if target else [required(f"{path}.path")]


def _csi_persistent(source: Mapping[str, Any], path: str) -> list[Cause]:
    driver = str(source.get("driver") or "")
    causes = [] if driver else [required(f"{path}.driver")]
    if len(driver) > 63:
        causes.append(too_long(f"{path}.driver", 63))
    causes += [invalid(f"{path}.driver", driver, e) for e in dns_subdomain_errors(driver.lower())]
    if not source.get("volumeHandle"):
        causes.append(required(f"{path}.volumeHandle"))
    return causes


# kube's order and names, as for a pod's volumes; a PV has its own source types for some (a CSI volume
# names a handle), no emptyDir, secret, configMap or projection, and a `local` one. flexVolume is counted
# without the "more than 1" check, as kube does.
_PV_SOURCES: tuple[tuple[str, str, str, _Check | None], ...] = (
    ("hostPath", "hostPath", "hostPath", _host_path),
    ("gcePersistentDisk", "gcePersistentDisk", "persistentDisk", _requiring("pdName", extra=_partition)),
    (
        "awsElasticBlockStore",
        "awsElasticBlockStore",
        "awsElasticBlockStore",
        _requiring("volumeID", extra=_partition),
    ),
    ("glusterfs", "glusterfs", "glusterfs", _requiring("endpoints", "path")),
    ("flocker", "flocker", "flocker", None),
    ("nfs", "nfs", "nfs", _nfs),
    ("rbd", "rbd", "rbd", _requiring("monitors", "image")),
    ("quobyte", "quobyte", "quobyte", _requiring("volume")),
    ("cephfs", "cephFS", "cephfs", _requiring("monitors")),
    ("iscsi", "iscsi", "iscsi", _iscsi),
    ("cinder", "cinder", "cinder", _requiring("volumeID")),
    ("fc", "fc", "fc", None),
    ("flexVolume", "", "flexVolume", _requiring("driver")),
    ("azureFile", "azureFile", "azureFile", _requiring("secretName", "shareName")),
    ("vsphereVolume", "vsphereVolume", "vsphereVolume", _requiring("volumePath")),
    ("photonPersistentDisk", "photonPersistentDisk", "photonPersistentDisk", _requiring("pdID")),
    ("portworxVolume", "portworxVolume", "portworxVolume", _requiring("volumeID")),
    ("azureDisk", "azureDisk", "azureDisk", _requiring("diskName", "diskURI")),
    ("scaleIO", "scaleIO", "scaleIO", _requiring("gateway", "system", "volumeName")),
    ("local", "local", "local", _local),
    ("storageos", "storageos", "storageos", _requiring("volumeName")),
    ("csi", "csi", "csi", _csi_persistent),
)
PERSISTENT_VOLUME_SOURCES = frozenset(key for key, *_ in _PV_SOURCES)


def persistent_volume_source_causes(
    spec: Mapping[str, Any], path: str, *, node_affinity: bool
) -> list[Cause]:
    """Exactly one source, each valid; kube names the first extra one under `may not specify more than 1
    volume type` and a spec with none `must specify a volume type`. A `local` volume needs the volume's
    node affinity (`node_affinity`: whether the spec has one)."""
    causes: list[Cause] = []
    kinds = 0
    for key, second_name, errors_name, check in _PV_SOURCES:
        source = spec.get(key)
        if source is None:
            continue
        if kinds and second_name:
            causes.append(forbidden(f"{path}.{second_name}", _ONE_TYPE))
            continue
        kinds += 1
        if check is not None and isinstance(source, Mapping):
            causes.extend(check(source, f"{path}.{errors_name}"))
        if key == "local" and not node_affinity:
            causes.append(required(f"{path}.nodeAffinity", "Local volume requires node affinity"))
    if not kinds:
        causes.append(required(path, "must specify a volume type"))
    return causes
