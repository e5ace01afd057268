"""Volume defaults as kube's pkg/apis/core/v1/defaults.go sets them: file projections start at mode 0644
(420), a downward API file's field reference at `apiVersion: v1`, a projected token at an hour, and a
volume that names no source is an emptyDir. Templates get them as pods do."""

from __future__ import annotations

from typing import Any

from tenantgpu.apiserver.defaults import default


def _pod(*volumes: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}], "volumes": list(volumes)},
    }


def test_file_projections_get_mode_420_and_field_refs_v1() -> None:
    pod = _pod(
        {"name": "cm", "configMap": {"name": "settings"}},
        {"name": "s", "secret": {"secretName": "creds", "defaultMode": 256}},
        {
            "name": "d",
            "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]},
        },
        {
            "name": "pr",
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"path": "token", "audience": "vault"}},
                    {
                        "downwardAPI": {
                            "items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                        }
                    },
                ]
            },
        },
    )
    default("Pod", pod)
    cm, secret, downward, projected = pod["spec"]["volumes"]
    assert cm["configMap"] == {"name": "settings", "defaultMode": 420}
    assert secret["secret"]["defaultMode"] == 256  # given modes stay
    assert downward["downwardAPI"] == {
        "items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels", "apiVersion": "v1"}}],
        "defaultMode": 420,
    }
    token, files = projected["projected"]["sources"]
    assert projected["projected"]["defaultMode"] == 420
    assert token["serviceAccountToken"] == {"path": "token", "audience": "vault", "expirationSeconds": 3600}
    assert files["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"


def test_a_volume_without_a_source_is_an_empty_dir_and_plugins_get_theirs() -> None:
    pod = _pod(
        {"name": "scratch"},
        {"name": "host", "hostPath": {"path": "/var/log"}},
        {"name": "disk", "iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.x", "lun": 0}},
        {"name": "ceph", "rbd": {"monitors": ["m"], "image": "i"}},
        {"name": "claim", "persistentVolumeClaim": {"claimName": "data"}},
    )
    default("Pod", pod)
    scratch, host, disk, ceph, claim = pod["spec"]["volumes"]
    assert scratch == {"name": "scratch", "emptyDir": {}}
    assert host["hostPath"] == {"path": "/var/log", "type": ""}
    assert disk["iscsi"]["iscsiInterface"] == "default"
    assert (ceph["rbd"]["pool"], ceph["rbd"]["user"], ceph["rbd"]["keyring"]) == (
        "rbd",
        "admin",
        "/etc/ceph/keyring",
    )
    assert claim == {"name": "claim", "persistentVolumeClaim": {"claimName": "data"}}


def test_a_deployments_template_gets_them_too() -> None:
    deploy = {
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {
                    "containers": [{"name": "c", "image": "x"}],
                    "volumes": [{"name": "cm", "configMap": {"name": "x"}}],
                },
            },
        },
    }
    default("Deployment", deploy)
    assert deploy["spec"]["template"]["spec"]["volumes"][0]["configMap"]["defaultMode"] == 420
