"""Unknown fields as kube-apiserver's strict decoder names them.

Facts (kube's field validation, KEP 2885, and the messages users get from kubectl): a path is written
`spec.containers[0].imagee`, a top-level one bare (`invalidField`); a strict create fails with
`Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "…", unknown field "…"`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tenantgpu.apiserver.fieldtree import (
    FieldTree,
    FieldTypeError,
    Finding,
    load_table,
    unknown_fields_message,
)

KINDS = (
    ("", "v1", "Pod"),
    ("apps", "v1", "Deployment"),
    ("apps", "v1", "StatefulSet"),
    ("kamaji.clastix.io", "v1alpha1", "DataStore"),
)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> FieldTree:
    return FieldTree(KINDS, cache=tmp_path_factory.mktemp("fields") / "fields.json")


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"any-key": "kept"}, "namspace": "typo"},
        "spec": {
            "containers": [
                {"name": "a", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                {
                    "name": "b",
                    "image": "y",
                    "imagee": "typo",
                    "ports": [{"containerPort": 80, "prot": "TCP"}],
                },
            ],
            "nodeSelector": {"gpu": "true"},
        },
        "invalidField": 1,
    }


def test_unknown_fields_are_named_as_kube_names_them_and_removed(tree: FieldTree) -> None:
    root = tree.root("", "v1", "Pod")
    assert root == "io.k8s.api.core.v1.Pod"
    pod = _pod()
    found = tree.prune(root, pod)
    assert [f.path for f in found] == [
        "metadata.namspace",
        "spec.containers[1].imagee",
        "spec.containers[1].ports[0].prot",
        "invalidField",
    ]
    assert "invalidField" not in pod and "imagee" not in pod["spec"]["containers"][1]
    # what is known stays, map keys of any name included
    assert pod["metadata"]["labels"] == {"any-key": "kept"}
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    assert pod["spec"]["nodeSelector"] == {"gpu": "true"}


def test_int_or_string_and_free_form_fields_take_any_value(tree: FieldTree) -> None:
    root = tree.root("apps", "v1", "Deployment")
    assert root is not None
    deployment = {
        "spec": {
            "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {"metadata": {"annotations": {"a": "b"}}, "spec": {"containers": []}},
        }
    }
    assert tree.prune(root, deployment) == []


def test_strategic_merge_directives_are_not_fields(tree: FieldTree) -> None:
    root = tree.root("", "v1", "Pod")
    assert root is not None
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "a"}],
            "containers": [{"name": "a", "image": "z", "$patch": "replace"}],
        }
    }
    assert tree.prune(root, patch) == []


def test_a_json_patch_operation_is_checked_at_its_path(tree: FieldTree) -> None:
    root = tree.root("", "v1", "Pod")
    assert root is not None
    assert tree.prune_at(root, ["spec", "bogus"], 1) == (False, [Finding("spec.bogus")])
    value = {"name": "c", "image": "i", "bad": True}
    assert tree.prune_at(root, ["spec", "containers", "2"], value) == (
        True,
        [Finding("spec.containers[2].bad")],
    )
    assert value == {"name": "c", "image": "i"}
    assert tree.prune_at(root, ["metadata", "annotations", "any"], "v") == (True, [])


def test_kinds_without_a_model_are_not_checked(tree: FieldTree) -> None:
    assert tree.root("kamaji.clastix.io", "v1alpha1", "DataStore") is None
    assert tree.root("", "v1", "NotServedHere") is None


def test_the_table_is_cached_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "fields.json"
    table = load_table((("", "v1", "ConfigMap"),), path)
    assert json.loads(path.read_text()) == table
    assert table["components"]["io.k8s.api.core.v1.ConfigMap"]["data"] == "{}"
    # a cache holding the kinds asked for is used as it is
    path.write_text(json.dumps({**table, "components": {}, "checked": ["/v1/ConfigMap"]}))
    assert load_table((("", "v1", "ConfigMap"),), path)["components"] == {}
    # one that lacks a kind is built again
    assert load_table((("", "v1", "ConfigMap"), ("", "v1", "Secret")), path)["components"]


def test_the_strict_message_lists_every_field() -> None:
    message = unknown_fields_message("Pod", "v1", [Finding("a"), Finding("spec.b")])
    assert message == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "a", unknown field "spec.b"'
    )


@pytest.mark.parametrize(
    ("kind", "edit", "message"),
    [
        (
            ("", "v1", "Pod"),
            lambda o: o["spec"]["containers"][0].update(command="sleep 3600"),
            "json: cannot unmarshal string into Go struct field Container.spec.containers.command"
            " of type []string",
        ),
        (
            ("", "v1", "Pod"),
            lambda o: o["spec"]["containers"][0].update(env={"A": "b"}),
            "json: cannot unmarshal object into Go struct field Container.spec.containers.env of type []v1.EnvVar",
        ),
        (
            ("", "v1", "Pod"),
            lambda o: o["spec"].update(containers=[5]),
            "json: cannot unmarshal number into Go struct field PodSpec.spec.containers of type v1.Container",
        ),
        (
            ("", "v1", "Pod"),
            lambda o: o["spec"]["containers"][0].update(resources=7),
            "json: cannot unmarshal number into Go struct field Container.spec.containers.resources"
            " of type v1.ResourceRequirements",
        ),
        (
            ("", "v1", "Pod"),
            lambda o: o["metadata"]["labels"].update(gpu=True),  # YAML's unquoted `yes`
            "json: cannot unmarshal bool into Go struct field ObjectMeta.metadata.labels of type string",
        ),
        (
            ("apps", "v1", "Deployment"),
            lambda o: o.update(spec={"selector": {"matchLabels": {"gpu": True}}}),
            "json: cannot unmarshal bool into Go struct field LabelSelector.spec.selector.matchLabels"
            " of type string",
        ),
    ],
)
def test_a_field_of_the_wrong_json_type_is_refused_as_kubes_decoder_refuses_it(
    tree: FieldTree, kind: tuple[str, str, str], edit: Any, message: str
) -> None:
    """Found by probing: such fields were stored, and then broke kubectl's own decoding (`kubectl logs`,
    `describe`) and the lab's controllers (a Deployment whose matchLabels held `true` never got its
    ReplicaSet). The Go struct and the index-free path are as kube's decoder words them."""
    obj = _pod() if kind[2] == "Pod" else {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}}
    edit(obj)
    root = tree.root(*kind)
    assert root is not None
    with pytest.raises(FieldTypeError) as refused:
        tree.prune(root, obj)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        # the int32 fields kube decodes, with Go's words for a number that is no integer of that width
        (
            lambda d: d["spec"].update(replicas="three"),
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32",
        ),
        (
            lambda d: d["spec"].update(replicas=1.5),
            "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32",
        ),
        (
            lambda d: d["spec"].update(replicas=3_000_000_000),
            "json: cannot unmarshal number 3000000000 into Go struct field DeploymentSpec.spec.replicas"
            " of type int32",
        ),
        (
            lambda d: d["spec"].update(replicas=True),
            "json: cannot unmarshal bool into Go struct field DeploymentSpec.spec.replicas of type int32",
        ),
        (
            lambda d: d["spec"].update(paused="yes"),
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.paused of type bool",
        ),
        # kube's OpenAPI says int64 for these (`format: int64`); the client's models say only int
        (
            lambda d: d["spec"]["template"]["spec"].update(terminationGracePeriodSeconds="30s"),
            "json: cannot unmarshal string into Go struct field PodSpec.spec.template.spec"
            ".terminationGracePeriodSeconds of type int64",
        ),
        (
            lambda d: d["metadata"].update(generation=[1]),
            "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.generation of type int64",
        ),
        # the common YAML slip: an unquoted number where a string belongs
        (
            lambda d: d["spec"]["template"]["spec"]["containers"][0].update(
                env=[{"name": "PORT", "value": 8080}]
            ),
            "json: cannot unmarshal number into Go struct field EnvVar.spec.template.spec.containers.env.value"
            " of type string",
        ),
        (
            lambda d: d["spec"]["template"]["spec"]["containers"][0].update(args=["--port", 80]),
            "json: cannot unmarshal number into Go struct field Container.spec.template.spec.containers.args"
            " of type string",
        ),
        (
            lambda d: d["spec"]["template"]["spec"]["securityContext"].update(supplementalGroups=["wheel"]),
            "json: cannot unmarshal string into Go struct field PodSecurityContext.spec.template.spec"
            ".securityContext.supplementalGroups of type int64",
        ),
    ],
)
def test_a_scalar_of_the_wrong_json_type_is_refused_as_kubes_decoder_refuses_it(
    edit: Any, message: str
) -> None:
    """Found by probing: `replicas: "three"` got a 422 about the value's range, where kube's decoder
    refuses the body with a 400 before validation."""
    tree = FieldTree(KINDS)
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "a", "image": "x"}], "securityContext": {}}},
        },
    }
    edit(deployment)
    root = tree.root("apps", "v1", "Deployment")
    assert root is not None
    with pytest.raises(FieldTypeError) as refused:
        tree.prune(root, deployment)
    assert str(refused.value) == message


def test_scalars_of_the_right_type_and_untyped_leaves_pass() -> None:
    """Quantities decode from numbers, times and IntOrStrings take what their own decoders take (not
    judged here), a float64 takes an integer, and None is a field left out."""
    tree = FieldTree(KINDS)
    root = tree.root("", "v1", "Pod")
    assert root is not None
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "generation": 2**62, "creationTimestamp": None},
        "spec": {
            "terminationGracePeriodSeconds": 30,
            "containers": [
                {
                    "name": "a",
                    "image": "x",
                    "ports": [{"containerPort": 80}],
                    "livenessProbe": {"httpGet": {"port": 8080}},
                    "readinessProbe": {"httpGet": {"port": "http"}},
                    "stdin": False,
                    "resources": {"limits": {"cpu": 1.5, "memory": 10**9}},
                }
            ],
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": 1}}],
            "securityContext": {"supplementalGroups": [1000, 2000], "runAsUser": None},
        },
    }
    assert tree.prune(root, pod) == []
    with pytest.raises(
        FieldTypeError, match=r"ContainerPort\.spec\.containers\.ports\.containerPort of type int32"
    ):
        tree.prune_at(root, ["spec", "containers", "0", "ports", "0", "containerPort"], "80")
    assert tree.prune_at(root, ["spec", "containers", "0", "ports", "0", "containerPort"], 80) == (True, [])


def test_right_types_nulls_and_quantities_as_numbers_pass(tree: FieldTree) -> None:
    root = tree.root("", "v1", "Pod")
    assert root is not None
    pod = _pod()
    pod["spec"]["containers"][0].update(command=["sleep", "1"], args=None, env=[{"name": "A", "value": "b"}])
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": 2, "memory": "1Gi"}}
    pod["metadata"]["annotations"] = {"a": None}
    pod.pop("invalidField")
    assert [f.path for f in tree.prune(root, pod)] == [
        "metadata.namspace",
        "spec.containers[1].imagee",
        "spec.containers[1].ports[0].prot",
    ]
    # a JSON patch that puts a string where a list belongs is refused too
    with pytest.raises(FieldTypeError, match=r"Container\.spec\.containers\.command of type"):
        tree.prune_at(root, ["spec", "containers", "0", "command"], "sleep")


def test_a_whole_object_loses_the_zero_values_go_s_encoder_omits(tree: FieldTree) -> None:
    """Found by probing with kubectl: `hostNetwork: false`, `env[].value: ""`, `args: []` and
    `hostPort: 0` came back as written, where kube (which decodes into Go structs and encodes from them)
    leaves out every `omitempty` field holding its zero value. Fields without the tag (`containerPort`,
    `name`), pointers (`automountServiceAccountToken: false`) and unknown fields' reports are kept; a
    patch keeps its zeros, since there `false` undoes a stored `true`."""
    root = tree.root("", "v1", "Pod")
    assert root is not None
    pod: dict[str, Any] = {
        "metadata": {"name": "z"},
        "spec": {
            "hostNetwork": False,
            "automountServiceAccountToken": False,
            "nodeSelector": {},
            "restartPolicy": "",
            "containers": [
                {
                    "name": "c",
                    "image": "nginx",
                    "tty": False,
                    "args": [],
                    "env": [{"name": "X", "value": ""}],
                    "ports": [{"containerPort": 0, "hostPort": 0, "name": ""}],
                    "readinessProbe": {"periodSeconds": 0, "exec": {"command": ["true"]}},
                    "bogus": 0,
                }
            ],
        },
    }
    patch = json.loads(json.dumps(pod))
    assert [f.path for f in tree.prune(root, pod, zeros=True)] == ["spec.containers[0].bogus"]
    assert pod["spec"] == {
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": "c",
                "image": "nginx",
                "env": [{"name": "X"}],
                "ports": [{"containerPort": 0}],
                "readinessProbe": {"exec": {"command": ["true"]}},
            }
        ],
    }
    tree.prune(root, patch)
    assert patch["spec"]["hostNetwork"] is False and patch["spec"]["containers"][0]["tty"] is False


def test_a_field_newer_than_the_tenant_s_release_is_unknown_to_it(tree: FieldTree) -> None:
    """Found by comparing k8s.io/api's tags: the lab served its client's (newer) field set to every
    tenant, so a v1.31 tenant stored pod-level `spec.resources`, which Kubernetes 1.32 introduced; kube
    1.31's decoder does not know the field. fieldversions.py has each newer field's first release."""
    root = tree.root("", "v1", "Pod")
    assert root is not None

    def pod() -> dict[str, Any]:
        return {
            "metadata": {"name": "p"},
            "spec": {
                "resources": {"limits": {"cpu": "1"}},
                "containers": [{"name": "c", "image": "x", "restartPolicy": "Always"}],
            },
        }

    old = pod()
    assert [f.path for f in tree.prune(root, old, minor=31)] == ["spec.resources"]
    assert "resources" not in old["spec"] and old["spec"]["containers"][0]["restartPolicy"] == "Always"
    assert tree.prune(root, pod(), minor=32) == []
    assert tree.prune(root, pod()) == []  # no release given: every field the lab knows
    exists, _ = tree.prune_at(root, ["spec", "resources"], {"limits": {"cpu": "1"}}, minor=31)
    assert not exists
    assert tree.prune_at(root, ["spec", "resources"], {"limits": {"cpu": "1"}}, minor=33)[0]


def test_fields_of_1_28_to_1_30_are_unknown_to_a_1_27_tenant_but_a_renamed_type_is_not(
    tree: FieldTree,
) -> None:
    """From k8s.io/api v0.27.0 … v0.30.0: a sidecar's `restartPolicy` and a pod's `status.hostIPs` came
    with 1.28, a Job's `podReplacementPolicy` too. A claim's `spec.resources` (a StatefulSet's template here) is older than
    its 1.29 type name `VolumeResourceRequirements`, so its requests stay known on 1.27."""
    pod_root = tree.root("", "v1", "Pod")
    sts_root = tree.root("apps", "v1", "StatefulSet")
    assert pod_root is not None and sts_root is not None
    sidecar = {"spec": {"initContainers": [{"name": "s", "image": "x", "restartPolicy": "Always"}]}}
    assert [f.path for f in tree.prune(pod_root, dict(sidecar), minor=27)] == [
        "spec.initContainers[0].restartPolicy"
    ]
    assert tree.prune(pod_root, sidecar, minor=28) == []
    status = {"status": {"hostIPs": [{"ip": "10.0.0.1"}], "hostIP": "10.0.0.1"}}
    assert [f.path for f in tree.prune(pod_root, status, minor=27)] == ["status.hostIPs"]
    claim = {"spec": {"resources": {"requests": {"storage": "1Gi"}}, "accessModes": ["ReadWriteOnce"]}}
    assert tree.prune(sts_root, {"spec": {"volumeClaimTemplates": [claim]}}, minor=27) == []


def test_a_patch_s_omitempty_zeros_are_kept_in_it_and_named(tree: FieldTree) -> None:
    """A patch keeps `hostNetwork: false` (it must undo a `true`) but names it, so that the server drops
    the field from the patched object as kube's Go encoder does; zeros of fields the type keeps
    (`automountServiceAccountToken` is a pointer) and a merge patch's nulls are not named."""
    root = tree.root("", "v1", "Pod")
    assert root is not None
    patch = {
        "spec": {
            "hostNetwork": False,
            "automountServiceAccountToken": False,
            "nodeName": None,
            "containers": [{"name": "c", "args": [], "tty": True}],
        }
    }
    kept: list[str] = []
    assert tree.prune(root, patch, kept_zeros=kept) == []
    assert kept == ["spec.hostNetwork", "spec.containers[0].args"]
    assert patch["spec"]["hostNetwork"] is False and patch["spec"]["containers"][0]["args"] == []
    at: list[str] = []
    assert tree.prune_at(root, ["spec", "hostNetwork"], False, kept_zeros=at) == (True, [])
    assert tree.prune_at(root, ["spec", "automountServiceAccountToken"], False, kept_zeros=at)[0]
    assert tree.prune_at(root, ["spec", "containers", "0", "env"], [], kept_zeros=at)[0]
    assert at == ["spec.hostNetwork", "spec.containers[0].env"]
