"""The real `kubectl explain` (1.27–1.33) against a tenant API server: real field types and descriptions.

What each version reads: all of them render `explain` from OpenAPI v3 (`/openapi/v3`, then the group-
version's document) and fall back to v2 only when the server has no v3 root, or when told
`--output=plaintext-openapiv2`. kubectl 1.27 and 1.28 also fetch and parse `/openapi/v2` up front (their
`explain` loads it in `Complete`), so that protobuf document must stay well-formed; it carries no
definitions (see `openapi_v2.py`), so `--output=plaintext-openapiv2` still answers "couldn't find
resource". Seen with `-v=6` against this server, and in kubectl's `pkg/cmd/explain/explain.go` and
`pkg/explain/v2/templates/plaintext.tmpl` for those releases.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RawClient, start_server
from kubernetes.client import models

from tenantgpu.apiserver import openapi

pytestmark = pytest.mark.slow  # drives real kubectl binaries

VERSIONS = ["1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33"]


def words(text: str) -> str:
    """kubectl wraps descriptions at 76 columns; compare texts with their whitespace folded."""
    return " ".join(text.split())


def client_text(model: type, attribute: str) -> str:
    """The installed client's description of a field, however its generation keeps it."""
    fields = getattr(model, "model_fields", None)
    if fields:
        return fields[attribute].description or ""
    paragraphs = (inspect.getdoc(getattr(model, attribute)) or "").split("\n\n")
    return paragraphs[1] if len(paragraphs) > 1 else ""


def opening(text: str, count: int = 8) -> str:
    fragment = " ".join(words(text.replace("# noqa: E501", "")).split()[:count])
    assert fragment, "the installed client has no text for this field"
    return fragment


@pytest.mark.parametrize("version", VERSIONS)
def test_explain_pod_lists_fields_with_types_and_descriptions(kubectl: Kubectl, version: str) -> None:
    out = kubectl("explain", "pod", version=version).stdout
    assert "KIND:       Pod" in out and "VERSION:    v1" in out
    assert "metadata\t<ObjectMeta>" in out
    assert "spec\t<PodSpec>" in out and "status\t<PodStatus>" in out
    assert "apiVersion\t<string>" in out
    assert opening(client_text(models.V1Pod, "api_version")) in words(out)


@pytest.mark.parametrize("version", VERSIONS)
def test_explain_follows_a_path_into_containers(kubectl: Kubectl, version: str) -> None:
    out = kubectl("explain", "pod.spec.containers.resources", version=version).stdout
    assert "FIELD: resources <ResourceRequirements>" in out
    assert "limits\t<map[string]Quantity>" in out and "requests\t<map[string]Quantity>" in out
    assert opening(client_text(models.V1ResourceRequirements, "limits")) in words(out)

    out = kubectl("explain", "pods.spec.containers", "--api-version=v1", version=version).stdout
    assert "FIELD: containers <[]Container>" in out
    assert "name\t<string> -required-" in out and "image\t<string>" in out
    assert "ports\t<[]ContainerPort>" in out
    assert opening(client_text(models.V1PodSpec, "containers")) in words(out)


@pytest.mark.parametrize("version", VERSIONS)
def test_explain_workloads(kubectl: Kubectl, version: str) -> None:
    out = kubectl("explain", "deployment.spec.strategy", version=version).stdout
    assert "GROUP:      apps" in out and "KIND:       Deployment" in out
    assert "FIELD: strategy <DeploymentStrategy>" in out
    assert "rollingUpdate\t<RollingUpdateDeployment>" in out and "type\t<string>" in out
    surge = kubectl("explain", "deployment.spec.strategy.rollingUpdate", version=version).stdout
    assert "maxSurge\t<IntOrString>" in surge and "maxUnavailable\t<IntOrString>" in surge

    tree = kubectl("explain", "job.spec", "--recursive", version=version).stdout
    assert "GROUP:      batch" in tree and "FIELD: spec <JobSpec>" in tree
    assert "template\t<PodTemplateSpec> -required-" in tree
    assert "containers\t<[]Container> -required-" in tree  # nested under template.spec
    assert "backoffLimit\t<integer>" in tree


@pytest.mark.parametrize("version", VERSIONS)
def test_explain_refuses_an_unknown_field(kubectl: Kubectl, version: str) -> None:
    result = kubectl("explain", "pod.spec.nosuchfield", version=version, check=False)
    assert result.returncode != 0
    assert 'field "nosuchfield" does not exist' in result.stderr
    # the server is v1.31.4: pod-level resources came with 1.32
    newer = kubectl("explain", "pod.spec.resources", version=version, check=False)
    assert newer.returncode != 0 and 'field "resources" does not exist' in newer.stderr


def test_documents_are_built_per_group_version_on_first_request(
    background_loop: BackgroundLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kubectl applying a Kamaji object reads the root and Kamaji's document: no client schema is built."""
    built: list[tuple[str, str, str]] = []
    derive = openapi.kind_schemas

    def recording(group: str, version: str, kind: str) -> object:
        built.append((group, version, kind))
        return derive(group, version, kind)

    monkeypatch.setattr(openapi, "kind_schemas", recording)
    running = start_server(background_loop, tmp_path, "lazy", management=True)
    try:
        client = RawClient(running.kubeconfig)
        root = client.request("GET", "/openapi/v3").json()
        assert built == []
        kamaji = client.request("GET", root["paths"]["apis/kamaji.clastix.io/v1alpha1"]["serverRelativeURL"])
        assert kamaji.status == 200 and {group for group, _, _ in built} == {"kamaji.clastix.io"}
        core = client.request("GET", root["paths"]["api/v1"]["serverRelativeURL"]).json()
        assert "io.k8s.api.core.v1.PodSpec" in core["components"]["schemas"]
        assert client.request("GET", "/openapi/v3/apis/nosuch/v1").status == 404
    finally:
        background_loop.run(running.server.stop())
        running.datastore.close()
