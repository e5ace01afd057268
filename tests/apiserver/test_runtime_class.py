"""RuntimeClass (node.k8s.io/v1) as kube-apiserver 1.33 serves it, and its RuntimeClass admission plugin.

Facts, from kubernetes/kubernetes v1.33: `pkg/apis/node/validation/validation.go` (the handler a DNS
label, the overhead checked as a container's *limits*, so under `overhead.limits[...]`; the tolerations
validated at `scheduling.tolerations.tolerations[i]` since validateTolerations appends `tolerations` to a
path that already ends in it, their repeats reported at `scheduling.tolerations[i]`; the handler
immutable), `pkg/registry/node/runtimeclass/strategy.go` (no generation, no status,
AllowUnconditionalUpdate false, GetWarningsForRuntimeClass on create and update), `pkg/api/node/util.go`
(the deprecated node labels), `pkg/printers/internalversion/printers.go` (NAME, HANDLER, AGE),
`plugin/pkg/admission/runtimeclass/admission.go`, `pkg/util/tolerations/tolerations.go`
(MergeTolerations), `pkg/kubeapiserver/options/plugins.go` (the plugin's place), and
`staging/src/k8s.io/component-helpers/resource/helpers.go` (a pod's overhead in its requests, and in
the limits it has).
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tenantgpu.apiserver import discovery, errors
from tenantgpu.apiserver.admission import AdmissionAttributes, merge_tolerations, same_resources
from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.kinds import Kind, kind_table
from tenantgpu.apiserver.limitranger import violations
from tenantgpu.apiserver.nodelabels import runtime_class_warnings
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.quota import pod_usage
from tenantgpu.apiserver.registry import DeleteOptions
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore
from tenantgpu.apiserver.tables import to_table
from tenantgpu.apiserver.validation import validate

Obj = dict[str, Any]
ADMIN = UserInfo("admin", ("system:masters",))
NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def runtime_class(name: str = "nvidia", handler: str = "nvidia", **fields: Any) -> Obj:
    return {"metadata": {"name": name}, "handler": handler, **fields}


def pod(name: str = "p", **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}], **spec},
    }


def messages(obj: Obj, old: Obj | None = None, kind: str = "RuntimeClass") -> list[str]:
    return [str(c) for c in validate(kind, obj, old=old)]


# --- the kind -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("minor", [27, 28, 31, 33])
def test_every_supported_release_serves_it_cluster_scoped_without_short_names(minor: int) -> None:
    kind = kind_table(minor=minor).resource("node.k8s.io", "v1", "runtimeclasses")
    assert kind is not None
    assert (kind.kind, kind.namespaced, kind.short_names, kind.subresources) == (
        "RuntimeClass",
        False,
        (),
        (),
    )
    assert kind.strategy.generation is None  # kube's strategy keeps none
    listed = discovery.resource_list(kind_table(minor=minor), "node.k8s.io", "v1")
    entry = next(r for r in listed["resources"] if r["name"] == "runtimeclasses")
    assert entry["kind"] == "RuntimeClass" and entry["namespaced"] is False
    assert "shortNames" not in entry and entry["singularName"] == "runtimeclass"


def test_kubectl_get_shows_name_handler_and_age() -> None:
    created = runtime_class(metadata={"name": "nvidia", "creationTimestamp": "2026-12-01T11:00:00Z"})
    table = to_table("RuntimeClass", [created], now=NOW)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Handler", "Age"]
    assert table["rows"][0]["cells"] == ["nvidia", "nvidia", "60m"]


# --- validation ---------------------------------------------------------------------------------------


def test_a_class_with_a_handler_overhead_and_scheduling_is_valid() -> None:
    assert (
        messages(
            runtime_class(
                overhead={"podFixed": {"cpu": "250m", "memory": "120Mi", "nvidia.com/gpu": "1"}},
                scheduling={
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                },
            )
        )
        == []
    )


def test_the_handler_is_a_dns_label_and_an_empty_one_gets_the_label_message() -> None:
    """NameIsDNSLabel(handler, false): kube has no Required for it; "" fails the label regex."""
    label_rule = (
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
        "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
        "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    )
    assert messages(runtime_class(handler="")) == [f'handler: Invalid value: "": {label_rule}']
    missing = runtime_class()
    del missing["handler"]
    assert messages(missing) == [f'handler: Invalid value: "": {label_rule}']
    assert messages(runtime_class(handler="Kata")) == [f'handler: Invalid value: "Kata": {label_rule}']
    # a valid subdomain fails for its dots alone (IsDNS1123Label)
    assert messages(runtime_class(handler="runc.v2")) == [
        'handler: Invalid value: "runc.v2": must not contain dots'
    ]
    assert messages(runtime_class(handler="a" * 64)) == [
        f'handler: Invalid value: "{"a" * 64}": must be no more than 63 characters'
    ]


def test_the_name_is_a_dns_subdomain_and_the_kind_is_named_with_its_group() -> None:
    found = validate("RuntimeClass", runtime_class(name="GPU"))
    assert [c.field for c in found] == ["metadata.name"]
    assert "a lowercase RFC 1123 subdomain" in found[0].message
    assert messages({"metadata": {"name": "x", "namespace": "default"}, "handler": "runc"}) == [
        "metadata.namespace: Forbidden: not allowed on this type"
    ]


def test_the_overhead_is_checked_as_a_container_s_limits() -> None:
    """validateOverhead hands podFixed to ValidateContainerResourceRequirements as Limits: the path says
    `limits`, not `podFixed`."""
    assert messages(runtime_class(overhead={"podFixed": {"cpu": "-1"}})) == [
        'overhead.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0'
    ]
    assert messages(runtime_class(overhead={"podFixed": {"gpu": "1"}})) == [
        'overhead.limits[gpu]: Invalid value: "gpu": must be a standard resource for containers'
    ]
    assert messages(runtime_class(overhead={})) == []


def test_a_pod_s_own_overhead_is_checked_the_same_way() -> None:
    assert messages(pod(overhead={"memory": "-1Mi"}), kind="Pod") == [
        'spec.overhead.limits[memory]: Invalid value: "-1Mi": must be greater than or equal to 0'
    ]


def test_the_node_selector_holds_labels() -> None:
    """ValidateLabels at `scheduling.nodeSelector`, the key's and the value's errors under that path."""
    found = messages(runtime_class(scheduling={"nodeSelector": {"bad key": "ok", "gpu": "not valid"}}))
    assert len(found) == 2
    assert found[0].startswith('scheduling.nodeSelector: Invalid value: "bad key": name part must consist of')
    assert found[1].startswith(
        'scheduling.nodeSelector: Invalid value: "not valid": a valid label must be an empty string'
    )


def test_tolerations_are_checked_one_level_deeper_than_they_are() -> None:
    """kube's validateScheduling passes `scheduling.tolerations` to validateTolerations, which adds
    `tolerations` again before ValidateTolerations."""
    tolerations = [
        {"operator": "Equal", "value": "x"},
        {"key": "gpu", "operator": "Exists", "value": "yes"},
        {"key": "gpu", "operator": "In"},
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5},
        {"key": "gpu", "operator": "Exists", "effect": "Never"},
    ]
    assert messages(runtime_class(scheduling={"tolerations": tolerations})) == [
        'scheduling.tolerations.tolerations[0].operator: Invalid value: "Equal": operator must be Exists '
        'when `key` is empty, which means "match all values and all keys"',
        'scheduling.tolerations.tolerations[1].operator: Invalid value: "yes": value must be empty when '
        "`operator` is 'Exists'",
        'scheduling.tolerations.tolerations[2].operator: Unsupported value: "In": supported values: '
        '"Equal", "Exists"',
        'scheduling.tolerations.tolerations[3].effect: Invalid value: "NoSchedule": effect must be '
        "'NoExecute' when `tolerationSeconds` is set",
        'scheduling.tolerations.tolerations[4].effect: Unsupported value: "Never": supported values: '
        '"NoSchedule", "PreferNoSchedule", "NoExecute"',
    ]


def test_a_repeated_toleration_is_a_duplicate_at_the_list_s_own_path() -> None:
    """The list key is key/operator/value/effect (tolerationSeconds aside); kube shows the internal
    struct with Go's %#v."""
    repeated = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    found = messages(
        runtime_class(scheduling={"tolerations": [repeated, {**repeated}, {**repeated, "operator": "Equal"}]})
    )
    assert found == [
        'scheduling.tolerations[1]: Duplicate value: core.Toleration{Key:"gpu", Operator:"Exists", '
        'Value:"", Effect:"NoSchedule", TolerationSeconds:(*int64)(nil)}'
    ]


def test_the_handler_never_changes_but_the_rest_may() -> None:
    """ValidateRuntimeClassUpdate: ValidateImmutableField(handler)."""
    old = runtime_class(metadata={"name": "nvidia", "uid": "u1"})
    changed = copy.deepcopy(old)
    changed["handler"] = "kata"
    assert messages(changed, old) == ['handler: Invalid value: "kata": field is immutable']
    reshaped = copy.deepcopy(old)
    reshaped["overhead"] = {"podFixed": {"cpu": "100m"}}
    reshaped["scheduling"] = {"nodeSelector": {"gpu": "true"}}
    assert messages(reshaped, old) == []


def test_deprecated_node_labels_in_the_node_selector_are_warned_about() -> None:
    """GetWarningsForRuntimeClass: `scheduling.nodeSelector: <why>`, one per deprecated key."""
    found = runtime_class_warnings(
        runtime_class(
            scheduling={
                "nodeSelector": {
                    "beta.kubernetes.io/arch": "amd64",
                    "kubernetes.io/os": "linux",
                    "failure-domain.beta.kubernetes.io/zone": "a",
                }
            }
        )
    )
    assert found == [
        'scheduling.nodeSelector: deprecated since v1.14; use "kubernetes.io/arch" instead',
        'scheduling.nodeSelector: deprecated since v1.17; use "topology.kubernetes.io/zone" instead',
    ]
    assert runtime_class_warnings(runtime_class()) == []
    kind = kind_table().resource("node.k8s.io", "v1", "runtimeclasses")
    assert kind is not None and kind.strategy.warnings is runtime_class_warnings


# --- MergeTolerations and the overhead's comparison ---------------------------------------------------


def test_merge_tolerations_keeps_the_first_of_equals_and_drops_what_another_covers() -> None:
    gpu_exists = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    gpu_equal = {"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}
    other = {"key": "zone", "operator": "Equal", "value": "a"}
    assert merge_tolerations([gpu_equal, other], [gpu_exists, {**other}]) == [other, gpu_exists]
    # an empty key with Exists tolerates everything: it alone stays
    everything = {"operator": "Exists"}
    assert merge_tolerations([gpu_equal, other], [everything]) == [everything]
    # a NoExecute toleration with seconds covers one that stays no longer; none at all covers both
    short = {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
    long = {**short, "tolerationSeconds": 600}
    forever = {"key": "k", "operator": "Exists", "effect": "NoExecute"}
    assert merge_tolerations([long], [short]) == [long]
    assert merge_tolerations([short], [long]) == [long]
    assert merge_tolerations([short, long], [forever]) == [forever]
    # isSuperset's Equal case wants the covered toleration's operator to be "Equal" itself: one that
    # leaves the operator out covers an Equal one, not the other way round, in either order
    bare = {"key": "k", "value": "v"}
    equal = {"key": "k", "operator": "Equal", "value": "v"}
    assert merge_tolerations([bare], [equal]) == [bare]
    assert merge_tolerations([equal], [bare]) == [bare]
    assert merge_tolerations([], []) == []


def test_overheads_compare_by_value_and_an_empty_one_is_none() -> None:
    assert same_resources({"cpu": "1000m", "memory": "1Gi"}, {"cpu": "1", "memory": "1024Mi"})
    assert not same_resources({"cpu": "1"}, {"cpu": "1", "memory": "0"})
    assert same_resources(None, {}) and not same_resources(None, {"cpu": "0"})


# --- through the API server's registry and admission chain ---------------------------------------------


class NamesAClass:
    """A mutating plugin placed where the config's plugins go: after the RuntimeClass plugin's mutating
    half, as a mutating webhook runs (HAMi's names a class on GPU pods)."""

    name = "NamesAClass"
    mutating = True

    def __init__(self, class_name: str) -> None:
        self.class_name = class_name

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if attributes.operation == "CREATE" and attributes.kind.kind == "Pod" and not attributes.subresource:
            labels = ((attributes.obj or {}).get("metadata") or {}).get("labels") or {}
            if labels.get("gpu") == "yes":
                assert attributes.obj is not None
                attributes.obj["spec"]["runtimeClassName"] = self.class_name
                attributes.mutated = True


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[APIServer]:
    store = SQLiteDatastore(tmp_path / "s.db")
    running = APIServer(
        APIServerConfig(
            name="t", datastore=store, pki=ServerPKI.create("t"), admission_plugins=[NamesAClass("nvidia")]
        )
    )
    await running.registry.load()  # with the default namespace
    yield running
    store.close()


def _kinds(server: APIServer) -> tuple[Kind, Kind]:
    classes = server.kinds.resource("node.k8s.io", "v1", "runtimeclasses")
    pods = server.kinds.resource("", "v1", "pods")
    assert classes is not None and pods is not None
    return classes, pods


async def refused(create: Callable[[], Any]) -> errors.APIError:
    with pytest.raises(errors.APIError) as caught:
        await create()
    return caught.value


async def test_create_get_list_update_and_delete(server: APIServer) -> None:
    classes, _ = _kinds(server)
    registry = server.registry
    sent = runtime_class(overhead={"podFixed": {"cpu": "0.25", "memory": "128Mi"}})
    stored = (await registry.create(classes, "", sent, ADMIN)).obj
    assert stored["apiVersion"] == "node.k8s.io/v1" and stored["kind"] == "RuntimeClass"
    assert stored["overhead"] == {"podFixed": {"cpu": "250m", "memory": "128Mi"}}  # canonical quantities
    assert "generation" not in stored["metadata"] and "status" not in stored
    assert [e.obj["metadata"]["name"] for e in registry.list(classes, None)] == ["nvidia"]

    def with_selector(obj: Obj) -> Obj:
        obj["scheduling"] = {"nodeSelector": {"nvidia.com/gpu.present": "true"}}
        return obj

    patched = (await registry.modify(classes, "", "nvidia", with_selector, ADMIN)).obj
    assert patched["scheduling"] == {"nodeSelector": {"nvidia.com/gpu.present": "true"}}
    assert "generation" not in patched["metadata"]

    # a PUT must name the version it replaces: kube's strategy allows no unconditional update
    replacement = runtime_class()
    error = await refused(lambda: registry.update(classes, "", "nvidia", copy.deepcopy(replacement), ADMIN))
    assert error.code == 422
    assert error.message == (
        'runtimeclasses.node.k8s.io "nvidia" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
        "must be specified for an update"
    )
    replacement["metadata"]["resourceVersion"] = patched["metadata"]["resourceVersion"]
    replaced = (await registry.update(classes, "", "nvidia", replacement, ADMIN)).obj
    assert "overhead" not in replaced and "scheduling" not in replaced

    handler = copy.deepcopy(replaced)
    handler["handler"] = "kata"
    error = await refused(lambda: registry.update(classes, "", "nvidia", handler, ADMIN))
    assert error.code == 422
    assert (
        error.message
        == 'RuntimeClass.node.k8s.io "nvidia" is invalid: handler: Invalid value: "kata": field is immutable'
    )

    await registry.delete(classes, "", "nvidia", DeleteOptions.parse(None, {}), ADMIN)
    assert registry.get_object(classes, "", "nvidia") is None


def test_the_plugin_s_halves_sit_where_kube_orders_them(server: APIServer) -> None:
    """AllOrderedPlugins: ... StorageObjectInUseProtection, ..., PersistentVolumeClaimResize, RuntimeClass,
    ..., MutatingAdmissionWebhook, ValidatingAdmissionWebhook, ResourceQuota. Mutating halves run first,
    in order, then the validating ones."""
    mutating = [p.name for p in server.admission.plugins if p.mutating]
    validating = [p.name for p in server.admission.plugins if not p.mutating]
    assert mutating.index("RuntimeClass") == mutating.index("StorageObjectInUseProtection") + 1
    assert mutating.index("RuntimeClass") < mutating.index("NamesAClass")  # where webhooks stand
    assert validating.index("RuntimeClass") == validating.index("PersistentVolumeClaimResize") + 1
    assert validating[validating.index("RuntimeClass") + 1 :][-1] == "ResourceQuota"


async def test_a_pod_naming_a_missing_class_is_forbidden(server: APIServer) -> None:
    _, pods = _kinds(server)
    error = await refused(
        lambda: server.registry.create(pods, "default", pod(runtimeClassName="nvidia"), ADMIN)
    )
    assert (error.code, error.reason) == (403, "Forbidden")
    assert error.message == 'pods "p" is forbidden: pod rejected: RuntimeClass "nvidia" not found'
    assert error.details == {"name": "p", "kind": "pods"}
    # a generateName pod is named by its prefix: the name is still to be generated
    named = pod(runtimeClassName="nvidia")
    named["metadata"] = {"generateName": "web-", "namespace": "default"}
    error = await refused(lambda: server.registry.create(pods, "default", named, ADMIN))
    assert error.message == 'pods "web-" is forbidden: pod rejected: RuntimeClass "nvidia" not found'


async def test_an_empty_class_name_fails_kube_s_live_lookup(server: APIServer) -> None:
    """The lister misses "", and client-go's Get refuses an empty name before asking: the plugin returns
    that error, which the API server answers as a 500 with no reason."""
    _, pods = _kinds(server)
    error = await refused(lambda: server.registry.create(pods, "default", pod(runtimeClassName=""), ADMIN))
    assert (error.code, error.reason, error.message) == (500, "", "resource name may not be empty")


async def test_a_pod_gets_its_class_s_overhead_and_an_equal_one_of_its_own_passes(server: APIServer) -> None:
    classes, pods = _kinds(server)
    await server.registry.create(
        classes, "", runtime_class(overhead={"podFixed": {"cpu": "250m", "memory": "1Gi"}}), ADMIN
    )
    stored = (await server.registry.create(pods, "default", pod(runtimeClassName="nvidia"), ADMIN)).obj
    assert stored["spec"]["overhead"] == {"cpu": "250m", "memory": "1Gi"}
    same = pod("same", runtimeClassName="nvidia", overhead={"cpu": "0.25", "memory": "1024Mi"})
    kept = (await server.registry.create(pods, "default", same, ADMIN)).obj
    assert kept["spec"]["overhead"] == {"cpu": "250m", "memory": "1Gi"}
    other = pod("other", runtimeClassName="nvidia", overhead={"cpu": "1"})
    error = await refused(lambda: server.registry.create(pods, "default", other, ADMIN))
    assert error.code == 403
    assert error.message == (
        "pods \"other\" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
    )


async def test_an_overhead_without_a_class_that_defines_one_is_forbidden(server: APIServer) -> None:
    """validateOverhead's else branch checks `pod.Spec.Overhead != nil`. JSON `overhead: {}` decodes into
    an empty map, which is not nil: kube refuses it too (the server keeps it through its decoding for
    this, see `_empty_pod_overhead`). `overhead: null` is nil."""
    classes, pods = _kinds(server)
    await server.registry.create(classes, "", runtime_class("runc", "runc"), ADMIN)
    why = "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
    for name, spec in (
        ("none", {"overhead": {"cpu": "100m"}}),
        ("plain", {"runtimeClassName": "runc", "overhead": {"cpu": "100m"}}),
        ("empty", {"overhead": {}}),
    ):
        error = await refused(
            lambda spec=spec, name=name: server.registry.create(pods, "default", pod(name, **spec), ADMIN)
        )
        assert (error.code, error.message) == (403, f'pods "{name}" is forbidden: {why}')
    created = (await server.registry.create(pods, "default", pod("null", overhead=None), ADMIN)).obj
    assert created["spec"].get("overhead") is None


async def test_a_class_named_by_a_later_mutating_plugin_is_checked_in_the_validating_phase(
    server: APIServer,
) -> None:
    """The mutating half ran before the class was named, so no overhead was set: the validating half
    finds the class missing, or its overhead not the pod's, as kube's does after a webhook."""
    classes, pods = _kinds(server)
    gpu_pod = pod("gpu")
    gpu_pod["metadata"]["labels"] = {"gpu": "yes"}
    error = await refused(lambda: server.registry.create(pods, "default", copy.deepcopy(gpu_pod), ADMIN))
    assert error.message == 'pods "gpu" is forbidden: pod rejected: RuntimeClass "nvidia" not found'

    await server.registry.create(classes, "", runtime_class(overhead={"podFixed": {"memory": "64Mi"}}), ADMIN)
    error = await refused(lambda: server.registry.create(pods, "default", copy.deepcopy(gpu_pod), ADMIN))
    assert error.message == (
        "pods \"gpu\" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
    )

    plain = runtime_class(scheduling={"nodeSelector": {"gpu": "true"}})
    current = server.registry.get_object(classes, "", "nvidia")
    assert current is not None
    plain["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    await server.registry.update(classes, "", "nvidia", plain, ADMIN)
    stored = (await server.registry.create(pods, "default", copy.deepcopy(gpu_pod), ADMIN)).obj
    # admitted, but the class's scheduling is the mutating half's, which saw no class
    assert stored["spec"]["runtimeClassName"] == "nvidia" and "nodeSelector" not in stored["spec"]


async def test_the_class_s_node_selector_and_tolerations_join_the_pod_s(server: APIServer) -> None:
    classes, pods = _kinds(server)
    gpu_taint = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    await server.registry.create(
        classes,
        "",
        runtime_class(
            scheduling={
                "nodeSelector": {"nvidia.com/gpu.present": "true"},
                "tolerations": [gpu_taint, {"key": "dedicated", "operator": "Equal", "value": "ml"}],
            }
        ),
        ADMIN,
    )
    mine = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}
    sent = pod(runtimeClassName="nvidia", nodeSelector={"zone": "a"}, tolerations=[mine])
    stored = (await server.registry.create(pods, "default", sent, ADMIN)).obj
    assert stored["spec"]["nodeSelector"] == {"zone": "a", "nvidia.com/gpu.present": "true"}
    tolerations = stored["spec"]["tolerations"]
    # the pod's own Equal toleration is covered by the class's Exists one and goes; the class's follow
    # the pod's (with DefaultTolerationSeconds' two, which the pod had before the plugin ran)
    assert mine not in tolerations
    assert tolerations[-2:] == [gpu_taint, {"key": "dedicated", "operator": "Equal", "value": "ml"}]
    assert [t.get("key") for t in tolerations[:2]] == [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ]
    no_selector = (
        await server.registry.create(pods, "default", pod("bare", runtimeClassName="nvidia"), ADMIN)
    ).obj
    assert no_selector["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}

    clash = pod("clash", runtimeClassName="nvidia", nodeSelector={"nvidia.com/gpu.present": "false"})
    error = await refused(lambda: server.registry.create(pods, "default", clash, ADMIN))
    assert (error.code, error.message) == (
        403,
        'pods "clash" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[nvidia.com/gpu.present] = '
        "true; pod.spec.nodeSelector[nvidia.com/gpu.present] = false",
    )


async def test_updates_status_and_binding_of_a_pod_are_not_the_plugin_s(server: APIServer) -> None:
    """Only a pod's create is admitted: once its class is gone, its updates and subresources still go."""
    classes, pods = _kinds(server)
    await server.registry.create(classes, "", runtime_class(overhead={"podFixed": {"cpu": "100m"}}), ADMIN)
    await server.registry.create(pods, "default", pod(runtimeClassName="nvidia"), ADMIN)
    await server.registry.delete(classes, "", "nvidia", DeleteOptions.parse(None, {}), ADMIN)

    def labelled(obj: Obj) -> Obj:
        obj["metadata"]["labels"] = {"team": "ml"}
        return obj

    def running(obj: Obj) -> Obj:
        obj["status"] = {"phase": "Running"}
        return obj

    await server.registry.modify(pods, "default", "p", labelled, ADMIN)
    await server.registry.modify(pods, "default", "p", running, ADMIN, subresource="status")
    await server.registry.modify(
        pods,
        "default",
        "p",
        lambda obj: {**obj, "spec": {**obj["spec"], "nodeName": "node-1"}},
        ADMIN,
        subresource="binding",
    )
    stored = server.registry.get_object(pods, "default", "p")
    assert stored is not None
    assert stored["metadata"]["labels"] == {"team": "ml"} and stored["status"]["phase"] == "Running"
    assert stored["spec"]["nodeName"] == "node-1" and stored["spec"]["overhead"] == {"cpu": "100m"}


# --- quota ---------------------------------------------------------------------------------------------


def test_a_pod_s_overhead_counts_in_its_requests_and_in_the_limits_it_has() -> None:
    """PodRequests adds the overhead to every request; PodLimits only to a non-zero limit the pod has."""
    counted = pod(overhead={"cpu": "250m", "memory": "64Mi"})
    counted["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}
    usage = pod_usage(counted)
    assert usage["requests.cpu"] == usage["cpu"] == Decimal("0.75")
    assert usage["requests.memory"] == usage["memory"] == 64 * 1024 * 1024
    assert usage["limits.cpu"] == Decimal("1.25")
    assert "limits.memory" not in usage


async def test_the_quota_admits_a_pod_by_its_requests_with_the_overhead(server: APIServer) -> None:
    classes, pods = _kinds(server)
    quotas = server.kinds.resource("", "v1", "resourcequotas")
    assert quotas is not None
    await server.registry.create(
        quotas,
        "default",
        {"metadata": {"name": "compute", "namespace": "default"}, "spec": {"hard": {"requests.cpu": "1"}}},
        ADMIN,
    )
    await server.registry.create(classes, "", runtime_class(overhead={"podFixed": {"cpu": "600m"}}), ADMIN)
    sized = pod(runtimeClassName="nvidia")
    sized["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
    error = await refused(lambda: server.registry.create(pods, "default", copy.deepcopy(sized), ADMIN))
    assert error.code == 403
    assert (
        "exceeded quota: compute, requested: requests.cpu=1100m, used: requests.cpu=0, limited: requests.cpu=1"
        in (error.message)
    )
    del sized["spec"]["runtimeClassName"]
    await server.registry.create(pods, "default", sized, ADMIN)


def test_a_limit_range_leaves_the_overhead_out() -> None:
    """kube's LimitRanger sums a pod's containers (its own podRequests/podLimits), without the overhead."""
    limited = pod(overhead={"cpu": "250m"})
    limited["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}}
    pod_max = {"spec": {"limits": [{"type": "Pod", "max": {"cpu": "500m"}}]}}
    assert violations(pod_max, limited) == []
    limited["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "600m"
    assert violations(pod_max, limited) == ["maximum cpu usage per Pod is 500m, but limit is 600m"]
