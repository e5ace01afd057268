"""What the kubelet needs before it mounts a pod's ConfigMap, Secret and projected volumes, and kube's words
when it cannot. Facts from kubernetes v1.33 (vendored in openshift/microshift):
- pkg/volume/configmap/configmap.go and pkg/volume/secret/secret.go SetUpAt: a missing object fails
  the mount unless the source is optional; the object comes from the kubelet's manager, whose NotFound is
  `configmap "<name>" not found` / `secret "<name>" not found` (groupResource "configmap"/"secret").
  MakePayload: `configmap references non-existent config key: <key>`, `references non-existent secret
  key: <key>` for an item's key, none for an optional source.
- pkg/volume/projected/projected.go collectData: every source is tried, the errors are aggregated
  (utilerrors: one alone, several in brackets, each once).
- pkg/volume/util/operationexecutor: `MountVolume.SetUp failed for volume "<volume>" : <error>`.
- pkg/volume/util/nestedpendingoperations / exponentialbackoff: retries after 500 ms, doubling to 2m2s.
"""

from __future__ import annotations

from typing import Any

from tenantgpu.node.volumesources import (
    ObjectSource,
    VolumeNeeds,
    failed_mount_message,
    retry_delay,
    setup_error,
    volume_needs,
)

OBJECTS: dict[tuple[str, str], dict[str, Any]] = {
    ("configmap", "settings"): {"data": {"mode": "fast"}, "binaryData": {"blob": "AA=="}},
    ("secret", "token"): {"data": {"key": "czNjcmV0"}},
}


def _lookup(kind: str, name: str) -> dict[str, Any] | None:
    return OBJECTS.get((kind, name))


def test_the_volumes_that_need_objects_in_the_pods_order() -> None:
    spec = {
        "volumes": [
            {"name": "scratch", "emptyDir": {}},
            {"name": "cfg", "configMap": {"name": "settings", "items": [{"key": "mode", "path": "m"}]}},
            {"name": "creds", "secret": {"secretName": "token", "optional": True}},
            {
                "name": "kube-api-access-x1y2z",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {"downwardAPI": {"items": []}},
                    ]
                },
            },
            {"name": "only-token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
        ]
    }
    assert volume_needs(spec) == [
        VolumeNeeds("cfg", (ObjectSource("configmap", "settings", False, ("mode",)),)),
        VolumeNeeds("creds", (ObjectSource("secret", "token", True),)),
        VolumeNeeds(
            "kube-api-access-x1y2z",
            (ObjectSource("configmap", "kube-root-ca.crt", False, ("ca.crt",)),),
            projected=True,
        ),
    ]


def test_a_missing_configmap_or_secret_is_named_as_kubes_manager_names_it() -> None:
    assert setup_error(VolumeNeeds("cfg", (ObjectSource("configmap", "absent", False),)), _lookup) == (
        'configmap "absent" not found'
    )
    assert setup_error(VolumeNeeds("s", (ObjectSource("secret", "absent", False),)), _lookup) == (
        'secret "absent" not found'
    )
    assert failed_mount_message("cfg", 'configmap "absent" not found') == (
        'MountVolume.SetUp failed for volume "cfg" : configmap "absent" not found'
    )


def test_an_optional_source_may_be_missing_and_its_keys_too() -> None:
    assert (
        setup_error(VolumeNeeds("cfg", (ObjectSource("configmap", "absent", True, ("x",)),)), _lookup) is None
    )
    assert (
        setup_error(VolumeNeeds("cfg", (ObjectSource("configmap", "settings", True, ("x",)),)), _lookup)
        is None
    )


def test_an_items_key_must_be_in_data_or_binary_data() -> None:
    present = VolumeNeeds("cfg", (ObjectSource("configmap", "settings", False, ("mode", "blob")),))
    assert setup_error(present, _lookup) is None
    assert setup_error(
        VolumeNeeds("cfg", (ObjectSource("configmap", "settings", False, ("nope",)),)), _lookup
    ) == ("configmap references non-existent config key: nope")
    assert setup_error(VolumeNeeds("s", (ObjectSource("secret", "token", False, ("nope",)),)), _lookup) == (
        "references non-existent secret key: nope"
    )


def test_a_projected_volume_reports_every_failing_source_together() -> None:
    needs = VolumeNeeds(
        "bundle",
        (
            ObjectSource("configmap", "absent", False),
            ObjectSource("secret", "token", False, ("nope",)),
            ObjectSource("configmap", "settings", False),
            ObjectSource("configmap", "absent", False),  # the same error twice is shown once
        ),
        projected=True,
    )
    assert setup_error(needs, _lookup) == (
        '[configmap "absent" not found, references non-existent secret key: nope]'
    )
    one = VolumeNeeds("bundle", (ObjectSource("configmap", "absent", False),), projected=True)
    assert setup_error(one, _lookup) == 'configmap "absent" not found'


def test_retries_back_off_from_half_a_second_to_two_minutes_two() -> None:
    assert [retry_delay(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert retry_delay(9) == 122.0 and retry_delay(30) == 122.0
