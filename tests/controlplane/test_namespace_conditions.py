"""The namespace controller's status conditions: Kubernetes' types, reasons and messages."""

from __future__ import annotations

from tenantgpu.controlplane.namespaces import CONDITION_TYPES, DeletionProgress, merge_conditions


def test_a_clean_pass_reports_every_condition_false_with_its_all_clear_reason() -> None:
    wanted = DeletionProgress().conditions()
    assert list(wanted) == list(CONDITION_TYPES)
    assert wanted["NamespaceDeletionDiscoveryFailure"] == (
        "False",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    )
    assert wanted["NamespaceDeletionContentFailure"] == (
        "False",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    )
    assert wanted["NamespaceContentRemaining"] == (
        "False",
        "ContentRemoved",
        "All content successfully removed",
    )
    assert wanted["NamespaceFinalizersRemaining"] == (
        "False",
        "ContentRemoved",
        "All content successfully removed",
    )


def test_remaining_content_finalizers_and_failures_are_named_sorted() -> None:
    progress = DeletionProgress(
        content_errors=["secrets.: boom", "configmaps.: bang"],
        remaining={"pods.": 2, "leases.coordination.k8s.io": 1, "secrets.": 0},
        finalizers={"example.com/b": 1, "example.com/a": 3},
    )
    assert not progress.done
    wanted = progress.conditions()
    assert wanted["NamespaceContentRemaining"] == (
        "True",
        "SomeResourcesRemain",
        "Some resources are remaining: leases.coordination.k8s.io has 1 resource instances, "
        "pods. has 2 resource instances",
    )
    assert wanted["NamespaceFinalizersRemaining"] == (
        "True",
        "SomeFinalizerRemain",
        "Some finalizers are remaining: example.com/a in 3 resource instances, "
        "example.com/b in 1 resource instances",
    )
    assert wanted["NamespaceDeletionContentFailure"] == (
        "True",
        "ContentDeletionFailed",
        "Failed to delete all resource types, 2 remaining: configmaps.: bang, secrets.: boom",
    )
    failed = DeletionProgress(discovery_error="Discovery failed for some groups: x").conditions()
    assert failed["NamespaceDeletionDiscoveryFailure"][:2] == ("True", "DiscoveryFailed")


def test_transition_time_moves_only_when_the_status_does() -> None:
    first = merge_conditions([], DeletionProgress(remaining={"pods.": 1}).conditions(), "T1")
    assert first is not None
    assert merge_conditions(first, DeletionProgress(remaining={"pods.": 1}).conditions(), "T2") is None
    recount = merge_conditions(first, DeletionProgress(remaining={"pods.": 2}).conditions(), "T2")
    assert recount is not None
    remaining = next(c for c in recount if c["type"] == "NamespaceContentRemaining")
    assert remaining["lastTransitionTime"] == "T1" and "has 2 resource" in remaining["message"]
    cleared = merge_conditions(recount, DeletionProgress().conditions(), "T3")
    assert cleared is not None
    remaining = next(c for c in cleared if c["type"] == "NamespaceContentRemaining")
    assert (remaining["status"], remaining["lastTransitionTime"]) == ("False", "T3")
