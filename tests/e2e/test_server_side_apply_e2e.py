"""Server-side apply with field management, through the real kubectl and the official Python client.

What a GitOps user relies on: fields dropped from a manifest are removed on the next apply, another
manager's fields are conflicts (`--force-conflicts` takes them over), `kubectl label` and friends are
recorded as their own managers, and `--show-managed-fields` shows who owns what.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from apiserver_harness import Kubectl, RunningAPIServer

pytestmark = pytest.mark.slow  # drives real kubectl binaries


def _configmap(name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> str:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})


def _get(kubectl: Kubectl, kind: str, name: str) -> dict[str, Any]:
    return json.loads(kubectl("get", kind, name, "-o", "json", "--show-managed-fields").stdout)


def _owners(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"]: e for e in obj["metadata"].get("managedFields") or []}


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_reapplying_a_smaller_manifest_removes_what_it_dropped(kubectl: Kubectl, version: str) -> None:
    name = f"ssa-drop-{version.replace('.', '')}"
    first = _configmap(name, {"x": "1", "z": "2"}, {"a": "1", "b": "2"})
    assert (
        "serverside-applied"
        in kubectl("apply", "--server-side", "-f", "-", input=first, version=version).stdout
    )
    kubectl(
        "apply", "--server-side", "-f", "-", input=_configmap(name, {"x": "1"}, {"a": "1"}), version=version
    )
    stored = _get(kubectl, "configmap", name)
    assert stored["data"] == {"x": "1"}
    assert stored["metadata"]["labels"] == {"a": "1"}
    entry = _owners(stored)["kubectl"]
    assert (entry["operation"], entry["apiVersion"], entry["fieldsType"]) == ("Apply", "v1", "FieldsV1")
    assert entry["fieldsV1"] == {"f:data": {"f:x": {}}, "f:metadata": {"f:labels": {"f:a": {}}}}
    # kubectl hides them unless asked
    plain = json.loads(kubectl("get", "configmap", name, "-o", "json", version=version).stdout)
    assert "managedFields" not in plain["metadata"]


def test_another_managers_field_is_a_conflict_until_forced(kubectl: Kubectl) -> None:
    kubectl("apply", "--server-side", "-f", "-", input=_configmap("ssa-conflict", {"x": "1", "y": "1"}))
    theirs = _configmap("ssa-conflict", {"x": "changed"})
    refused = kubectl("apply", "--server-side", "--field-manager=ci", "-f", "-", input=theirs, check=False)
    assert refused.returncode == 1
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .data.x' in refused.stderr
    assert _get(kubectl, "configmap", "ssa-conflict")["data"]["x"] == "1"

    kubectl("apply", "--server-side", "--field-manager=ci", "--force-conflicts", "-f", "-", input=theirs)
    stored = _get(kubectl, "configmap", "ssa-conflict")
    assert stored["data"] == {"x": "changed", "y": "1"}
    owners = _owners(stored)
    assert owners["ci"]["fieldsV1"] == {"f:data": {"f:x": {}}}
    assert owners["kubectl"]["fieldsV1"] == {"f:data": {"f:y": {}}}
    # the first applier, now without x, no longer removes it: ci owns it
    kubectl("apply", "--server-side", "-f", "-", input=_configmap("ssa-conflict", {"y": "1"}))
    assert _get(kubectl, "configmap", "ssa-conflict")["data"] == {"x": "changed", "y": "1"}


def test_kubectl_label_and_edit_style_writes_are_recorded_as_their_own_managers(kubectl: Kubectl) -> None:
    kubectl("apply", "--server-side", "-f", "-", input=_configmap("ssa-label", {"x": "1"}, {"a": "1"}))
    kubectl("label", "configmap", "ssa-label", "team=ml")
    kubectl("patch", "configmap", "ssa-label", "--type=merge", "-p", '{"data":{"x":"patched"}}')
    owners = _owners(_get(kubectl, "configmap", "ssa-label"))
    assert owners["kubectl-label"]["operation"] == "Update"
    assert owners["kubectl-label"]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:team": {}}}}
    assert owners["kubectl-patch"]["fieldsV1"] == {"f:data": {"f:x": {}}}
    assert owners["kubectl"]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:a": {}}}}
    refused = kubectl(
        "apply",
        "--server-side",
        "-f",
        "-",
        input=_configmap("ssa-label", {"x": "1"}, {"a": "1"}),
        check=False,
    )
    assert 'conflict with "kubectl-patch" using v1: .data.x' in refused.stderr


def test_applying_over_a_created_deployment_conflicts_with_before_first_apply(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl("create", "deployment", "ssa-web", "--image=nginx:1.25", "--replicas=1")
    manifest = tmp_path / "web.yaml"
    manifest.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: ssa-web}\nspec:\n  replicas: 3\n"
        "  selector: {matchLabels: {app: ssa-web}}\n  template:\n    metadata: {labels: {app: ssa-web}}\n"
        "    spec:\n      containers: [{name: nginx, image: 'nginx:1.26'}]\n"
    )
    refused = kubectl("apply", "--server-side", "-f", str(manifest), check=False)
    assert refused.returncode == 1
    assert (
        'Apply failed with 2 conflicts: conflicts with "before-first-apply" using apps/v1:' in refused.stderr
    )
    assert "- .spec.replicas" in refused.stderr
    assert '- .spec.template.spec.containers[name="nginx"].image' in refused.stderr
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    stored = _get(kubectl, "deployment", "ssa-web")
    assert stored["spec"]["replicas"] == 3
    assert stored["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.26"
    applied = _owners(stored)["kubectl"]["fieldsV1"]["f:spec"]
    assert applied["f:template"]["f:spec"]["f:containers"] == {
        'k:{"name":"nginx"}': {".": {}, "f:image": {}, "f:name": {}}
    }
    # scaling is an update of .spec.replicas through the scale subresource, taken from the applier
    kubectl("scale", "deployment", "ssa-web", "--replicas=2")
    owners = _owners(_get(kubectl, "deployment", "ssa-web"))
    assert owners["kubectl"]["fieldsV1"]["f:spec"].get("f:replicas") is None
    assert any(e.get("subresource") == "scale" for e in owners.values() if e["operation"] == "Update")


def test_the_python_client_gets_kubes_errors_for_malformed_applies(apiserver: RunningAPIServer) -> None:
    api = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))
    body = json.loads(_configmap("ssa-client", {"k": "v"}))
    api.api_client.set_default_header("Content-Type", "application/apply-patch+yaml")

    def status(call: Any) -> dict[str, Any]:
        with pytest.raises(kubernetes.client.ApiException) as caught:
            call()
        return json.loads(caught.value.body)

    missing = status(lambda: api.patch_namespaced_config_map("ssa-client", "default", body))
    assert (missing["code"], missing["reason"]) == (422, "Invalid")
    assert missing["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    )
    wrong = dict(body, apiVersion="v2")
    version = status(
        lambda: api.patch_namespaced_config_map("ssa-client", "default", wrong, field_manager="py")
    )
    assert (version["code"], version["message"]) == (
        400,
        "Incorrect version specified in apply patch. Specified patch version: v2, expected: v1",
    )
    owned = json.loads(json.dumps(body))
    owned["metadata"]["managedFields"] = [{"manager": "me"}]
    meta = status(lambda: api.patch_namespaced_config_map("ssa-client", "default", owned, field_manager="py"))
    assert (meta["code"], meta["message"]) == (400, "metadata.managedFields must be nil")

    created = api.patch_namespaced_config_map("ssa-client", "default", body, field_manager="py")
    assert created.data == {"k": "v"}
    assert [(e.manager, e.operation) for e in created.metadata.managed_fields] == [("py", "Apply")]
    api.api_client.set_default_header("Content-Type", "application/merge-patch+json")
    forced = status(
        lambda: api.patch_namespaced_config_map("ssa-client", "default", {"data": {"k": "w"}}, force=True)
    )
    assert (forced["code"], forced["reason"]) == (422, "Invalid")
    assert "force: Forbidden: may not be specified for non-apply patch" in forced["message"]


def test_moving_from_client_side_to_server_side_apply_keeps_kubectls_fields(kubectl: Kubectl) -> None:
    """kube lets `kubectl apply --server-side` take the fields its last client-side apply set (while the
    object still holds those values) and keeps the last-applied annotation in step."""
    kubectl("apply", "-f", "-", input=_configmap("ssa-upgrade", {"x": "1", "y": "1"}))
    kubectl("apply", "--server-side", "-f", "-", input=_configmap("ssa-upgrade", {"x": "2", "y": "1"}))
    stored = _get(kubectl, "configmap", "ssa-upgrade")
    assert stored["data"] == {"x": "2", "y": "1"}
    last = json.loads(stored["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["data"] == {"x": "2", "y": "1"}
    # a value someone else changed since is theirs: that is still a conflict
    kubectl("apply", "-f", "-", input=_configmap("ssa-other", {"x": "1"}))
    kubectl("patch", "configmap", "ssa-other", "--type=merge", "-p", '{"data":{"x":"patched"}}')
    refused = kubectl(
        "apply", "--server-side", "-f", "-", input=_configmap("ssa-other", {"x": "3"}), check=False
    )
    assert refused.returncode == 1 and "Apply failed with 1 conflict" in refused.stderr
    assert ".data.x" in refused.stderr


def test_an_applied_zero_value_undoes_a_stored_one_and_stays_owned(kubectl: Kubectl) -> None:
    def deployment(paused: bool) -> str:
        return json.dumps(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "ssa-paused"},
                "spec": {
                    "paused": paused,
                    "selector": {"matchLabels": {"app": "p"}},
                    "template": {
                        "metadata": {"labels": {"app": "p"}},
                        "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]},
                    },
                },
            }
        )

    kubectl("apply", "--server-side", "-f", "-", input=deployment(True))
    assert _get(kubectl, "deployment", "ssa-paused")["spec"]["paused"] is True
    kubectl("apply", "--server-side", "-f", "-", input=deployment(False))
    stored = _get(kubectl, "deployment", "ssa-paused")
    # Go's encoder leaves the omitempty false out; the applier still owns the field
    assert "paused" not in stored["spec"]
    assert "f:paused" in _owners(stored)["kubectl"]["fieldsV1"]["f:spec"]


def test_a_field_manager_name_must_be_short_and_printable(
    kubectl: Kubectl, apiserver: RunningAPIServer
) -> None:
    """kube's ValidateFieldManager on create, update and patch: at most 128 bytes, printable characters
    only (a bad one named by its byte offset), each a 422 for the request's options."""
    long_name = "m" * 129
    created = kubectl("create", "configmap", "fm-long", f"--field-manager={long_name}", check=False)
    assert created.returncode == 1
    assert (
        'error: failed to create configmap: CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long: must have at most 128 bytes'
        in created.stderr
    )
    kubectl("create", "configmap", "fm-ok", f"--field-manager={'m' * 128}")
    applied = kubectl(
        "apply", "--server-side", "--field-manager=é\tx", "-f", "-",
        input=_configmap("fm-tab", {"k": "v"}), check=False,
    )  # fmt: skip
    assert applied.returncode == 1
    assert 'fieldManager: Invalid value: "é\\tx": invalid character U+0009 (at position 2)' in applied.stderr
    api = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))
    current = api.read_namespaced_config_map("fm-ok", "default")
    with pytest.raises(kubernetes.client.ApiException) as caught:
        api.replace_namespaced_config_map("fm-ok", "default", current, field_manager="a\x00b")
    status = json.loads(caught.value.body)
    assert (status["code"], status["reason"], status["details"]["kind"]) == (422, "Invalid", "UpdateOptions")
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "a\\x00b": invalid character U+0000 (at position 1)',
            "field": "fieldManager",
        }
    ]
    assert api.read_namespaced_config_map("fm-ok", "default").metadata.resource_version == (
        current.metadata.resource_version
    )
