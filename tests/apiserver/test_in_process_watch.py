"""A watch of a component in the API server's own process (the controller duties) gets the server's
stored objects handed over, not encoded and decoded again: the same events, in the same order, ended
when either side ends, and nothing for a client the server cannot hand over to."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tenantgpu.apiserver import watchcache
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore
from tenantgpu.apiserver.watchcache import Entry, Event, ResourceCache, encode
from tenantgpu.inprocesswatch import InProcessWatch, InProcessWatches
from tenantgpu.kubeclient import Informer, KubeClient, KubeConfig
from tenantgpu.kubeclient.client import WatchEvent


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[APIServer]:
    store = SQLiteDatastore(tmp_path / "s.db")
    api = APIServer(APIServerConfig(name="t", datastore=store, pki=ServerPKI.create("t")))
    await api.start()
    try:
        yield api
    finally:
        await api.stop()
        store.close()


def _client(server: APIServer, hand_over: InProcessWatches | None) -> KubeClient:
    url, token = server.loopback("system:kube-controller-manager", ["system:masters"])
    return KubeClient(KubeConfig(server=url, token=token), in_process=hand_over)


def _config_map(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": labels}, "data": {"k": "v"}}


async def _collect(events: AsyncIterator[WatchEvent], into: list[WatchEvent], until: int) -> None:
    async for event in events:
        if event.type != "BOOKMARK":
            into.append(event)
        if len(into) >= until:
            return


async def _writes(client: KubeClient) -> None:
    await client.create("configmaps", _config_map("a", team="x"), namespace="default")
    await client.create("configmaps", _config_map("b", team="y"), namespace="default")
    # a leaves the selector team=x (DELETED for that watch), b enters it (ADDED)
    await client.patch("configmaps", "a", {"metadata": {"labels": {"team": "z"}}}, namespace="default")
    await client.patch("configmaps", "b", {"metadata": {"labels": {"team": "x"}}}, namespace="default")
    await client.patch("configmaps", "b", {"data": {"k": "w"}}, namespace="default")
    await client.delete("configmaps", "b", namespace="default")


def _seen(events: list[WatchEvent]) -> list[tuple[str, str, str]]:
    return [(e.type, e.object["metadata"]["name"], e.object["metadata"]["resourceVersion"]) for e in events]


async def test_an_in_process_watch_sees_what_the_connection_carries_as_the_stored_objects(
    server: APIServer,
) -> None:
    local = _client(server, server.in_process_watches)
    wire = _client(server, None)
    try:
        start = (await wire.list("configmaps", "default"))["metadata"]["resourceVersion"]
        by_local: list[WatchEvent] = []
        by_wire: list[WatchEvent] = []
        watches = [
            asyncio.create_task(
                _collect(
                    client.watch(
                        "configmaps", "default", resource_version=start, label_selector="team=x", shared=True
                    ),
                    into,
                    4,
                )
            )
            for client, into in ((local, by_local), (wire, by_wire))
        ]
        await asyncio.sleep(0.2)
        await _writes(wire)
        await asyncio.wait_for(asyncio.gather(*watches), 10)

        assert _seen(by_local) == _seen(by_wire)
        assert [e.type for e in by_local] == ["ADDED", "DELETED", "ADDED", "MODIFIED"]
        assert all(e.shared for e in by_local) and not any(e.shared for e in by_wire)
        # equal to what the wire carried, kind and apiVersion included
        assert [e.object for e in by_local] == [e.object for e in by_wire]
        assert by_local[0].object["kind"] == "ConfigMap" and by_local[0].object["apiVersion"] == "v1"
    finally:
        await local.close()
        await wire.close()


async def test_leaving_an_in_process_watch_ends_the_servers_watch(server: APIServer) -> None:
    client = _client(server, server.in_process_watches)
    kind = server.kinds.resource("", "v1", "configmaps")
    assert kind is not None
    cache = server.registry.cache(kind)
    before = cache.watcher_count
    try:
        events = client.watch("configmaps", "default", shared=True)
        await client.create("configmaps", _config_map("c"), namespace="default")
        first = await asyncio.wait_for(anext(events), 10)
        assert first.shared and first.object is server.registry.get(kind, "default", "c").obj
        assert cache.watcher_count == before + 1
        await events.aclose()  # the informer stops
        for _ in range(100):
            if cache.watcher_count == before:
                break
            await asyncio.sleep(0.02)
        assert cache.watcher_count == before
        assert len(server.in_process_watches) == 0
    finally:
        await client.close()


async def test_a_hand_over_the_server_does_not_know_gets_the_events_over_the_connection(
    server: APIServer,
) -> None:
    # another process's rendezvous (or none the server shares): the server cannot claim the key
    client = _client(server, InProcessWatches())
    try:
        events = client.watch("configmaps", "default", shared=True)
        await client.create("configmaps", _config_map("d"), namespace="default")
        event = await asyncio.wait_for(anext(events), 10)
        assert (event.type, event.object["metadata"]["name"], event.shared) == ("ADDED", "d", False)
        await events.aclose()
    finally:
        await client.close()


async def test_a_read_only_informer_keeps_the_servers_objects_and_a_relist_survives(
    server: APIServer,
) -> None:
    client = _client(server, server.in_process_watches)
    informer = Informer(client, "configmaps", "default", read_only=True)
    try:
        await client.create("configmaps", _config_map("e"), namespace="default")
        await informer.start()
        await client.patch("configmaps", "e", {"data": {"k": "x"}}, namespace="default")
        kind = server.kinds.resource("", "v1", "configmaps")
        assert kind is not None
        for _ in range(100):
            if (informer.get("default", "e") or {}).get("data") == {"k": "x"}:
                break
            await asyncio.sleep(0.02)
        assert informer.get("default", "e") is server.registry.get(kind, "default", "e").obj
    finally:
        await informer.stop()
        await client.close()


async def test_a_client_too_far_behind_is_let_go() -> None:
    watch = InProcessWatch()
    closed: list[bool] = []
    watch.accept(lambda: closed.append(True), limit=2)
    assert watch.put("ADDED", {"a": 1}) and watch.put("MODIFIED", {"a": 2})
    assert not watch.put("MODIFIED", {"a": 3})  # the server then ends the watch; the client watches again
    watch.finish()
    assert await watch.next_batch() == [("ADDED", {"a": 1}), ("MODIFIED", {"a": 2}), None]
    watch.close()
    assert closed == [True] and not watch.put("ADDED", {"a": 4})


def test_a_stored_object_changed_in_place_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watchcache, "VERIFY_UNCHANGED", True)
    cache = ResourceCache(0, 10)

    def entry(revision: int) -> Entry:
        obj = {"kind": "ConfigMap", "metadata": {"name": "f", "resourceVersion": str(revision)}, "data": {}}
        return Entry(obj, encode(obj), revision)

    first = entry(1)
    cache.record("default/f", Event("ADDED", first))
    cache.record("default/f", Event("MODIFIED", entry(2), first))  # unchanged: fine
    second = cache.objects["default/f"]
    second.obj["data"]["k"] = "changed by a reader"
    with pytest.raises(RuntimeError, match="changed in place"):
        cache.record("default/f", Event("MODIFIED", entry(3), second))
