"""PATCH bodies from kubectl label/annotate/apply/patch and the Python client land as on a real cluster."""

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenantgpu.apiserver.patch import (
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
    has_strategic_schema,
)

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def live_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web", "tier": "front"},
            "annotations": {LAST_APPLIED: "{}\n"},
            "finalizers": ["a.example.com/x", "b.example.com/y"],
        },
        "spec": {
            "containers": [
                {
                    "name": "nginx",
                    "image": "nginx:1.25",
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                },
                {"name": "sidecar", "image": "busybox"},
            ],
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}],
        },
    }


# --- JSON merge patch (kubectl label / annotate) -----------------------------------------------------


def test_kubectl_label_and_unlabel() -> None:
    pod = live_pod()
    labelled = apply_merge_patch(pod, {"metadata": {"labels": {"tier": "web", "team": "a"}}})
    assert labelled["metadata"]["labels"] == {"app": "web", "tier": "web", "team": "a"}
    unlabelled = apply_merge_patch(labelled, {"metadata": {"labels": {"tier": None}}})
    assert unlabelled["metadata"]["labels"] == {"app": "web", "team": "a"}
    assert pod["metadata"]["labels"] == {"app": "web", "tier": "front"}, "input is not modified"


def test_merge_patch_replaces_lists_and_non_objects() -> None:
    pod = live_pod()
    patched = apply_merge_patch(pod, {"spec": {"tolerations": []}, "status": "gone"})
    assert patched["spec"]["tolerations"] == []
    assert patched["status"] == "gone"
    assert apply_merge_patch({"a": 1}, ["x"]) == ["x"]


def test_merge_patch_result_shares_nothing_with_the_patch() -> None:
    """A conflicting update applies the same patch again: what the first result's admission changed in
    place (a defaulted container) must not leak into the patch, nor into the second result."""
    patch = {"spec": {"containers": [{"name": "c", "image": "cuda"}]}}
    first = apply_merge_patch(live_pod(), patch)
    first["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
    second = apply_merge_patch(live_pod(), patch, owned=True)
    assert patch == {"spec": {"containers": [{"name": "c", "image": "cuda"}]}}
    assert second["spec"]["containers"] == [{"name": "c", "image": "cuda"}]


_json_leaf = st.one_of(st.integers(-5, 5), st.text(max_size=3), st.booleans())
_json_value = st.recursive(
    _json_leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=12,
)
_json_doc = st.dictionaries(st.text(max_size=3), _json_value, max_size=4)


def _merge_diff(source: Any, target: Any) -> Any:
    """The RFC 7386 patch that turns `source` into `target`."""
    if not (isinstance(source, dict) and isinstance(target, dict)):
        return target
    patch = {key: None for key in source if key not in target}
    for key, value in target.items():
        if key not in source:
            patch[key] = value
        elif source[key] != value or type(source[key]) is not type(value):
            patch[key] = _merge_diff(source[key], value)
    return patch


@given(_json_doc, _json_doc)
def test_merge_patch_of_a_diff_reproduces_the_target(source: dict[str, Any], target: dict[str, Any]) -> None:
    assert apply_merge_patch(source, _merge_diff(source, target)) == target


# --- JSON patch (Python client list bodies, kubectl patch --type json) -----------------------------------


def test_json_patch_ops() -> None:
    pod = live_pod()
    ops = [
        {"op": "add", "path": "/metadata/annotations/hami.io~1vgpu-node", "value": "worker-1"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:1.26"},
        {"op": "remove", "path": "/metadata/labels/tier"},
        {"op": "add", "path": "/spec/tolerations/-", "value": {"key": "gpu", "operator": "Exists"}},
        {"op": "copy", "from": "/metadata/labels/app", "path": "/metadata/labels/copied"},
        {"op": "move", "from": "/status/phase", "path": "/status/oldPhase"},
        {"op": "test", "path": "/spec/containers/1/name", "value": "sidecar"},
        {"op": "add", "path": "/spec/containers/0/env/0", "value": {"name": "FIRST", "value": "0"}},
    ]
    patched = apply_json_patch(pod, ops)
    assert patched["metadata"]["annotations"]["hami.io/vgpu-node"] == "worker-1"
    assert patched["spec"]["containers"][0]["image"] == "nginx:1.26"
    assert "tier" not in patched["metadata"]["labels"]
    assert patched["spec"]["tolerations"][-1] == {"key": "gpu", "operator": "Exists"}
    assert patched["metadata"]["labels"]["copied"] == "web"
    assert "phase" not in patched["status"] and patched["status"]["oldPhase"] == "Running"
    assert [e["name"] for e in patched["spec"]["containers"][0]["env"]] == ["FIRST", "A", "B"]
    assert pod["spec"]["containers"][0]["image"] == "nginx:1.25"


def test_json_patch_tilde_escape() -> None:
    doc = {"a/b": 1, "m~n": 2}
    assert apply_json_patch(doc, [{"op": "remove", "path": "/a~1b"}, {"op": "remove", "path": "/m~0n"}]) == {}


@pytest.mark.parametrize(
    ("ops", "code"),
    [
        ([{"op": "test", "path": "/metadata/name", "value": "other"}], 422),
        ([{"op": "replace", "path": "/metadata/nothing", "value": 1}], 422),
        ([{"op": "remove", "path": "/spec/containers/7"}], 422),
        ([{"op": "add", "path": "/spec/missing/deep", "value": 1}], 422),
        ([{"op": "jump", "path": "/x"}], 400),
        ([{"op": "add", "path": "no-slash", "value": 1}], 400),
        ({"op": "add"}, 400),
    ],
)
def test_bad_json_patches_are_refused(ops: Any, code: int) -> None:
    with pytest.raises(PatchError) as caught:
        apply_json_patch(live_pod(), ops)
    assert caught.value.code == code


def test_failed_test_op_leaves_nothing_half_applied() -> None:
    pod = live_pod()
    with pytest.raises(PatchError, match="test failed"):
        apply_json_patch(
            pod, [{"op": "remove", "path": "/metadata/labels"}, {"op": "test", "path": "/x", "value": 1}]
        )
    assert "labels" in pod["metadata"]


def test_json_patch_test_distinguishes_true_from_one() -> None:
    with pytest.raises(PatchError):
        apply_json_patch({"a": True}, [{"op": "test", "path": "/a", "value": 1}])
    assert apply_json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": 1.0}]) == {"a": 1}


# --- strategic merge patch (kubectl apply, Python client dict bodies) ---------------------------------


def test_kubectl_apply_image_change_as_measured() -> None:
    new_config = '{"apiVersion":"v1","kind":"Pod",...}\n'
    body = {
        "metadata": {"annotations": {LAST_APPLIED: new_config}},
        "spec": {
            "$setElementOrder/containers": [{"name": "nginx"}, {"name": "sidecar"}],
            "containers": [{"image": "nginx:1.26", "name": "nginx"}],
        },
    }
    patched = apply_strategic_merge_patch(live_pod(), body, "Pod")
    nginx, sidecar = patched["spec"]["containers"]
    assert nginx["image"] == "nginx:1.26"
    assert nginx["env"] == live_pod()["spec"]["containers"][0]["env"], "merged by name, not replaced"
    assert sidecar == {"name": "sidecar", "image": "busybox"}
    assert patched["metadata"]["annotations"][LAST_APPLIED] == new_config
    assert not any(k.startswith("$") for k in patched["spec"])


def test_apply_adds_and_removes_containers_in_the_declared_order() -> None:
    body = {
        "spec": {
            "$setElementOrder/containers": [{"name": "init-proxy"}, {"name": "nginx"}],
            "containers": [{"name": "init-proxy", "image": "envoy"}, {"$patch": "delete", "name": "sidecar"}],
        }
    }
    patched = apply_strategic_merge_patch(live_pod(), body, "Pod")
    assert [c["name"] for c in patched["spec"]["containers"]] == ["init-proxy", "nginx"]


def test_nested_merge_keys_env_and_ports() -> None:
    body = {
        "spec": {
            "containers": [
                {
                    "name": "nginx",
                    "env": [{"name": "B", "value": "two"}, {"name": "C", "value": "3"}],
                    "ports": [{"containerPort": 443}],
                }
            ]
        }
    }
    nginx = apply_strategic_merge_patch(live_pod(), body, "Pod")["spec"]["containers"][0]
    assert nginx["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "two"},
        {"name": "C", "value": "3"},
    ]
    # Without $setElementOrder kube puts new elements before the live-only ones (see the "kubectl patch"
    # task page: the added container is listed first).
    assert [p["containerPort"] for p in nginx["ports"]] == [443, 80]


def test_tolerations_are_atomic() -> None:
    body = {
        "spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    }
    patched = apply_strategic_merge_patch(live_pod(), body, "Pod")
    assert patched["spec"]["tolerations"] == body["spec"]["tolerations"]


def test_status_conditions_merge_by_type() -> None:
    body = {
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}]
        }
    }
    patched = apply_strategic_merge_patch(live_pod(), body, "Pod")
    assert {c["type"]: c["status"] for c in patched["status"]["conditions"]} == {
        "Ready": "True",
        "PodScheduled": "True",
        "Initialized": "True",
    }


def test_finalizers_merge_as_a_set_and_delete_from_primitive_list() -> None:
    pod = live_pod()
    added = apply_strategic_merge_patch(
        pod, {"metadata": {"finalizers": ["b.example.com/y", "c.example.com/z"]}}, "Pod"
    )
    assert sorted(added["metadata"]["finalizers"]) == [
        "a.example.com/x",
        "b.example.com/y",
        "c.example.com/z",
    ]
    removed = apply_strategic_merge_patch(
        added, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/x"]}}, "Pod"
    )
    assert sorted(removed["metadata"]["finalizers"]) == ["b.example.com/y", "c.example.com/z"]


def test_set_element_order_reorders_primitive_lists() -> None:
    body = {"metadata": {"$setElementOrder/finalizers": ["b.example.com/y", "a.example.com/x"]}}
    patched = apply_strategic_merge_patch(live_pod(), body, "Pod")
    assert patched["metadata"]["finalizers"] == ["b.example.com/y", "a.example.com/x"]


def test_retain_keys_swaps_a_volume_source() -> None:
    body = {
        "spec": {
            "$setElementOrder/volumes": [{"name": "data"}],
            "volumes": [{"$retainKeys": ["hostPath", "name"], "hostPath": {"path": "/srv"}, "name": "data"}],
        }
    }
    patched = apply_strategic_merge_patch(live_pod(), body, "Pod")
    assert patched["spec"]["volumes"] == [{"name": "data", "hostPath": {"path": "/srv"}}]


def test_retain_keys_refuses_fields_outside_the_list() -> None:
    body = {"spec": {"volumes": [{"$retainKeys": ["name"], "hostPath": {"path": "/srv"}, "name": "data"}]}}
    with pytest.raises(PatchError):
        apply_strategic_merge_patch(live_pod(), body, "Pod")


def test_patch_replace_and_delete_directives() -> None:
    pod = live_pod()
    replaced = apply_strategic_merge_patch(
        pod, {"metadata": {"labels": {"$patch": "replace", "only": "me"}}}, "Pod"
    )
    assert replaced["metadata"]["labels"] == {"only": "me"}
    emptied = apply_strategic_merge_patch(pod, {"status": {"$patch": "delete"}}, "Pod")
    assert emptied["status"] == {}
    whole_list = apply_strategic_merge_patch(
        pod, {"spec": {"containers": [{"$patch": "replace"}, {"name": "solo", "image": "x"}]}}, "Pod"
    )
    assert whole_list["spec"]["containers"] == [{"name": "solo", "image": "x"}]


def test_null_deletes_and_new_maps_drop_directives_and_nulls() -> None:
    patched = apply_strategic_merge_patch(
        live_pod(),
        {"metadata": {"labels": {"tier": None}}, "spec": {"nodeSelector": {"gpu": "true", "x": None}}},
        "Pod",
    )
    assert patched["metadata"]["labels"] == {"app": "web"}
    assert patched["spec"]["nodeSelector"] == {"gpu": "true"}


def test_node_status_patch_merges_conditions_and_addresses_by_type() -> None:
    node = {
        "metadata": {"name": "worker-1"},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "MemoryPressure", "status": "False"},
            ],
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": "w1"},
            ],
        },
    }
    body = {
        "status": {
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
        }
    }
    patched = apply_strategic_merge_patch(node, body, "Node")
    assert patched["status"]["conditions"][0] == {
        "type": "Ready",
        "status": "False",
        "reason": "KubeletNotReady",
    }
    assert len(patched["status"]["conditions"]) == 2
    assert {a["type"]: a["address"] for a in patched["status"]["addresses"]} == {
        "InternalIP": "10.0.0.2",
        "Hostname": "w1",
    }


def test_service_ports_merge_by_port_and_webhooks_by_name() -> None:
    svc = {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 443, "targetPort": 9443}]}}
    patched = apply_strategic_merge_patch(
        svc, {"spec": {"ports": [{"port": 443, "targetPort": 8443}, {"port": 80}]}}, "Service"
    )
    assert patched["spec"]["ports"] == [{"port": 443, "targetPort": 8443}, {"port": 80}]
    later = apply_strategic_merge_patch(
        svc, {"spec": {"ports": [{"port": 80}, {"port": 443, "name": "tls"}]}}, "Service"
    )
    assert later["spec"]["ports"] == [{"port": 80}, {"port": 443, "targetPort": 9443, "name": "tls"}]
    mwc = {
        "metadata": {"name": "m"},
        "webhooks": [{"name": "a.b.c", "timeoutSeconds": 10}, {"name": "d.e.f"}],
    }
    patched = apply_strategic_merge_patch(
        mwc, {"webhooks": [{"name": "a.b.c", "timeoutSeconds": 5}]}, "MutatingWebhookConfiguration"
    )
    assert patched["webhooks"] == [{"name": "a.b.c", "timeoutSeconds": 5}, {"name": "d.e.f"}]


def test_owner_references_merge_by_uid() -> None:
    obj = {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}}
    patched = apply_strategic_merge_patch(
        obj, {"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}]}}, "ConfigMap"
    )
    assert [r["uid"] for r in patched["metadata"]["ownerReferences"]] == ["2", "1"]


def test_kinds_without_schema_replace_lists() -> None:
    assert not has_strategic_schema("TenantControlPlane")
    assert has_strategic_schema("Pod")
    obj = {"spec": {"items": [1, 2], "keep": True}}
    assert apply_strategic_merge_patch(obj, {"spec": {"items": [3]}}, "TenantControlPlane") == {
        "spec": {"items": [3], "keep": True}
    }


@pytest.mark.parametrize(
    "body",
    [
        ["not", "a", "map"],
        {"spec": {"containers": [{"image": "no-name"}]}},
        {"spec": {"containers": [{"$patch": "explode", "name": "nginx"}]}},
        {"spec": {"$setElementOrder/containers": [{"name": "nginx"}], "containers": [{"name": "other"}]}},
        {"metadata": {"$patch": "sideways"}},
    ],
)
def test_malformed_strategic_patches_are_refused(body: Any) -> None:
    with pytest.raises(PatchError):
        apply_strategic_merge_patch(live_pod(), body, "Pod")


def test_three_way_apply_round_trip_from_last_applied() -> None:
    """kubectl apply after an edit: a label removed, an env value changed, a container added."""
    pod = live_pod()
    before = copy.deepcopy(pod)
    body = json.loads(
        """{"metadata":{"labels":{"tier":null}},
            "spec":{"$setElementOrder/containers":[{"name":"nginx"},{"name":"sidecar"},{"name":"metrics"}],
                    "containers":[{"$setElementOrder/env":[{"name":"A"},{"name":"B"}],
                                   "env":[{"name":"B","value":"22"}],"name":"nginx"},
                                  {"image":"prom","name":"metrics"}]}}"""
    )
    patched = apply_strategic_merge_patch(pod, body, "Pod")
    assert pod == before
    assert patched["metadata"]["labels"] == {"app": "web"}
    assert [c["name"] for c in patched["spec"]["containers"]] == ["nginx", "sidecar", "metrics"]
    assert patched["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "22"},
    ]
    assert patched["spec"]["containers"][0]["image"] == "nginx:1.25"


_images = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d", "e"]), st.sampled_from(["x:1", "x:2", "y"]), max_size=5
)


@given(_images, _images, st.randoms())
def test_apply_style_patch_reproduces_the_target_containers(
    source: dict[str, str], target: dict[str, str], rnd: Any
) -> None:
    source_order = list(source)
    target_order = list(target)
    rnd.shuffle(source_order)
    rnd.shuffle(target_order)
    live = {"spec": {"containers": [{"name": n, "image": source[n]} for n in source_order]}}
    body = {
        "spec": {
            "$setElementOrder/containers": [{"name": n} for n in target_order],
            "containers": [
                {"name": n, "image": target[n]} for n in target_order if source.get(n) != target[n]
            ]
            + [{"$patch": "delete", "name": n} for n in source_order if n not in target],
        }
    }
    patched = apply_strategic_merge_patch(live, body, "Pod")
    assert patched["spec"]["containers"] == [{"name": n, "image": target[n]} for n in target_order]


_plain_leaf = st.one_of(st.integers(-3, 3), st.text(alphabet="abc", max_size=2), st.none())
_plain_doc = st.recursive(
    _plain_leaf,
    lambda children: st.dictionaries(st.text(alphabet="xyz", min_size=1, max_size=2), children, max_size=3),
    max_leaves=10,
)


@given(st.dictionaries(st.text(alphabet="xyz", min_size=1, max_size=2), _plain_doc, max_size=3), _plain_doc)
def test_strategic_merge_of_maps_agrees_with_json_merge(doc: dict[str, Any], patch: Any) -> None:
    """Without lists or directives, a strategic merge patch is a JSON merge patch."""
    if not isinstance(patch, dict):
        patch = {"x": patch}
    doc = apply_merge_patch({}, doc)  # a stored object holds no nulls
    assert apply_strategic_merge_patch(doc, patch, "ConfigMap") == apply_merge_patch(doc, patch)


@given(_json_doc, st.text(alphabet="ab/~", min_size=1, max_size=4), _json_value)
def test_json_patch_add_then_remove_restores_the_document(doc: dict[str, Any], key: str, value: Any) -> None:
    if key in doc:
        return
    pointer = "/" + key.replace("~", "~0").replace("/", "~1")
    added = apply_json_patch(doc, [{"op": "add", "path": pointer, "value": value}])
    assert added[key] == value
    assert apply_json_patch(added, [{"op": "remove", "path": pointer}]) == doc


def test_patches_leave_their_input_alone_and_keep_integers_beyond_64_bits() -> None:
    big = 2**70
    obj = {"metadata": {"name": "a", "annotations": {"x": "1"}}, "data": {"n": big}}
    before = copy.deepcopy(obj)
    merged = apply_merge_patch(obj, {"metadata": {"annotations": {"y": "2"}}})
    patched = apply_json_patch(obj, [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}])
    strategic = apply_strategic_merge_patch(obj, {"metadata": {"labels": {"c": "d"}}}, "ConfigMap")
    assert obj == before
    assert merged["data"]["n"] == patched["data"]["n"] == strategic["data"]["n"] == big
    assert merged["metadata"]["annotations"] == {"x": "1", "y": "2"}
    assert patched["metadata"]["labels"] == {"a": "b"} and strategic["metadata"]["labels"] == {"c": "d"}
