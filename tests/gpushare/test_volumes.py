"""Claims and volumes as kube's PV controller and VolumeBinding match them.

Facts (Kubernetes v1.33): `component-helpers/storage/volume/pv_helpers.go` FindMatchingVolume picks a
volume pre-bound to the claim first, else the smallest Available one of the claim's class, volume
mode, access modes (a superset) and selector with room enough, and with delayed binding and no node
only a pre-bound one; GetPersistentVolumeClaimClass reads the beta annotation before
`spec.storageClassName`; VolumeBinding's PreFilter refuses a missing claim (`persistentvolumeclaim
"x" not found`), one being deleted, a lost one and unbound immediate claims (`pod has unbound
immediate PersistentVolumeClaims`), and its Filter a node outside a bound volume's node affinity
(`node(s) had volume node affinity conflict`); FitError prints a PreFilter refusal in place of the
histogram, and DefaultPreemption then finds every node unresolvable (its message, in FitError's
`" %v."`, ends in two full stops, as kube-scheduler's do).
"""

from __future__ import annotations

from typing import Any

from tenantgpu.gpushare import volumes as v
from tenantgpu.gpushare.reasons import fit_error, prefilter_error


def claim(
    name: str = "data", size: str = "5Gi", modes: tuple[str, ...] = ("ReadWriteOnce",), **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "7"},
        "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": size}}, **spec},
        "status": {"phase": "Pending"},
    }


def volume(
    name: str, size: str, modes: tuple[str, ...] = ("ReadWriteOnce",), phase: str = "Available", **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": spec.pop("labels", {})},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": list(modes),
            "hostPath": {"path": "/x"},
            **spec,
        },
        "status": {"phase": phase},
    }


def names(found: dict[str, Any] | None) -> str | None:
    return None if found is None else found["metadata"]["name"]


def test_the_smallest_available_volume_with_room_enough_is_chosen() -> None:
    vols = [volume("big", "100Gi"), volume("small", "1Gi"), volume("fit", "10Gi"), volume("fit2", "8Gi")]
    assert names(v.find_matching_volume(claim(size="5Gi"), vols)) == "fit2"
    assert names(v.find_matching_volume(claim(size="5000Mi"), vols)) == "fit2"
    assert v.find_matching_volume(claim(size="200Gi"), vols) is None


def test_access_modes_class_mode_selector_and_phase_must_all_match() -> None:
    wanted = claim(
        modes=("ReadWriteMany",), storageClassName="fast", selector={"matchLabels": {"tier": "gold"}}
    )
    candidates = [
        volume("rwo-only", "10Gi", storageClassName="fast", labels={"tier": "gold"}),
        volume("other-class", "10Gi", ("ReadWriteMany",), storageClassName="slow", labels={"tier": "gold"}),
        volume("no-label", "10Gi", ("ReadWriteMany",), storageClassName="fast"),
        volume(
            "released",
            "10Gi",
            ("ReadWriteMany",),
            "Released",
            storageClassName="fast",
            labels={"tier": "gold"},
        ),
        volume(
            "block",
            "10Gi",
            ("ReadWriteMany",),
            storageClassName="fast",
            volumeMode="Block",
            labels={"tier": "gold"},
        ),
    ]
    assert v.find_matching_volume(wanted, candidates) is None
    good = volume(
        "good", "20Gi", ("ReadWriteMany", "ReadWriteOnce"), storageClassName="fast", labels={"tier": "gold"}
    )
    assert names(v.find_matching_volume(wanted, [*candidates, good])) == "good"


def test_a_volume_pre_bound_to_the_claim_wins_even_over_a_smaller_one() -> None:
    pre = volume("mine", "50Gi", claimRef={"namespace": "default", "name": "data"})
    other = volume("theirs", "5Gi", claimRef={"namespace": "default", "name": "other", "uid": "u"})
    assert names(v.find_matching_volume(claim(), [volume("tiny", "5Gi"), pre, other])) == "mine"
    # a claimRef with another uid is a different claim of the same name
    stale = volume("stale", "5Gi", claimRef={"namespace": "default", "name": "data", "uid": "older"})
    assert v.find_matching_volume(claim(), [stale]) is None


def test_delayed_binding_takes_only_a_pre_bound_volume_before_a_node_is_chosen() -> None:
    assert v.find_matching_volume(claim(), [volume("free", "10Gi")], delay_binding=True) is None
    pre = volume("pre", "10Gi", claimRef={"namespace": "default", "name": "data"})
    assert names(v.find_matching_volume(claim(), [pre], delay_binding=True)) == "pre"


def test_the_beta_annotation_names_the_class_before_the_spec_does() -> None:
    c = claim(storageClassName="fast")
    c["metadata"]["annotations"] = {v.ANN_BETA_STORAGE_CLASS: "legacy"}
    assert v.claim_class(c) == "legacy"
    assert v.claim_class(claim()) == ""


def test_node_affinity_of_a_local_volume() -> None:
    local = volume(
        "local",
        "10Gi",
        nodeAffinity={
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["w1"]}
                        ]
                    }
                ]
            }
        },
    )
    w1 = {"metadata": {"name": "w1", "labels": {"kubernetes.io/hostname": "w1"}}}
    w2 = {"metadata": {"name": "w2", "labels": {"kubernetes.io/hostname": "w2"}}}
    assert v.node_affinity_matches(local, w1)
    assert not v.node_affinity_matches(local, w2)
    assert v.node_affinity_matches(volume("anywhere", "1Gi"), w2)
    assert names(v.find_matching_volume(claim(), [local], node=w1)) == "local"
    assert v.find_matching_volume(claim(), [local], node=w2) is None


def pod(*claims: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "trainer", "namespace": "default"},
        "spec": {"volumes": [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]},
    }


def bound(name: str, volume_name: str) -> dict[str, Any]:
    c = claim(name, volumeName=volume_name)
    c["metadata"]["annotations"] = {v.ANN_BIND_COMPLETED: "yes"}
    c["status"] = {"phase": "Bound"}
    return c


def test_prefilter_refusals_name_the_claim() -> None:
    assert (
        v.judge_claims(pod("data"), {"data": None}, {}, {}).refusal
        == 'persistentvolumeclaim "data" not found'
    )
    deleting = claim()
    deleting["metadata"]["deletionTimestamp"] = "2026-12-06T10:00:00Z"
    assert v.judge_claims(pod("data"), {"data": deleting}, {}, {}).refusal == (
        'persistentvolumeclaim "data" is being deleted'
    )
    lost = bound("data", "pv-1")
    lost["status"] = {"phase": "Lost"}
    assert v.judge_claims(pod("data"), {"data": lost}, {}, {}).refusal == (
        'persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-1"'
    )
    assert v.judge_claims(pod("data"), {"data": claim()}, {}, {}).refusal == v.UNBOUND_IMMEDIATE


def test_a_pod_without_claims_and_a_pod_with_bound_claims_pass() -> None:
    assert v.judge_claims(pod(), {}, {}, {}) == v.ClaimVerdict()
    pv = volume("pv-1", "10Gi", "Bound")
    verdict = v.judge_claims(pod("data"), {"data": bound("data", "pv-1")}, {"pv-1": pv}, {})
    assert verdict.refusal is None and verdict.bound_volumes == (pv,)
    assert v.node_reason(verdict, {"metadata": {"name": "w1"}}) is None
    gone = v.judge_claims(pod("data"), {"data": bound("data", "pv-1")}, {"pv-1": None}, {})
    assert v.node_reason(gone, {"metadata": {"name": "w1"}}) == v.PV_NOT_EXIST


def test_failed_scheduling_messages_for_volume_refusals() -> None:
    assert prefilter_error(2, 'persistentvolumeclaim "data" not found') == (
        '0/2 nodes are available: persistentvolumeclaim "data" not found. preemption: 0/2 nodes are '
        "available: 2 Preemption is not helpful for scheduling.."
    )
    assert prefilter_error(1, v.UNBOUND_IMMEDIATE, preemption_policy="Never") == (
        "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: not "
        "eligible due to preemptionPolicy=Never.."
    )
    # the node affinity conflict is unresolvable: no eviction helps
    assert fit_error(2, {"w1": v.NODE_CONFLICT, "w2": v.NODE_CONFLICT}) == (
        "0/2 nodes are available: 2 node(s) had volume node affinity conflict. preemption: 0/2 nodes are "
        "available: 2 Preemption is not helpful for scheduling.."
    )


def test_claims_of_a_pods_volumes() -> None:
    p = pod("a", "b")
    p["spec"]["volumes"].append({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
    p["spec"]["volumes"].append({"name": "cfg", "configMap": {"name": "x"}})
    assert v.pod_claim_names(p) == ["a", "b", "trainer-scratch"]
    assert v.judge_claims(p, {"a": None}, {}, {}).refusal == 'persistentvolumeclaim "a" not found'
    only_ephemeral = pod()
    only_ephemeral["spec"]["volumes"] = [
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
    ]
    assert v.judge_claims(only_ephemeral, {}, {}, {}).refusal == (
        'waiting for ephemeral volume controller to create the persistentvolumeclaim "trainer-scratch"'
    )


def wffc(provisioner: str = "k8s.io/minikube-hostpath", **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "local"},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
        **extra,
    }


def test_a_delayed_claim_is_bound_for_the_chosen_node_not_refused() -> None:
    waiting = claim(storageClassName="local")
    verdict = v.judge_claims(pod("data"), {"data": waiting}, {}, {"local": wffc()})
    assert verdict.refusal is None and verdict.needs_binding
    w1 = {"metadata": {"name": "w1", "labels": {"kubernetes.io/hostname": "w1"}}}
    plan = v.bindings_for_node(verdict, w1, [])
    assert plan is not None and [(b.claim["metadata"]["name"], b.volume) for b in plan] == [("data", None)]
    assert v.selected_node_patch(waiting, "w1")["metadata"]["annotations"] == {v.ANN_SELECTED_NODE: "w1"}


def test_a_local_volume_is_taken_on_its_node_and_no_provisioner_means_a_bind_conflict_elsewhere() -> None:
    affinity = {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["w1"]}]}
            ]
        }
    }
    local = volume("local-w1", "10Gi", storageClassName="local", nodeAffinity=affinity)
    storage_class = wffc(v.NO_PROVISIONER)
    verdict = v.judge_claims(
        pod("data"), {"data": claim(storageClassName="local")}, {}, {"local": storage_class}
    )
    w1 = {"metadata": {"name": "w1", "labels": {"kubernetes.io/hostname": "w1"}}}
    w2 = {"metadata": {"name": "w2", "labels": {"kubernetes.io/hostname": "w2"}}}
    plan = v.bindings_for_node(verdict, w1, [local])
    assert (
        plan is not None and plan[0].volume is not None and plan[0].volume["metadata"]["name"] == "local-w1"
    )
    assert v.node_reason(verdict, w1, [local]) is None
    assert v.node_reason(verdict, w2, [local]) == v.BIND_CONFLICT
    patch = v.static_binding_patch(local, claim(storageClassName="local"))
    assert patch["spec"]["claimRef"]["name"] == "data" and patch["spec"]["claimRef"]["uid"] == "uid-data"


def test_two_delayed_claims_never_take_the_same_volume() -> None:
    both = pod("a", "b")
    claims = {"a": claim("a", storageClassName="local"), "b": claim("b", storageClassName="local")}
    verdict = v.judge_claims(both, claims, {}, {"local": wffc(v.NO_PROVISIONER)})
    one = [volume("only", "10Gi", storageClassName="local")]
    assert v.bindings_for_node(verdict, {"metadata": {"name": "w1"}}, one) is None
    two = [*one, volume("second", "10Gi", storageClassName="local")]
    plan = v.bindings_for_node(verdict, {"metadata": {"name": "w1"}}, two)
    assert plan is not None and {b.volume["metadata"]["name"] for b in plan if b.volume} == {"only", "second"}


def test_an_ephemeral_claim_the_pod_does_not_own_keeps_it_pending() -> None:
    p = pod()
    p["metadata"]["uid"] = "pod-uid"
    p["spec"]["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    foreign = claim("trainer-scratch")
    assert v.judge_claims(p, {"trainer-scratch": foreign}, {}, {}).refusal == (
        "PVC default/trainer-scratch was not created for pod default/trainer (pod is not owner)"
    )
    owned = claim("trainer-scratch")
    owned["metadata"]["ownerReferences"] = [
        {"kind": "Pod", "name": "trainer", "uid": "pod-uid", "controller": True}
    ]
    assert v.judge_claims(p, {"trainer-scratch": owned}, {}, {}).refusal == v.UNBOUND_IMMEDIATE


def test_the_default_class_is_the_newest_marked_one_then_the_first_by_name() -> None:
    """GetDefaultClass (`pkg/volume/util/storageclass.go`), which the DefaultStorageClass admission plugin
    and the PV controller's retroactive assignment share: the beta annotation marks a default too."""

    def storage_class(name: str, created: str, annotation: str | None) -> dict[str, Any]:
        annotations = {annotation: "true"} if annotation else {}
        return {"metadata": {"name": name, "creationTimestamp": created, "annotations": annotations}}

    ga, beta = v.DEFAULT_CLASS_ANNOTATIONS
    classes = [
        storage_class("old", "2026-12-01T00:00:00Z", ga),
        storage_class("zeta", "2026-12-05T00:00:00Z", beta),
        storage_class("alpha", "2026-12-05T00:00:00Z", ga),
        storage_class("unmarked", "2026-12-06T00:00:00Z", None),
    ]
    assert v.is_default_class(classes[1]) and not v.is_default_class(classes[3])
    chosen = v.default_storage_class(classes)
    assert chosen is not None and chosen["metadata"]["name"] == "alpha"
    assert v.default_storage_class(classes[3:]) is None
