"""kube's field validation through the real kubectl: a typo in a manifest is refused (`--validate=strict`,
kubectl's default), warned about and dropped (`--validate=warn`, and the server's default), or dropped
silently (`--validate=false`); an unknown field is never stored."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes
import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RawClient, RunningAPIServer, release_server

pytestmark = pytest.mark.slow  # drives real kubectl binaries

TYPO = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namspace: x
spec:
  containers:
  - name: main
    image: busybox
    imagee: nginx
"""


def _manifest(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(TYPO.format(name=name))
    return path


@pytest.mark.parametrize("version", ["1.27", "1.29", "1.33"])
def test_strict_by_default_refuses_a_typo_with_kube_s_message(
    kubectl: Kubectl, tmp_path: Path, version: str
) -> None:
    name = f"strict-{version.replace('.', '')}"
    for verb in ("create", "apply"):
        refused = kubectl(verb, "-f", str(_manifest(tmp_path, name)), version=version, check=False)
        assert refused.returncode == 1
        assert (
            f'Error from server (BadRequest): error when creating "{tmp_path / name}.yaml": Pod in version "v1" '
            'cannot be handled as a Pod: strict decoding error: unknown field "metadata.namspace", '
            'unknown field "spec.containers[0].imagee"'
        ) in refused.stderr
    assert kubectl("get", "pod", name, "--ignore-not-found", version=version).stdout == ""


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_warn_and_ignore_drop_the_field(kubectl: Kubectl, tmp_path: Path, version: str) -> None:
    name = f"warned-{version.replace('.', '')}"
    warned = kubectl("create", "-f", str(_manifest(tmp_path, name)), "--validate=warn", version=version)
    assert 'Warning: unknown field "metadata.namspace"' in warned.stderr
    assert 'Warning: unknown field "spec.containers[0].imagee"' in warned.stderr
    stored = json.loads(kubectl("get", "pod", name, "-o", "json").stdout)
    assert "namspace" not in stored["metadata"] and "imagee" not in stored["spec"]["containers"][0]

    quiet = f"quiet-{version.replace('.', '')}"
    ignored = kubectl("create", "-f", str(_manifest(tmp_path, quiet)), "--validate=false", version=version)
    assert "Warning" not in ignored.stderr
    assert "imagee" not in kubectl("get", "pod", quiet, "-o", "json").stdout


def test_patches_are_checked_and_apply_of_a_known_change_still_merges(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = tmp_path / "patched.yaml"
    manifest.write_text(
        TYPO.format(name="patched").replace("  namspace: x\n", "").replace("    imagee: nginx\n", "")
    )
    kubectl("apply", "-f", str(manifest))
    # kubectl patch sends no fieldValidation: the server's default (Warn) applies
    merged = kubectl("patch", "pod", "patched", "-p", '{"spec":{"foo":1},"metadata":{"labels":{"a":"b"}}}')
    assert 'Warning: unknown field "spec.foo"' in merged.stderr
    listed = kubectl(
        "patch", "pod", "patched", "--type=json", "-p", '[{"op":"add","path":"/spec/bar","value":1}]'
    )
    assert 'Warning: unknown field "spec.bar"' in listed.stderr
    pod = json.loads(kubectl("get", "pod", "patched", "-o", "json").stdout)
    assert pod["metadata"]["labels"]["a"] == "b" and "foo" not in pod["spec"] and "bar" not in pod["spec"]
    # a client-side apply of an existing object is a strategic merge patch with its directives
    manifest.write_text(manifest.read_text().replace("image: busybox", "image: busybox:1.36"))
    assert "pod/patched configured" in kubectl("apply", "-f", str(manifest)).stdout
    # and an apply that adds a typo to it is refused
    manifest.write_text(manifest.read_text() + "  restartPolicyy: Never\n")
    refused = kubectl("apply", "-f", str(manifest), check=False)
    assert refused.returncode == 1 and 'unknown field "spec.restartPolicyy"' in refused.stderr


def test_a_bad_field_validation_value_is_a_bad_request(apiserver: RunningAPIServer) -> None:
    client = RawClient(apiserver.kubeconfig)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fv"}}
    response = client.request("POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Loud", body)
    assert response.status == 400 and response.json()["reason"] == "BadRequest"
    assert "fieldValidation" in response.json()["message"]


WRONG_SCALARS = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: "three"
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: main
        image: busybox
        env:
        - name: PORT
          value: 8080
"""


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_a_scalar_of_the_wrong_type_is_kubes_decoding_error(
    kubectl: Kubectl, tmp_path: Path, version: str
) -> None:
    """Found by probing: `replicas: "three"` got a 422 about its range, and an unquoted `value: 8080`
    was stored as a number. kube's decoder refuses the body (a 400, whatever --validate says) and names
    the first field of the wrong type."""
    name = f"scalars-{version.replace('.', '')}"
    manifest = tmp_path / f"{name}.yaml"
    manifest.write_text(WRONG_SCALARS.format(name=name))
    for flags in ((), ("--validate=false",)):
        refused = kubectl("apply", "-f", str(manifest), *flags, version=version, check=False)
        assert refused.returncode == 1
        assert (
            f'Error from server (BadRequest): error when creating "{manifest}": Deployment in version "v1" '
            "cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field "
            "DeploymentSpec.spec.replicas of type int32"
        ) in refused.stderr
    manifest.write_text(WRONG_SCALARS.format(name=name).replace('"three"', "2"))
    refused = kubectl("create", "-f", str(manifest), version=version, check=False)
    assert (
        "json: cannot unmarshal number into Go struct field EnvVar.spec.template.spec.containers.env.value"
        " of type string"
    ) in refused.stderr
    assert kubectl("get", "deployment", name, "--ignore-not-found", version=version).stdout == ""


def test_zero_values_go_s_encoder_omits_are_not_read_back_and_a_patch_to_zero_still_applies(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    """Found by probing with kubectl: `paused: false`, `minReadySeconds: 0`, `env[].value: ""` and
    `args: []` came back from the server as written; kube round-trips a write through Go structs, so a
    zero `omitempty` field is not stored, and absent means zero. A merge patch to `false` still undoes a
    `true` (a patch's zeros are kept: leaving them out would leave the `true`)."""
    manifest = tmp_path / "zeros.yaml"
    manifest.write_text(
        """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: zeros}
spec:
  paused: true
  minReadySeconds: 0
  replicas: 0
  selector: {matchLabels: {app: zeros}}
  template:
    metadata: {labels: {app: zeros}}
    spec:
      hostNetwork: false
      containers:
      - {name: main, image: busybox, args: [], tty: false, env: [{name: X, value: ""}]}
"""
    )
    kubectl("create", "-f", str(manifest))
    stored = json.loads(kubectl("get", "deployment", "zeros", "-o", "json").stdout)
    assert stored["spec"]["paused"] is True and stored["spec"]["replicas"] == 0
    assert "minReadySeconds" not in stored["spec"]
    assert "hostNetwork" not in stored["spec"]["template"]["spec"]
    assert stored["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "X"}]
    assert {"args", "tty"}.isdisjoint(stored["spec"]["template"]["spec"]["containers"][0])
    kubectl("patch", "deployment", "zeros", "--type=merge", "-p", '{"spec":{"paused":false}}')
    resumed = json.loads(kubectl("get", "deployment", "zeros", "-o", "json").stdout)
    assert resumed["spec"].get("paused", False) is False
    kubectl("delete", "deployment", "zeros")


def test_a_patch_or_server_side_apply_to_a_zero_value_leaves_the_field_absent_as_kube_does(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    """Found by probing after the test above: a patch's zeros were kept in the patched object, so
    `paused: false` by merge patch, `hostNetwork: false` by strategic merge or JSON patch, and `args: []`
    in a server-side apply that created the object were read back as written. kube decodes the patched
    object into Go structs, whose encoder leaves a zero `omitempty` field out: after any of these the
    field is absent (which still means false, as the test above checks)."""
    manifest = tmp_path / "applied.yaml"
    manifest.write_text(
        """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: applied}
spec:
  paused: true
  replicas: 0
  selector: {matchLabels: {app: applied}}
  template:
    metadata: {labels: {app: applied}}
    spec:
      hostNetwork: true
      containers:
      - {name: main, image: busybox, args: [], tty: false}
"""
    )
    kubectl("apply", "--server-side", "-f", str(manifest))

    def spec() -> dict:
        return json.loads(kubectl("get", "deployment", "applied", "-o", "json").stdout)["spec"]

    created = spec()
    assert created["paused"] is True and created["template"]["spec"]["hostNetwork"] is True
    assert {"args", "tty"}.isdisjoint(created["template"]["spec"]["containers"][0])
    kubectl("patch", "deployment", "applied", "--type=merge", "-p", '{"spec":{"paused":false}}')
    assert "paused" not in spec()
    kubectl("patch", "deployment", "applied", "-p", '{"spec":{"template":{"spec":{"hostNetwork":false}}}}')
    assert "hostNetwork" not in spec()["template"]["spec"]
    kubectl(
        "patch",
        "deployment",
        "applied",
        "--type=merge",
        "-p",
        '{"spec":{"template":{"spec":{"hostNetwork":true}}}}',
    )
    kubectl(
        "patch",
        "deployment",
        "applied",
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/template/spec/hostNetwork","value":false}]',
    )
    assert "hostNetwork" not in spec()["template"]["spec"]
    kubectl(
        "patch",
        "deployment",
        "applied",
        "--type=json",
        "-p",
        '[{"op":"add","path":"/spec/template/spec/containers/0/command","value":[]}]',
    )
    assert "command" not in spec()["template"]["spec"]["containers"][0]
    # A zero the type keeps (replicas is a pointer) stays.
    assert spec()["replicas"] == 0
    kubectl("delete", "deployment", "applied")


def test_a_field_newer_than_the_server_s_release_is_an_unknown_field(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    """The API server here is v1.31.4: pod-level `spec.resources` came with 1.32, so kubectl gets the
    strict decoding error a 1.31 cluster gives, and `--validate=warn` stores the pod without it."""
    manifest = tmp_path / "podlevel.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: podlevel}\n"
        "spec:\n  resources: {limits: {cpu: '1'}}\n  containers: [{name: main, image: busybox}]\n"
    )
    assert kubectl("version", "-o", "json").stdout.count('"gitVersion": "v1.31.4"') == 1
    refused = kubectl("apply", "-f", str(manifest), check=False)
    assert refused.returncode == 1
    assert 'strict decoding error: unknown field "spec.resources"' in refused.stderr
    warned = kubectl("create", "-f", str(manifest), "--validate=warn")
    assert 'Warning: unknown field "spec.resources"' in warned.stderr
    assert "resources" not in json.loads(kubectl("get", "pod", "podlevel", "-o", "json").stdout)["spec"]
    kubectl("delete", "pod", "podlevel")


def test_a_1_27_tenant_refuses_a_sidecar_as_its_release_does(
    kubectl: Kubectl, background_loop: BackgroundLoop, tmp_path: Path
) -> None:
    """Native sidecars (an init container's `restartPolicy`) came with 1.28: kubectl 1.27 against a
    v1.27 tenant gets kube 1.27's strict decoding error. A v1.28 tenant knows the field but its gate,
    SidecarContainers, is alpha and off there: the pod is taken without a word and stored as a plain
    init container, as kube 1.28's dropDisabledFields does; from 1.29 (beta, on) the sidecar is kept."""
    manifest = tmp_path / "sidecar.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: sidecar}\nspec:\n"
        "  initContainers: [{name: proxy, image: busybox, restartPolicy: Always}]\n"
        "  containers: [{name: main, image: busybox}]\n"
    )
    with release_server(background_loop, tmp_path / "v127", "v1.27.16") as old:
        refused = kubectl("apply", "-f", str(manifest), kubeconfig=old, version="1.27", check=False)
        assert refused.returncode == 1
        assert 'strict decoding error: unknown field "spec.initContainers[0].restartPolicy"' in refused.stderr
        explained = kubectl("explain", "pod.spec.initContainers.restartPolicy", kubeconfig=old, check=False)
        assert explained.returncode == 1 and "does not exist" in explained.stderr, explained.stderr
    with release_server(background_loop, tmp_path / "v128", "v1.28.15") as gated:
        taken = kubectl("apply", "-f", str(manifest), kubeconfig=gated, version="1.28")
        assert "Warning" not in taken.stderr, taken.stderr
        pod = json.loads(kubectl("get", "pod", "sidecar", "-o", "json", kubeconfig=gated).stdout)
        assert "restartPolicy" not in pod["spec"]["initContainers"][0]
    with release_server(background_loop, tmp_path / "v129", "v1.29.14") as newer:
        kubectl("apply", "-f", str(manifest), kubeconfig=newer, version="1.29")
        pod = json.loads(kubectl("get", "pod", "sidecar", "-o", "json", kubeconfig=newer).stdout)
        assert pod["spec"]["initContainers"][0]["restartPolicy"] == "Always"


def test_too_long_is_worded_as_each_release_words_it(
    kubectl: Kubectl, background_loop: BackgroundLoop, tmp_path: Path
) -> None:
    """kube 1.32 reworded field.TooLong: `must have at most 262144 bytes` up to 1.31, `may not be more
    than 262144 bytes` from 1.32 (apimachinery v0.31.0 against v0.32.0). Each tenant answers in its own
    release's words, in the Status message kubectl prints and in its cause."""
    manifest = tmp_path / "big.yaml"
    big = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "big", "annotations": {"a": "x" * 262144}},
    }
    manifest.write_text(json.dumps(big))
    refused = kubectl("create", "-f", str(manifest), check=False)  # the module's v1.31 server
    assert refused.returncode == 1
    assert (
        'The ConfigMap "big" is invalid: metadata.annotations: Too long: must have at most 262144 bytes'
        in refused.stderr
    ), refused.stderr
    with release_server(background_loop, tmp_path / "v132", "v1.32.4") as newer:
        refused = kubectl("create", "-f", str(manifest), kubeconfig=newer, version="1.32", check=False)
        assert (
            'The ConfigMap "big" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes'
            in refused.stderr
        ), refused.stderr
        long_manager = kubectl(
            "create", "configmap", "fm", f"--field-manager={'m' * 129}", kubeconfig=newer, version="1.32",
            check=False,
        )  # fmt: skip
        assert "fieldManager: Too long: may not be more than 128 bytes" in long_manager.stderr
        # the official client sees the same words in the Status cause
        api = kubernetes.config.new_client_from_config(str(newer))
        with pytest.raises(kubernetes.client.ApiException) as caught:
            kubernetes.client.CoreV1Api(api).create_namespaced_config_map("default", big)
        api.close()
        status = json.loads(caught.value.body)
        assert status["details"]["causes"] == [
            {
                "reason": "FieldValueTooLong",
                "message": "Too long: may not be more than 262144 bytes",
                "field": "metadata.annotations",
            }
        ]
