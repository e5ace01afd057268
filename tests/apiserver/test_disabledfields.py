"""What a release's kube-apiserver clears from a write because the field's feature gate is off there.

Facts, read upstream: each gate's stages from its page in kubernetes/website
(`content/en/docs/reference/command-line-tools-reference/feature-gates/<Gate>.md`) and kube's versioned
`pkg/features/kube_features.go`; the fields and the "in use" rules from kubernetes/kubernetes'
`pkg/api/pod/util.go` (`dropDisabledFields`, `dropDisabledPodStatusFields`, `dropImageVolumes`,
`dropPodLifecycleSleepAction`, `dropContainerStopSignals`, `dropDisabledProcMountField`) and the Job
strategy's PrepareForCreate / PrepareForUpdate.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tenantgpu.apiserver.disabledfields import DisabledFields
from tenantgpu.apiserver.featuregates import GATES, enabled
from tenantgpu.apiserver.fieldversions import LATEST


@pytest.mark.parametrize(
    ("gate", "off", "on"),
    [
        ("SidecarContainers", 28, 29),
        ("InPlacePodVerticalScaling", 32, 33),
        ("PodHostIPs", 28, 29),
        ("UserNamespacesSupport", 32, 33),  # beta from 1.30, but off by default until 1.33
        ("DynamicResourceAllocation", 33, 34),
        ("PodLevelResources", 33, 34),
        ("PodLifecycleSleepAction", 29, 30),
        ("MatchLabelKeysInPodAffinity", 30, 31),
        ("ProcMountType", 32, 33),  # the website's page stops at 1.31's beta-off; kube_features.go has 1.33
        ("SupplementalGroupsPolicy", 32, 33),
        ("RecursiveReadOnlyMounts", 30, 31),
        ("ImageVolume", 32, 33),
        ("SELinuxChangePolicy", 32, 33),
        ("PodObservedGenerationTracking", 33, 34),
        ("ResourceHealthStatus", 35, 36),
        ("HostnameOverride", 34, 35),
        ("EnvFiles", 34, 35),
        ("JobPodReplacementPolicy", 28, 29),
        ("JobBackoffLimitPerIndex", 28, 29),
        ("JobSuccessPolicy", 30, 31),
        ("JobManagedBy", 31, 32),
        ("MaxUnavailableStatefulSet", 34, 35),
        ("ServiceTrafficDistribution", 30, 31),
    ],
)
def test_a_gate_turns_on_by_default_in_the_release_kube_says(gate: str, off: int, on: int) -> None:
    assert not enabled(gate, off)
    assert enabled(gate, on) and enabled(gate, 37)


def test_container_stop_signals_are_still_alpha_in_every_release_kamaji_serves() -> None:
    assert not any(enabled("ContainerStopSignals", minor) for minor in range(27, 36))
    assert set(GATES) >= {"ContainerStopSignals", "SidecarContainers"}


def _pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {**spec}}


RESIZE = [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]


def test_a_1_31_pod_loses_its_resize_policy_and_a_1_33_pod_keeps_it() -> None:
    pod = _pod(containers=[{"name": "a", "resizePolicy": RESIZE}])
    DisabledFields(31).drop("Pod", pod, None)
    assert pod["spec"]["containers"] == [{"name": "a"}]
    kept = _pod(containers=[{"name": "a", "resizePolicy": RESIZE}])
    DisabledFields(33).drop("Pod", kept, None)
    assert kept["spec"]["containers"][0]["resizePolicy"] == RESIZE


def test_an_update_keeps_the_gate_s_fields_the_stored_object_already_uses() -> None:
    """kube's rule: an update must not lose what is stored (a pod written while the gate was on, read
    back after a downgrade); a field the old object did not use is cleared."""
    old = _pod(containers=[{"name": "a", "resizePolicy": RESIZE}])
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"x": "y"}
    new["spec"]["initContainers"] = [{"name": "i", "resizePolicy": RESIZE}]
    DisabledFields(31).drop("Pod", new, old)
    assert new["spec"]["initContainers"][0]["resizePolicy"] == RESIZE
    unused = copy.deepcopy(_pod(containers=[{"name": "a"}]))
    updated = _pod(containers=[{"name": "a", "resizePolicy": RESIZE}])
    DisabledFields(31).drop("Pod", updated, unused)
    assert "resizePolicy" not in updated["spec"]["containers"][0]


def test_a_pod_s_status_fields_are_kept_when_the_old_spec_uses_the_gate() -> None:
    """dropDisabledPodStatusFields asks the old pod's spec: a container's `allocatedResources` and
    `resources` in status stay only for a pod whose spec has a resizePolicy."""
    status = {"containerStatuses": [{"name": "a", "allocatedResources": {"cpu": "1"}, "resources": {}}]}
    plain = _pod(containers=[{"name": "a"}])
    new = {**copy.deepcopy(plain), "status": copy.deepcopy(status)}
    DisabledFields(32).drop("Pod", new, plain)
    assert new["status"]["containerStatuses"] == [{"name": "a"}]
    resizable = _pod(containers=[{"name": "a", "resizePolicy": RESIZE}])
    kept = {**copy.deepcopy(resizable), "status": copy.deepcopy(status)}
    DisabledFields(32).drop("Pod", kept, resizable)
    assert kept["status"]["containerStatuses"][0]["allocatedResources"] == {"cpu": "1"}


def test_a_status_write_leaves_the_spec_it_shares_with_the_stored_pod_alone() -> None:
    old = _pod(containers=[{"name": "a", "resizePolicy": RESIZE}])
    new = {**old, "status": {"hostIPs": [{"ip": "10.0.0.1"}]}}
    DisabledFields(28).drop("Pod", new, old)
    assert new["spec"] is old["spec"] and new["spec"]["containers"][0]["resizePolicy"] == RESIZE
    assert "hostIPs" not in new["status"]  # PodHostIPs is alpha in 1.28


def test_a_1_28_sidecar_becomes_a_plain_init_container() -> None:
    pod = _pod(initContainers=[{"name": "proxy", "restartPolicy": "Always"}], containers=[{"name": "a"}])
    DisabledFields(28).drop("Pod", pod, None)
    assert pod["spec"]["initContainers"] == [{"name": "proxy"}]


def test_a_sleep_hook_goes_with_the_handler_and_lifecycle_it_leaves_empty() -> None:
    """dropPodLifecycleSleepAction: a handler left with no action is removed, and a lifecycle left with
    no handler; a handler with another action keeps it."""
    pod = _pod(
        containers=[
            {"name": "a", "lifecycle": {"preStop": {"sleep": {"seconds": 5}}}},
            {"name": "b", "lifecycle": {"preStop": {"sleep": {"seconds": 5}, "exec": {"command": ["x"]}}}},
            {
                "name": "c",
                "lifecycle": {
                    "postStart": {"sleep": {"seconds": 1}},
                    "preStop": {"exec": {"command": ["y"]}},
                },
            },
        ]
    )
    DisabledFields(29).drop("Pod", pod, None)
    assert pod["spec"]["containers"] == [
        {"name": "a"},
        {"name": "b", "lifecycle": {"preStop": {"exec": {"command": ["x"]}}}},
        {"name": "c", "lifecycle": {"preStop": {"exec": {"command": ["y"]}}}},
    ]


def test_a_stop_signal_is_cleared_on_every_release_with_the_lifecycle_it_empties() -> None:
    pod = _pod(containers=[{"name": "a", "lifecycle": {"stopSignal": "SIGUSR1"}}])
    DisabledFields(35).drop("Pod", pod, None)
    assert pod["spec"]["containers"] == [{"name": "a"}]


def test_an_image_volume_goes_whole_with_its_mounts() -> None:
    pod = _pod(
        volumes=[
            {"name": "model", "image": {"reference": "registry/model:1"}},
            {"name": "scratch", "emptyDir": {}},
        ],
        containers=[
            {
                "name": "a",
                "volumeMounts": [
                    {"name": "model", "mountPath": "/m"},
                    {"name": "scratch", "mountPath": "/s"},
                ],
            },
            {"name": "b", "volumeMounts": [{"name": "model", "mountPath": "/m"}]},
        ],
    )
    DisabledFields(32).drop("Pod", pod, None)
    assert pod["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {}}]
    assert pod["spec"]["containers"] == [
        {"name": "a", "volumeMounts": [{"name": "scratch", "mountPath": "/s"}]},
        {"name": "b"},
    ]
    on = _pod(volumes=[{"name": "model", "image": {"reference": "r"}}])
    DisabledFields(33).drop("Pod", on, None)
    assert on["spec"]["volumes"] == [{"name": "model", "image": {"reference": "r"}}]


def test_a_proc_mount_is_forced_to_default_not_cleared() -> None:
    """dropDisabledProcMountField: kube keeps the field (1.12 forced it non-nil) but as `Default`; only a
    non-default value in the old spec counts as in use."""
    pod = _pod(containers=[{"name": "a", "securityContext": {"procMount": "Unmasked"}}])
    DisabledFields(32).drop("Pod", pod, None)
    assert pod["spec"]["containers"][0]["securityContext"] == {"procMount": "Default"}
    old = _pod(containers=[{"name": "a", "securityContext": {"procMount": "Default"}}])
    new = _pod(containers=[{"name": "a", "securityContext": {"procMount": "Unmasked"}}])
    DisabledFields(32).drop("Pod", new, old)
    assert new["spec"]["containers"][0]["securityContext"] == {"procMount": "Default"}


def test_host_users_false_is_in_use_and_dropped_from_a_new_pod_before_1_33() -> None:
    pod = _pod(hostUsers=False, containers=[{"name": "a"}])
    DisabledFields(31).drop("Pod", pod, None)
    assert "hostUsers" not in pod["spec"]
    old = _pod(hostUsers=False, containers=[{"name": "a"}])
    new = copy.deepcopy(old)
    DisabledFields(31).drop("Pod", new, old)
    assert new["spec"]["hostUsers"] is False


def test_dra_claims_go_from_the_spec_its_containers_and_the_status_until_1_34() -> None:
    pod = _pod(
        resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}],
        containers=[{"name": "a", "resources": {"claims": [{"name": "gpu"}], "limits": {"cpu": "1"}}}],
    )
    pod["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu"}]}
    DisabledFields(33).drop("Pod", pod, None)
    assert "resourceClaims" not in pod["spec"] and "resourceClaimStatuses" not in pod["status"]
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}}


def test_resource_health_status_is_cleared_whatever_the_old_pod_holds() -> None:
    old = _pod(containers=[{"name": "a"}])
    old["status"] = {"containerStatuses": [{"name": "a", "allocatedResourcesStatus": [{"name": "x"}]}]}
    new = copy.deepcopy(old)
    DisabledFields(35).drop("Pod", new, old)
    assert new["status"]["containerStatuses"] == [{"name": "a"}]


def test_match_label_keys_leave_the_pod_affinity_terms_of_a_1_30_deployment() -> None:
    term = {"topologyKey": "zone", "matchLabelKeys": ["app"], "mismatchLabelKeys": ["team"]}
    template = {
        "spec": {
            "containers": [{"name": "a"}],
            "affinity": {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [dict(term)]},
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "podAffinityTerm": dict(term)}
                    ]
                },
            },
        }
    }
    deployment = {"kind": "Deployment", "spec": {"template": template}}
    DisabledFields(30).drop("Deployment", deployment, None)
    affinity = deployment["spec"]["template"]["spec"]["affinity"]
    assert affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {"topologyKey": "zone"}
    ]
    preferred = affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert preferred["podAffinityTerm"] == {"topologyKey": "zone"}


def test_a_cron_job_s_job_template_and_pod_template_are_both_gated() -> None:
    cronjob = {
        "kind": "CronJob",
        "spec": {
            "jobTemplate": {
                "spec": {
                    "managedBy": "kueue.x-k8s.io/multikueue",
                    "successPolicy": {"rules": [{"succeededCount": 1}]},
                    "template": {"spec": {"initContainers": [{"name": "s", "restartPolicy": "Always"}]}},
                }
            }
        },
    }
    DisabledFields(30).drop("CronJob", cronjob, None)
    job = cronjob["spec"]["jobTemplate"]["spec"]
    assert "managedBy" not in job and "successPolicy" not in job
    assert job["template"]["spec"]["initContainers"] == [{"name": "s", "restartPolicy": "Always"}]


def test_a_1_28_job_loses_the_1_29_fields_but_keeps_them_on_an_update_that_had_them() -> None:
    spec = {"podReplacementPolicy": "Failed", "backoffLimitPerIndex": 0, "maxFailedIndexes": 2}
    job = {"kind": "Job", "spec": dict(spec)}
    DisabledFields(28).drop("Job", job, None)
    assert job["spec"] == {}
    old = {"kind": "Job", "spec": dict(spec)}
    new = {"kind": "Job", "spec": {**spec, "maxFailedIndexes": 3}}
    DisabledFields(28).drop("Job", new, old)
    assert new["spec"] == {**spec, "maxFailedIndexes": 3}  # a limit of 0 is a value in use


def test_statefulset_max_unavailable_and_service_traffic_distribution() -> None:
    statefulset = {
        "kind": "StatefulSet",
        "spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": 2}}},
    }
    DisabledFields(34).drop("StatefulSet", statefulset, None)
    assert statefulset["spec"]["updateStrategy"] == {"rollingUpdate": {}}
    service = {"kind": "Service", "spec": {"trafficDistribution": "PreferClose"}}
    DisabledFields(30).drop("Service", service, None)
    assert service["spec"] == {}
    kept = {"kind": "Service", "spec": {"trafficDistribution": "PreferClose"}}
    DisabledFields(31).drop("Service", kept, None)
    assert kept["spec"] == {"trafficDistribution": "PreferClose"}


def test_a_caller_of_no_release_and_a_kind_with_no_gates_are_left_alone() -> None:
    pod = _pod(containers=[{"name": "a", "resizePolicy": RESIZE, "lifecycle": {"stopSignal": "SIGTERM"}}])
    before = copy.deepcopy(pod)
    DisabledFields(LATEST).drop("Pod", pod, None)
    assert pod == before
    config_map = {"kind": "ConfigMap", "data": {"resizePolicy": "x"}}
    DisabledFields(27).drop("ConfigMap", config_map, None)
    assert config_map == {"kind": "ConfigMap", "data": {"resizePolicy": "x"}}
