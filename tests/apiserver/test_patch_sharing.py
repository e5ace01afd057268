"""A patch's new revision shares the fields the patch leaves alone with the stored one: the stored
revision must stay exactly as it was stored, and what the patch changed is defaulted as on any write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.kinds import Kind
from tenantgpu.apiserver.patch import (
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    apply_merge_patch,
    apply_strategic_merge_patch,
    patched_fields,
)
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.registry import Registry
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore
from tenantgpu.apiserver.watchcache import Entry

ADMIN = UserInfo("admin", ("system:masters",))


@pytest.fixture
async def registry(tmp_path: Path):  # type: ignore[no-untyped-def]
    store = SQLiteDatastore(tmp_path / "s.db")
    server = APIServer(APIServerConfig(name="t", datastore=store, pki=ServerPKI.create("t")))
    await server.registry.load()
    yield server.registry
    store.close()


def _kind(registry: Registry, group: str, version: str, plural: str) -> Kind:
    kind = registry.kinds.resource(group, version, plural)
    assert kind is not None
    return kind


async def _patch(
    registry: Registry,
    kind: Kind,
    namespace: str,
    name: str,
    patch: dict[str, Any],
    *,
    strategic: bool = False,
    subresource: str = "",
) -> tuple[Entry, Entry]:
    """The stored revision before, and the one the patch made, applied as the API server applies it."""
    before = registry.get(kind, namespace, name)
    content_type = STRATEGIC_MERGE_PATCH if strategic else MERGE_PATCH

    def mutation(obj: dict[str, Any]) -> dict[str, Any]:
        if strategic:
            return apply_strategic_merge_patch(obj, patch, kind.kind, owned=True)
        return apply_merge_patch(obj, patch, owned=True)

    after = await registry.modify(
        kind,
        namespace,
        name,
        mutation,
        ADMIN,
        subresource=subresource,
        changes=patched_fields(patch, content_type),
    )
    return before, after


def _as_stored(entry: Entry) -> None:
    assert entry.obj == orjson.loads(entry.raw)


POD = {
    "metadata": {"name": "p", "labels": {"app": "a"}},
    "spec": {
        "containers": [{"name": "c", "image": "cuda:1", "resources": {"limits": {"nvidia.com/gpumem": 3000}}}]
    },
}


async def test_an_annotation_patch_leaves_the_stored_pod_revision_as_it_was(registry: Registry) -> None:
    pods = _kind(registry, "", "v1", "pods")
    await registry.create(pods, "default", orjson.loads(orjson.dumps(POD)), ADMIN)
    before, after = await _patch(registry, pods, "default", "p", {"metadata": {"annotations": {"a": "b"}}})
    _as_stored(before)
    _as_stored(after)
    assert "annotations" not in before.obj["metadata"]
    assert after.obj["metadata"]["annotations"] == {"a": "b"}
    assert after.obj["spec"] == before.obj["spec"]
    assert after.obj["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpumem": "3k"}
    assert int(after.obj["metadata"]["resourceVersion"]) > int(before.obj["metadata"]["resourceVersion"])


async def test_a_status_patch_is_defaulted_and_leaves_the_stored_revision(registry: Registry) -> None:
    pods = _kind(registry, "", "v1", "pods")
    await registry.create(pods, "default", orjson.loads(orjson.dumps(POD)), ADMIN)
    patch = {"status": {"phase": "Running", "qosClass": None}}
    before, after = await _patch(registry, pods, "default", "p", patch, subresource="status")
    _as_stored(before)
    _as_stored(after)
    assert before.obj["status"]["phase"] == "Pending"
    # the status defaulting runs on the status the patch changed: the class it took away comes back
    assert after.obj["status"] == {"phase": "Running", "qosClass": "BestEffort"}
    assert after.obj["spec"] == before.obj["spec"]


async def test_a_strategic_patch_of_the_spec_is_defaulted(registry: Registry) -> None:
    deployments = _kind(registry, "apps", "v1", "deployments")
    body = {
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "x:1"}]},
            },
        },
    }
    await registry.create(deployments, "default", body, ADMIN)
    # the merge key keeps container c as it was and adds d, which gets a container's defaults
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "d", "image": "y"}]}}}}
    before, after = await _patch(registry, deployments, "default", "d", patch, strategic=True)
    _as_stored(before)
    _as_stored(after)
    assert [c["name"] for c in before.obj["spec"]["template"]["spec"]["containers"]] == ["c"]
    added = after.obj["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["imagePullPolicy"], c["terminationMessagePath"]) for c in added] == [
        ("d", "Always", "/dev/termination-log"),
        ("c", "IfNotPresent", "/dev/termination-log"),
    ]
    assert after.obj["metadata"]["generation"] == before.obj["metadata"]["generation"] + 1
    # a label patch changes no spec: the generation stays
    before, after = await _patch(registry, deployments, "default", "d", {"metadata": {"labels": {"x": "y"}}})
    _as_stored(before)
    assert after.obj["metadata"]["generation"] == before.obj["metadata"]["generation"]
    assert after.obj["spec"] == before.obj["spec"]


async def test_node_lock_and_status_patches(registry: Registry) -> None:
    nodes = _kind(registry, "", "v1", "nodes")
    node = {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4", "nvidia.com/gpu": "20"}}}
    await registry.create(nodes, "", node, ADMIN)
    lock = {"metadata": {"annotations": {"hami.io/mutex.lock": "2026-11-30T00:00:00Z,default,p"}}}
    before, after = await _patch(registry, nodes, "", "n", lock)
    _as_stored(before)
    _as_stored(after)
    assert after.obj["status"] == before.obj["status"]
    status = {
        "status": {"capacity": {"nvidia.com/gpumem": 46068}, "allocatable": {"nvidia.com/gpumem": 46068}}
    }
    before, after = await _patch(registry, nodes, "", "n", status, subresource="status")
    _as_stored(before)
    _as_stored(after)
    assert after.obj["status"]["capacity"]["nvidia.com/gpumem"] == "46068"
    assert "nvidia.com/gpumem" not in before.obj["status"]["capacity"]
    assert after.obj["metadata"]["annotations"] == lock["metadata"]["annotations"]


async def test_a_namespace_label_patch_keeps_the_name_label(registry: Registry) -> None:
    # Namespaces change their update in the strategy's own hook: the patch works on a whole copy.
    namespaces = _kind(registry, "", "v1", "namespaces")
    await registry.create(namespaces, "", {"metadata": {"name": "team"}}, ADMIN)
    patch = {"metadata": {"labels": {"kubernetes.io/metadata.name": "other", "tier": "gpu"}}}
    before, after = await _patch(registry, namespaces, "", "team", patch)
    _as_stored(before)
    _as_stored(after)
    assert after.obj["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team", "tier": "gpu"}


def test_patched_fields() -> None:
    assert patched_fields({"metadata": {}, "status": None}, MERGE_PATCH) == {"metadata", "status"}
    assert patched_fields({"$patch": "x"}, MERGE_PATCH) == {"$patch"}  # a plain key to a merge patch
    smp = {"spec": {}, "$setElementOrder/finalizers": [], "$deleteFromPrimitiveList/items": []}
    assert patched_fields(smp, STRATEGIC_MERGE_PATCH) == {"spec", "finalizers", "items"}
    assert patched_fields({"$patch": "replace", "spec": {}}, STRATEGIC_MERGE_PATCH) is None
    assert patched_fields({"$retainKeys": ["spec"]}, STRATEGIC_MERGE_PATCH) is None
    assert patched_fields([{"op": "add", "path": "/x", "value": 1}], "application/json-patch+json") is None
    assert patched_fields({"spec": {}}, "application/apply-patch+yaml") is None
