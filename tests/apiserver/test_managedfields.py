"""Server-side apply's field management (`managedfields`), checked against kube's behaviour.

Facts from upstream (k8s.io/apimachinery `pkg/util/managedfields/internal`, sigs.k8s.io/structured-merge-diff
v6, as vendored by kube 1.33), which these tests pin down:
- a conflict reads `Apply failed with 1 conflict: conflict with "kubectl": .data.x`; with several,
  `Apply failed with N conflicts: conflicts with "<manager>":` and one `- <path>` line per field,
  managers sorted by their identifier (`conflict.go`); an updater prints as `"m" using apps/v1`;
- a manager's identifier is its entry without fields and time, and without apiVersion for an applier
  (`BuildManagerIdentifier`); entries are sorted Apply before Update, then by time and manager
  (`sortEncodedManagedFields`);
- an applied configuration owns its leaves, free map keys and list items, not the declared fields
  holding them (`tofieldset.go`); an update owns everything it added (`compare.go`);
- an apply to an object without managedFields first records its fields as `before-first-apply`'s
  (`skipnonapplied.go`); past ten update managers the oldest fold into `ancient-changes`
  (`capmanagers.go`); apiVersion, kind and the system metadata are owned by nobody (`stripmeta.go`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tenantgpu.apiserver import managedfields as mf
from tenantgpu.apiserver.fieldtree import FieldTree, checked_kinds


@pytest.fixture(scope="module")
def tree() -> FieldTree:
    return FieldTree(checked_kinds())


def _shape(tree: FieldTree, component: str) -> mf.Shape:
    node = tree.node(component)
    assert node is not None
    return mf.shape_of(node, tree.component_of)


@pytest.fixture(scope="module")
def configmap(tree: FieldTree) -> mf.Shape:
    return _shape(tree, "io.k8s.api.core.v1.ConfigMap")


@pytest.fixture(scope="module")
def deployment(tree: FieldTree) -> mf.Shape:
    return _shape(tree, "io.k8s.api.apps.v1.Deployment")


def _cm(data: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "cfg"}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def _apply(live: Any, config: Any, managers: mf.Managers, who: str, shape: mf.Shape, **kw: Any) -> Any:
    kw.setdefault("force", False)
    kw.setdefault("now", "2026-12-07T10:00:00Z")
    return mf.apply(live, config, managers, who, config["apiVersion"], shape, **kw)


def _fields(managers: mf.Managers, who: str) -> dict[str, Any]:
    (entry,) = [e for e in mf.encode(managers) if e["manager"] == who]
    return entry["fieldsV1"]


def test_an_apply_owns_the_leaves_and_keys_it_names_not_the_fields_holding_them(configmap: mf.Shape) -> None:
    obj, managers = _apply({}, _cm({"x": "1"}, {"a": "1"}), {}, "kubectl", configmap)
    assert obj["data"] == {"x": "1"}
    assert mf.encode(managers) == [
        {
            "manager": "kubectl",
            "operation": "Apply",
            "apiVersion": "v1",
            "time": "2026-12-07T10:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:x": {}}, "f:metadata": {"f:labels": {"f:a": {}}}},
        }
    ]


def test_a_deployments_containers_are_keyed_by_name_and_ports_by_port_and_default_protocol(
    deployment: mf.Shape,
) -> None:
    config = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]},
            },
        },
    }
    _, managers = _apply({}, config, {}, "kubectl", deployment)
    # the selector is atomic (x-kubernetes-map-type: atomic), owned whole
    assert _fields(managers, "kubectl") == {
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},
            "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"c"}': {
                            ".": {},
                            "f:image": {},
                            "f:name": {},
                            "f:ports": {
                                'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}
                            },
                        }
                    }
                },
            },
        }
    }


def test_reapplying_without_a_field_removes_it_unless_another_manager_owns_it(configmap: mf.Shape) -> None:
    obj, managers = _apply({}, _cm({"x": "1", "y": "2"}, {"a": "1", "b": "2"}), {}, "kubectl", configmap)
    # another applier co-owns y by applying the same value
    obj, managers = _apply(obj, _cm({"y": "2"}), managers, "other", configmap)
    obj, managers = _apply(obj, _cm({"x": "1"}, {"a": "1"}), managers, "kubectl", configmap)
    assert obj["data"] == {"x": "1", "y": "2"}
    assert obj["metadata"]["labels"] == {"a": "1"}
    assert _fields(managers, "kubectl") == {"f:data": {"f:x": {}}, "f:metadata": {"f:labels": {"f:a": {}}}}
    assert _fields(managers, "other") == {"f:data": {"f:y": {}}}


def test_changing_anothers_field_is_a_conflict_and_force_takes_it_over(configmap: mf.Shape) -> None:
    obj, managers = _apply({}, _cm({"x": "1"}), {}, "kubectl", configmap)
    with pytest.raises(mf.ApplyConflict) as caught:
        _apply(obj, _cm({"x": "2"}), managers, "other", configmap)
    assert caught.value.message() == 'Apply failed with 1 conflict: conflict with "kubectl": .data.x'
    assert caught.value.causes() == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "kubectl"', "field": ".data.x"}
    ]
    obj, managers = _apply(obj, _cm({"x": "2"}), managers, "other", configmap, force=True)
    assert obj["data"] == {"x": "2"}
    assert [e["manager"] for e in mf.encode(managers)] == ["other"]


def test_several_conflicts_are_listed_per_manager() -> None:
    upd = mf.Manager("kubectl-edit", "Update", "apps/v1", {})
    app = mf.Manager("argocd", "Apply", "apps/v1", {})
    conflict = mf.ApplyConflict(
        [
            (upd, ("f:spec", "f:replicas")),
            (app, ("f:spec", "f:paused")),
            (upd, ("f:spec", "f:minReadySeconds")),
        ]
    )
    assert conflict.message() == (
        "Apply failed with 3 conflicts: "
        'conflicts with "argocd":\n- .spec.paused\n'
        'conflicts with "kubectl-edit" using apps/v1:\n- .spec.replicas\n- .spec.minReadySeconds'
    )


def test_an_update_takes_what_it_changed_from_the_applier(configmap: mf.Shape) -> None:
    obj, managers = _apply({}, _cm({"x": "1"}, {"a": "1"}), {}, "kubectl", configmap)
    edited = json.loads(json.dumps(obj))
    edited["data"]["x"] = "edited"
    edited["metadata"]["labels"]["team"] = "ml"
    managers = mf.update(obj, edited, managers, "kubectl-edit", "v1", configmap, now="2026-12-07T10:01:00Z")
    assert _fields(managers, "kubectl") == {"f:metadata": {"f:labels": {"f:a": {}}}}
    assert _fields(managers, "kubectl-edit") == {
        "f:data": {"f:x": {}},
        "f:metadata": {"f:labels": {"f:team": {}}},
    }
    # and the applier, applying x again with its own value, now conflicts with the editor
    with pytest.raises(mf.ApplyConflict, match=r'conflict with "kubectl-edit" using v1: \.data\.x'):
        _apply(edited, _cm({"x": "1"}, {"a": "1"}), managers, "kubectl", configmap)


def test_an_untracked_objects_fields_go_to_before_first_apply(deployment: mf.Shape) -> None:
    live = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "uid": "u", "resourceVersion": "5"},
        "spec": {"replicas": 1, "paused": True},
        "status": {"replicas": 1},
    }
    config = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 3},
    }
    with pytest.raises(mf.ApplyConflict) as caught:
        _apply(live, config, {}, "kubectl", deployment, ignored={"f:status": {}})
    assert caught.value.message() == (
        'Apply failed with 1 conflict: conflict with "before-first-apply" using apps/v1: .spec.replicas'
    )
    obj, managers = _apply(live, config, {}, "kubectl", deployment, ignored={"f:status": {}}, force=True)
    assert obj["spec"] == {"replicas": 3, "paused": True}
    # nobody owns the system metadata or the reset status
    assert _fields(managers, "before-first-apply") == {"f:spec": {".": {}, "f:paused": {}}}


def test_associative_lists_merge_by_key_and_atomic_lists_are_replaced(deployment: mf.Shape) -> None:
    shape = deployment.child("spec")[0].child("template")[0].child("spec")[0]
    live = {
        "containers": [
            {"name": "a", "image": "1", "args": ["x", "y"]},
            {"name": "sidecar", "image": "s"},
        ]
    }
    config = {"containers": [{"name": "a", "args": ["z"]}, {"name": "b", "image": "2"}]}
    merged = mf.merge(live, config, shape)
    assert merged == {
        "containers": [
            {"name": "a", "image": "1", "args": ["z"]},
            {"name": "sidecar", "image": "s"},
            {"name": "b", "image": "2"},
        ]
    }


def test_finalizers_are_a_set_and_owner_references_are_keyed_by_uid(configmap: mf.Shape) -> None:
    config = _cm({})
    config["metadata"]["finalizers"] = ["a/b"]
    config["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "1234"},
    ]
    assert mf.field_set(config, configmap)["f:metadata"] == {
        "f:finalizers": {'v:"a/b"': {}},
        "f:name": {},
        "f:ownerReferences": {'k:{"uid":"1234"}': {}},
    }
    live = _cm({})
    live["metadata"]["finalizers"] = ["x/y"]
    merged = mf.merge(live, config, configmap)
    assert merged["metadata"]["finalizers"] == ["x/y", "a/b"]


def test_entries_are_ordered_apply_first_then_by_time(configmap: mf.Shape) -> None:
    managers = {
        m.identity: m
        for m in (
            mf.Manager("late", "Update", "v1", {"f:data": {"f:b": {}}}, "2026-12-07T10:00:02Z"),
            mf.Manager("early", "Update", "v1", {"f:data": {"f:a": {}}}, "2026-12-07T10:00:01Z"),
            mf.Manager("applier", "Apply", "v1", {"f:data": {"f:c": {}}}, "2026-12-07T10:00:03Z"),
        )
    }
    assert [e["manager"] for e in mf.encode(managers)] == ["applier", "early", "late"]
    assert mf.Manager("kcm", "Update", "apps/v1", {}, subresource="status").identity == (
        '{"manager":"kcm","operation":"Update","apiVersion":"apps/v1","subresource":"status"}'
    )
    assert (
        mf.Manager("kubectl", "Apply", "apps/v1", {}).identity == '{"manager":"kubectl","operation":"Apply"}'
    )


def test_more_than_ten_updaters_fold_the_oldest_into_ancient_changes(configmap: mf.Shape) -> None:
    obj, managers = _apply({}, _cm({"k0": "v"}), {}, "kubectl", configmap)
    for i in range(1, 13):
        new = json.loads(json.dumps(obj))
        new["data"][f"k{i}"] = "v"
        managers = mf.update(
            obj, new, managers, f"m{i:02d}", "v1", configmap, now=f"2026-12-07T10:00:{i:02d}Z"
        )
        obj = new
    names = [e["manager"] for e in mf.encode(managers) if e["operation"] == "Update"]
    assert len(names) == 10 and "ancient-changes" in names
    assert "m01" not in names and "m02" not in names and "m12" in names
    ancient = _fields(managers, "ancient-changes")
    assert ancient["f:data"].keys() >= {"f:k1", "f:k2"}


def test_path_strings_follow_kubes_notation() -> None:
    fields = {
        "f:spec": {
            "f:replicas": {},
            "f:template": {"f:spec": {"f:containers": {'k:{"name":"c"}': {"f:image": {}}}}},
        },
        "f:metadata": {"f:finalizers": {'v:"a/b"': {}}},
    }
    assert mf.path_strings(fields) == [
        '.metadata.finalizers[="a/b"]',
        ".spec.replicas",
        '.spec.template.spec.containers[name="c"].image',
    ]


def test_malformed_or_reset_managed_fields_are_recognised() -> None:
    assert (
        mf.decode([{"manager": "m", "operation": "Patch", "apiVersion": "v1", "fieldsType": "FieldsV1"}])
        is None
    )
    assert mf.decode([{"manager": "m", "operation": "Update", "apiVersion": "v1"}]) is None
    assert mf.is_reset([]) and mf.is_reset([{}]) and not mf.is_reset(None)


def test_a_crds_schema_gives_its_list_types_and_objectmeta_its_own(tree: FieldTree) -> None:
    meta = mf.shape_of(tree.node("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"), tree.component_of)
    schema = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer"},
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                    },
                    "sans": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "ref": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {}},
                    "extra": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
        },
    }
    shape = mf.shape_of_schema(schema, meta)
    config = {
        "apiVersion": "x/v1",
        "metadata": {"name": "n", "finalizers": ["f"]},
        "spec": {
            "replicas": 1,
            "ports": [{"name": "http"}],
            "sans": ["a"],
            "args": ["x"],
            "ref": {"name": "r"},
            "extra": {"k": "v"},
        },
    }
    assert mf.field_set(config, shape) == {
        "f:apiVersion": {},
        "f:metadata": {"f:name": {}, "f:finalizers": {'v:"f"': {}}},
        "f:spec": {
            "f:replicas": {},
            "f:ports": {'k:{"name":"http"}': {".": {}, "f:name": {}}},
            "f:sans": {'v:"a"': {}},
            "f:args": {},
            "f:ref": {},
            "f:extra": {"f:k": {}},
        },
    }
    # without a schema (a custom resource the lab has none for) objects are granular, lists atomic
    assert mf.field_set({"spec": {"a": [1], "b": {"c": 1}}}, mf.DEDUCED) == {
        "f:spec": {".": {}, "f:a": {}, "f:b": {".": {}, "f:c": {}}}
    }


def test_a_write_that_only_moves_managed_times_keeps_the_stored_ones() -> None:
    """kube's IgnoreManagedFieldsTimestampsTransformer: re-applying a manifest whose values the server
    normalises (`gpumem: 8000` stored as `8k`) changes nothing, in a later second too."""
    from tenantgpu.apiserver.fieldmanager import keep_managed_times

    entry = {"manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1"}
    old = {
        "metadata": {"name": "c", "managedFields": [{**entry, "time": "2026-12-07T10:00:00Z"}]},
        "data": {"x": "1"},
    }
    new = {
        "metadata": {"name": "c", "managedFields": [{**entry, "time": "2026-12-07T10:00:05Z"}]},
        "data": {"x": "1"},
    }
    assert keep_managed_times(new, old) == old
    changed = {**new, "data": {"x": "2"}}
    assert keep_managed_times(changed, old) is changed
    other = {
        "metadata": {**new["metadata"], "managedFields": [{**entry, "manager": "other"}]},
        "data": {"x": "1"},
    }
    assert keep_managed_times(other, old) is other
