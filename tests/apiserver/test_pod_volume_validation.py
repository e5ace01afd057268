"""A pod's volumes, mounts and env references are refused as kube-apiserver refuses them.

The rules and words are read from kube's pkg/apis/core/validation/validation.go (validateVolumeSource,
ValidateVolumeMounts, validateEnvVarValueFrom, ValidateEnvFrom, validateObjectFieldSelector) and
pkg/apis/core/pods/helpers.go (ConvertDownwardAPIFieldLabel). Some field paths there are kube's own
quirks, kept on purpose: a gcePersistentDisk's errors are under `persistentDisk`, a second source beside
a downwardAPI one is named `downwarAPI`, a subPath's error has no mount index, a downwardAPI item's
errors have no item index.
"""

from __future__ import annotations

from typing import Any

import pytest

from tenantgpu.apiserver.defaults import default
from tenantgpu.apiserver.validation import validate


def pod(volumes: list[dict[str, Any]] | None = None, **container: Any) -> dict[str, Any]:
    ctr = {"name": "app", "image": "nginx", **container}
    spec: dict[str, Any] = {"containers": [ctr]}
    if volumes is not None:
        spec["volumes"] = volumes
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec,
    }


def errors(obj: dict[str, Any]) -> list[str]:
    default("Pod", obj)
    return [str(c) for c in validate("Pod", obj)]


def test_a_volume_needs_exactly_one_source_and_kube_names_the_second() -> None:
    assert errors(pod([{"name": "v"}])) == []  # defaulting makes a source-less volume an emptyDir
    two = pod([{"name": "v", "emptyDir": {}, "configMap": {"name": "c"}}])
    assert errors(two) == ["spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type"]
    quirk = pod([{"name": "v", "secret": {"secretName": "s"}, "downwardAPI": {}}])
    assert errors(quirk) == ["spec.volumes[0].downwarAPI: Forbidden: may not specify more than 1 volume type"]


def test_each_source_requires_what_names_its_data() -> None:
    volumes = [
        {"name": "a", "configMap": {}},
        {"name": "b", "secret": {}},
        {"name": "c", "persistentVolumeClaim": {}},
        {"name": "d", "hostPath": {}},
        {"name": "e", "nfs": {"server": "nas"}},
        {"name": "f", "gcePersistentDisk": {"partition": 300}},
        {"name": "g", "csi": {}},
        {"name": "h", "ephemeral": {}},
    ]
    assert errors(pod(volumes)) == [
        "spec.volumes[0].configMap.name: Required value",
        "spec.volumes[1].secret.secretName: Required value",
        "spec.volumes[2].persistentVolumeClaim.claimName: Required value",
        "spec.volumes[3].hostPath.path: Required value",
        "spec.volumes[4].nfs.path: Required value",
        'spec.volumes[4].nfs.path: Invalid value: "": must be an absolute path',
        "spec.volumes[5].persistentDisk.pdName: Required value",
        "spec.volumes[5].persistentDisk.partition: Invalid value: 300: must be between 1 and 255, inclusive",
        "spec.volumes[6].csi.driver: Required value",
        'spec.volumes[6].csi.driver: Invalid value: "": ' + _subdomain_message(),
        "spec.volumes[7].ephemeral.volumeClaimTemplate: Required value",
    ]


def _subdomain_message() -> str:
    return (
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
        "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    )


def test_item_paths_modes_and_host_path_types() -> None:
    volumes = [
        {
            "name": "cm",
            "configMap": {
                "name": "c",
                "defaultMode": 0o1000,
                "items": [
                    {"key": "k", "path": "/etc/x"},
                    {"key": "", "path": "../up"},
                    {"key": "k", "path": "..x"},
                ],
            },
        },
        {"name": "hp", "hostPath": {"path": "/var/../etc", "type": "Folder"}},
    ]
    assert errors(pod(volumes)) == [
        "spec.volumes[0].configMap.defaultMode: Invalid value: 512: must be a number between 0 and 0777 "
        "(octal), both inclusive",
        'spec.volumes[0].configMap.items[0].path: Invalid value: "/etc/x": must be a relative path',
        "spec.volumes[0].configMap.items[1].key: Required value",
        "spec.volumes[0].configMap.items[1].path: Invalid value: \"../up\": must not contain '..'",
        "spec.volumes[0].configMap.items[2].path: Invalid value: \"..x\": must not start with '..'",
        "spec.volumes[1].hostPath.path: Invalid value: \"/var/../etc\": must not contain '..'",
        'spec.volumes[1].hostPath.type: Unsupported value: "Folder": supported values: "", "BlockDevice", '
        '"CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"',
    ]


def test_a_mount_of_an_invalid_volume_is_not_found_as_well() -> None:
    obj = pod([{"name": "cfg", "configMap": {}}], volumeMounts=[{"name": "cfg", "mountPath": "/etc/cfg"}])
    assert errors(obj) == [
        "spec.volumes[0].configMap.name: Required value",
        'spec.containers[0].volumeMounts[0].name: Not found: "cfg"',
    ]


def test_mounts_need_a_unique_path_and_a_relative_sub_path() -> None:
    mounts = [
        {"name": "data", "mountPath": "/data", "subPath": "../secrets"},
        {"name": "data", "mountPath": "/data"},
        {"name": "", "mountPath": "/x", "subPath": "a", "subPathExpr": "$(POD)"},
        {"name": "data", "mountPath": "/y", "mountPropagation": "Bidirectional"},
    ]
    assert errors(pod([{"name": "data", "emptyDir": {}}], volumeMounts=mounts)) == [
        "spec.containers[0].volumeMounts.subPath: Invalid value: \"../secrets\": must not contain '..'",
        'spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/data": must be unique',
        "spec.containers[0].volumeMounts[2].name: Required value",
        'spec.containers[0].volumeMounts[2].name: Not found: ""',
        'spec.containers[0].volumeMounts[2].subPathExpr: Invalid value: "$(POD)": subPathExpr and subPath are '
        "mutually exclusive",
        "spec.containers[0].volumeMounts.mountPropagation: Forbidden: Bidirectional mount propagation is "
        "available only to privileged containers",
    ]
    privileged = pod(
        [{"name": "data", "emptyDir": {}}],
        volumeMounts=[mounts[3]],
        securityContext={"privileged": True},
    )
    assert errors(privileged) == []


def test_a_recursive_read_only_mount_is_read_only_and_propagates_nothing() -> None:
    """validateMountRecursiveReadOnly, its errors under the list's path as kube's e2e test reads them
    (`spec.containers[0].volumeMounts.recursiveReadOnly: Forbidden: ...`)."""
    mounts = [
        {"name": "data", "mountPath": "/a", "recursiveReadOnly": "Enabled"},
        {"name": "data", "mountPath": "/b", "readOnly": True, "recursiveReadOnly": "IfPossible",
         "mountPropagation": "HostToContainer"},
        {"name": "data", "mountPath": "/c", "readOnly": True, "recursiveReadOnly": "Always"},
        {"name": "data", "mountPath": "/d", "recursiveReadOnly": "Disabled"},
        {"name": "data", "mountPath": "/e", "readOnly": True, "recursiveReadOnly": "Enabled",
         "mountPropagation": "None"},
    ]  # fmt: skip
    assert errors(pod([{"name": "data", "emptyDir": {}}], volumeMounts=mounts)) == [
        "spec.containers[0].volumeMounts.recursiveReadOnly: Forbidden: may only be specified when readOnly "
        "is true",
        "spec.containers[0].volumeMounts.recursiveReadOnly: Forbidden: may only be specified when "
        "mountPropagation is None or not specified",
        'spec.containers[0].volumeMounts.recursiveReadOnly: Unsupported value: "Always": supported values: '
        '"Disabled", "Enabled", "IfPossible"',
    ]


def test_block_devices_name_a_claim_at_a_path_of_their_own() -> None:
    """ValidateVolumeDevices, and ValidateVolumeMounts' checks against the devices: a raw block device
    comes from a persistentVolumeClaim or an ephemeral volume, and neither its name nor its path may be
    a mount's."""
    volumes = [
        {"name": "disk", "persistentVolumeClaim": {"claimName": "block-pvc"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"],
         "volumeMode": "Block", "resources": {"requests": {"storage": "1Gi"}}}}}},
        {"name": "tmp", "emptyDir": {}},
    ]  # fmt: skip
    good = pod(
        volumes,
        volumeDevices=[
            {"name": "disk", "devicePath": "/dev/xvda"},
            {"name": "scratch", "devicePath": "/dev/xvdb"},
        ],
        volumeMounts=[{"name": "tmp", "mountPath": "/tmp"}],
    )
    assert errors(good) == []
    bad = pod(
        volumes,
        volumeDevices=[
            {"name": "tmp", "devicePath": "/dev/xvda"},
            {"name": "disk", "devicePath": "/dev/xvda"},
            {"name": "disk", "devicePath": "/dev/../xvdc"},
            {"name": "gone", "devicePath": ""},
            {"name": "scratch", "devicePath": "/tmp"},
        ],
        volumeMounts=[{"name": "tmp", "mountPath": "/tmp"}],
    )
    assert errors(bad) == [
        'spec.containers[0].volumeMounts[0].name: Invalid value: "tmp": must not already exist in volumeDevices',
        'spec.containers[0].volumeMounts[0].mountPath: Invalid value: "/tmp": must not already exist as a path '
        "in volumeDevices",
        'spec.containers[0].volumeDevices[0].name: Invalid value: "tmp": can only use volume source type of '
        "PersistentVolumeClaim or Ephemeral for block mode",
        'spec.containers[0].volumeDevices[0].name: Invalid value: "tmp": must not already exist in volumeMounts',
        'spec.containers[0].volumeDevices[1].devicePath: Invalid value: "/dev/xvda": must be unique',
        'spec.containers[0].volumeDevices[2].name: Invalid value: "disk": must be unique',
        'spec.containers[0].volumeDevices[2].devicePath: Invalid value: "/dev/../xvdc": can not contain '
        "backsteps ('..')",
        'spec.containers[0].volumeDevices[3].name: Not found: "gone"',
        "spec.containers[0].volumeDevices[3].devicePath: Required value",
        'spec.containers[0].volumeDevices[4].devicePath: Invalid value: "/tmp": must not already exist as a '
        "path in volumeMounts",
    ]


def test_downward_api_volumes_take_metadata_only_and_need_a_container_for_resources() -> None:
    items = [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "node", "fieldRef": {"fieldPath": "spec.nodeName"}},
        {"path": "cpu", "resourceFieldRef": {"resource": "limits.cpu"}},
        {"path": "nothing"},
    ]
    assert errors(pod([{"name": "info", "downwardAPI": {"items": items}}])) == [
        'spec.volumes[0].downwardAPI.fieldRef.fieldPath: Unsupported value: "spec.nodeName": supported values: '
        '"metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid"',
        "spec.volumes[0].downwardAPI.resourceFieldRef.containerName: Required value",
        "spec.volumes[0].downwardAPI: Required value: one of fieldRef and resourceFieldRef is required",
    ]


def test_projected_sources_are_one_kind_each_with_distinct_paths() -> None:
    sources = [
        {"configMap": {"name": "a", "items": [{"key": "k", "path": "same"}]}},
        {"secret": {"name": "b", "items": [{"key": "k", "path": "same"}]}},
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 60}},
        {"configMap": {"name": "c"}, "secret": {"name": "d"}},
    ]
    assert errors(pod([{"name": "p", "projected": {"sources": sources}}])) == [
        'spec.volumes[0].projected: Invalid value: "b": conflicting duplicate paths',
        "spec.volumes[0].projected.sources[2].serviceAccountToken.expirationSeconds: Invalid value: 60: may "
        "not specify a duration less than 10 minutes",
        "spec.volumes[0].projected.sources[3]: Forbidden: may not specify more than 1 volume type",
    ]


def test_env_value_from_names_one_valid_source() -> None:
    env = [
        {"name": "A", "valueFrom": {}},
        {"name": "B", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels"}}},
        {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "E", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}},
        {"name": "F", "valueFrom": {"configMapKeyRef": {"name": "Cfg", "key": ""}}},
        {"name": "G", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}},
        {"name": "H", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "2"}}},
    ]
    found = errors(pod(env=env))
    assert found == [
        'spec.containers[0].env[0].valueFrom: Invalid value: "": must specify one of: `fieldRef`, '
        "`resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        'spec.containers[0].env[1].valueFrom: Invalid value: "": may not be specified when `value` is not empty',
        'spec.containers[0].env[2].valueFrom.fieldRef.fieldPath: Unsupported value: "metadata.labels": '
        'supported values: "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", '
        '"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"',
        'spec.containers[0].env[4].valueFrom.fieldRef.fieldPath: Invalid value: "spec.containers": error '
        "converting fieldPath: field label not supported: spec.containers",
        'spec.containers[0].env[5].valueFrom.configMapKeyRef.name: Invalid value: "Cfg": '
        + _subdomain_message(),
        "spec.containers[0].env[5].valueFrom.configMapKeyRef.key: Required value",
        'spec.containers[0].env[6].valueFrom.resourceFieldRef.resource: Unsupported value: "limits.gpu": '
        'supported values: "limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu", '
        '"requests.ephemeral-storage", "requests.memory"',
        'spec.containers[0].env[7].valueFrom.resourceFieldRef.divisor: Invalid value: "limits.cpu": only '
        "divisor's values 1m and 1 are supported with the cpu resource",
    ]


def test_an_env_from_name_is_checked_as_kube_checks_a_name_prefix() -> None:
    # apimachinery's maskTrailingDash: a trailing '-' passes, capitals do not
    assert errors(pod(envFrom=[{"configMapRef": {"name": "settings-"}}])) == []
    assert errors(pod(envFrom=[{"secretRef": {"name": "Keys-"}}])) == [
        'spec.containers[0].envFrom[0].secretRef.name: Invalid value: "Keys-": ' + _subdomain_message()
    ]


def test_env_from_names_one_object() -> None:
    env_from = [
        {"prefix": "X_"},
        {"configMapRef": {"name": "a"}, "secretRef": {"name": "b"}},
        {"secretRef": {}},
    ]
    assert errors(pod(envFrom=env_from)) == [
        'spec.containers[0].envFrom: Invalid value: "": must specify one of: `configMapRef` or `secretRef`',
        'spec.containers[0].envFrom: Invalid value: "": may not have more than one field specified at a time',
        "spec.containers[0].envFrom[2].secretRef.name: Required value",
    ]


@pytest.mark.parametrize(
    "volume",
    [
        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        {
            "name": "cm",
            "configMap": {"name": "c", "items": [{"key": "a.conf", "path": "conf/a.conf", "mode": 0o644}]},
        },
        {"name": "sec", "secret": {"secretName": "s", "optional": True}},
        {"name": "claim", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}},
        {"name": "csi", "csi": {"driver": "secrets-store.csi.k8s.io"}},
        {
            "name": "info",
            "downwardAPI": {
                "items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                    {"path": "app", "fieldRef": {"fieldPath": "metadata.labels['app']"}},
                    {
                        "path": "mem",
                        "resourceFieldRef": {
                            "containerName": "app",
                            "resource": "limits.memory",
                            "divisor": "1Mi",
                        },
                    },
                ]
            },
        },
    ],
)
def test_the_volumes_users_write_are_valid(volume: dict[str, Any]) -> None:
    env = [
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}}},
        {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
    ]
    obj = pod([volume], volumeMounts=[{"name": volume["name"], "mountPath": "/mnt"}], env=env)
    obj["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "settings"}, "prefix": "APP_"}]
    assert errors(obj) == []


@pytest.mark.parametrize(
    ("minor", "expected"),
    [
        (27, "error converting fieldPath: field label not supported: status.hostIPs"),
        (
            28,
            "spec.containers[0].env[0].valueFrom.fieldRef: Forbidden: may not be set when feature gate "
            "'PodHostIPs' is not enabled",
        ),
        (29, None),
    ],
)
def test_status_host_ips_follows_the_tenant_s_release(minor: int, expected: str | None) -> None:
    # 1.27 does not know the field; 1.28 has it behind the PodHostIPs gate, off; 1.29 turns the gate on
    obj = pod(env=[{"name": "IPS", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIPs"}}}])
    default("Pod", obj)
    found = [str(c) for c in validate("Pod", obj, minor=minor)]
    if expected is None:
        assert found == []
    else:
        assert len(found) == 1 and expected in found[0]
    # an update keeps a use the stored pod already has, as kube's AllowHostIPsField does
    if minor == 28:
        updated = {**obj, "spec": {**obj["spec"], "activeDeadlineSeconds": 60}}
        assert validate("Pod", updated, old=obj, minor=minor) == []


def test_an_iscsi_volume_needs_an_iqn_eui_or_naa_name_a_lun_in_range_and_a_chap_secret() -> None:
    """validateISCSIVolumeSource: the IQN and the initiator name must start with iqn, eui or naa and then
    match kube's iscsiInitiator*Regex; the LUN is 0-255; CHAP needs a secretRef. The initiator's errors are
    under `initiatorname`, in lower case, as kube names the field there."""

    def iscsi(**source: Any) -> list[str]:
        return errors(pod([{"name": "lun", "iscsi": {"targetPortal": "10.0.0.5:3260", **source}}]))

    assert iscsi(iqn="iqn.2001-04.com.example:storage.disk1") == []
    assert iscsi(iqn="eui.02004567A425678D", lun=255) == []
    assert iscsi(iqn="naa.60014055f3e7a5e5a1b1c9f2c1d0e4f7") == []
    assert iscsi(iqn="target-1") == [
        'spec.volumes[0].iscsi.iqn: Invalid value: "target-1": must be valid format starting with iqn, eui, or naa'
    ]
    assert iscsi(iqn="iqn.example") == [
        'spec.volumes[0].iscsi.iqn: Invalid value: "iqn.example": must be valid format'
    ]
    assert iscsi(iqn="eui.123") == [
        'spec.volumes[0].iscsi.iqn: Invalid value: "eui.123": must be valid format'
    ]
    assert iscsi(iqn="iqn.2001-04.com.example:a", lun=256, chapAuthSession=True, initiatorName="host-1") == [
        "spec.volumes[0].iscsi.lun: Invalid value: 256: must be between 0 and 255, inclusive",
        "spec.volumes[0].iscsi.secretRef: Required value",
        'spec.volumes[0].iscsi.initiatorname: Invalid value: "host-1": must be valid format starting with iqn, eui, '
        "or naa",
    ]
