"""The client speaks the REST wire: verbs, Status errors, watch streams, 410 → relist, and the informer."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from fakeapi import FakeApi

from tenantgpu.kubeclient import ApiError, Informer, KubeClient, load_kubeconfig, resource_kind


def _pod(name: str, ns: str = "default") -> dict:
    return {
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


async def _until(cond, timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met")


async def test_create_get_patch_delete_round_trip(fake_api: tuple[FakeApi, KubeClient]) -> None:
    api, client = fake_api
    created = await client.create("pods", _pod("a"), "default")
    assert created["kind"] == "Pod" and created["apiVersion"] == "v1"
    patched = await client.patch("pods", "a", {"metadata": {"annotations": {"k": "v"}}}, "default")
    assert patched["metadata"]["annotations"] == {"k": "v"}
    assert ("PATCH", "/api/v1/namespaces/default/pods/a", "application/merge-patch+json") in api.requests
    got = await client.get("pods", "a", "default")
    assert got["metadata"]["annotations"]["k"] == "v"
    await client.delete("pods", "a", "default")
    with pytest.raises(ApiError) as err:
        await client.get("pods", "a", "default")
    assert err.value.code == 404 and err.value.reason == "NotFound"


async def test_conflict_is_an_api_error_with_reason(fake_api: tuple[FakeApi, KubeClient]) -> None:
    _, client = fake_api
    await client.create("pods", _pod("a"), "default")
    with pytest.raises(ApiError) as err:
        await client.create("pods", _pod("a"), "default")
    assert (err.value.code, err.value.reason) == (409, "AlreadyExists")
    with pytest.raises(ApiError) as err:
        await client.patch(
            "pods", "a", {"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}}, "default"
        )
    assert err.value.reason == "Conflict"


async def test_list_adds_kind_to_items_and_binding_posts(fake_api: tuple[FakeApi, KubeClient]) -> None:
    api, client = fake_api
    await client.create("pods", _pod("a"), "default")
    await client.create("pods", _pod("b", "other"), "other")
    everything = await client.list("pods")
    assert [p["metadata"]["name"] for p in everything["items"]] == ["a", "b"]
    assert all(p["kind"] == "Pod" for p in everything["items"])
    assert len((await client.list("pods", "other"))["items"]) == 1
    await client.create_binding("default", "a", "node-1")
    assert api.bindings[0]["target"] == {"apiVersion": "v1", "kind": "Node", "name": "node-1"}


async def test_watch_streams_events_from_a_resource_version(fake_api: tuple[FakeApi, KubeClient]) -> None:
    _, client = fake_api
    start = (await client.list("pods"))["metadata"]["resourceVersion"]
    await client.create("pods", _pod("a"), "default")
    await client.delete("pods", "a", "default")
    seen = []
    async for event in client.watch("pods", resource_version=start):
        seen.append((event.type, event.object["metadata"]["name"]))
        if len(seen) == 2:
            break
    assert seen == [("ADDED", "a"), ("DELETED", "a")]


async def test_informer_caches_and_relists_after_410(fake_api: tuple[FakeApi, KubeClient]) -> None:
    api, client = fake_api
    await client.create("pods", _pod("a"), "default")
    informer = Informer(client, "pods")
    events: list[tuple[str, str]] = []
    informer.add_handler(lambda kind, obj, old: events.append((kind, obj["metadata"]["name"])))
    await informer.start()
    assert informer.get("default", "a") is not None
    await client.create("pods", _pod("b"), "default")
    await _until(lambda: informer.get("default", "b") is not None)
    # The server compacts history and drops the watch: the informer must relist, not lose "c" or "a"'s delete.
    api.oldest_watchable = 10**9
    await client.create("pods", _pod("c"), "default")
    await client.delete("pods", "a", "default")
    api.close_watches()
    await _until(lambda: informer.relists >= 2)
    assert informer.get("default", "c") is not None and informer.get("default", "a") is None
    assert ("DELETED", "a") in events and ("ADDED", "c") in events
    await informer.stop()


def test_kubeconfig_with_embedded_data_and_token(tmp_path: Path) -> None:
    ca = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    (tmp_path / "kc").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443/',"
        f" certificate-authority-data: {base64.b64encode(ca).decode()}}}}}]\n"
        "users: [{name: u, user: {token: abc}}]\n"
        "contexts: [{name: t, context: {cluster: c, user: u, namespace: team-a}}]\n"
    )
    cfg = load_kubeconfig(tmp_path / "kc")
    assert cfg.server == "https://127.0.0.1:6443"
    assert cfg.ca_data == ca and cfg.token == "abc" and cfg.namespace == "team-a"


def test_resource_paths() -> None:
    assert resource_kind("pods").path("ns", "p", "binding") == "/api/v1/namespaces/ns/pods/p/binding"
    assert resource_kind("leases").path("kube-node-lease", "n1") == (
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
    )
    assert resource_kind("nodes").path(None, "n1", "status") == "/api/v1/nodes/n1/status"
    assert resource_kind("Pod").path() == "/api/v1/pods"


def test_kubeconfig_exec_credential_plugin(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.sh"
    plugin.write_text(
        "#!/bin/sh\n"
        'echo "{\\"apiVersion\\": \\"client.authentication.k8s.io/v1\\", \\"kind\\": \\"ExecCredential\\",'
        ' \\"status\\": {\\"token\\": \\"from-plugin-$WHO\\"}}"\n'
    )
    plugin.chmod(0o755)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "t",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [
            {
                "name": "u",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": str(plugin),
                        "env": [{"name": "WHO", "value": "me"}],
                    }
                },
            }
        ],
        "contexts": [{"name": "t", "context": {"cluster": "c", "user": "u"}}],
    }
    (tmp_path / "kc").write_text(json.dumps(config))  # JSON is YAML
    assert load_kubeconfig(tmp_path / "kc").token == "from-plugin-me"
