"""Releasing HAMi's node lock through the API, from a watched view of the Node that may lag behind."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from served import serve
from tenantgpu.hami.nodelock import NODE_LOCK, release_node_lock
from tenantgpu.kubeclient import KubeClient


class _Nodes:
    """GET and merge-PATCH of Nodes with resourceVersion preconditions, counting the GETs."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.gets = 0
        self.app = web.Application()
        self.app.router.add_get("/api/v1/nodes/{name}", self.get)
        self.app.router.add_patch("/api/v1/nodes/{name}", self.patch)

    def put(self, name: str, lock: str | None) -> dict[str, Any]:
        rv = int(self.nodes.get(name, {}).get("metadata", {}).get("resourceVersion", "0")) + 1
        notes = {} if lock is None else {NODE_LOCK: lock}
        self.nodes[name] = {"metadata": {"name": name, "resourceVersion": str(rv), "annotations": notes}}
        return self.nodes[name]

    async def get(self, request: web.Request) -> web.Response:
        self.gets += 1
        return web.json_response(self.nodes[request.match_info["name"]])

    async def patch(self, request: web.Request) -> web.Response:
        name, body = request.match_info["name"], await request.json()
        current = self.nodes[name]
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            status = {"kind": "Status", "code": 409, "reason": "Conflict", "message": "stale"}
            return web.json_response(status, status=409)
        lock = {**current["metadata"]["annotations"], **body["metadata"]["annotations"]}.get(NODE_LOCK)
        return web.json_response(self.put(name, lock))


@pytest.fixture
async def nodes() -> AsyncIterator[tuple[_Nodes, KubeClient]]:
    api = _Nodes()
    async for client in serve(api.app):
        yield api, client


LOCK = "2026-11-30T01:00:00Z,default,{}"


async def test_a_view_that_does_not_show_the_pods_lock_yet_still_releases_it(
    nodes: tuple[_Nodes, KubeClient],
) -> None:
    api, client = nodes
    stale_unlocked = dict(api.put("w", None))
    stale_previous = dict(api.put("w", LOCK.format("previous")))
    api.put("w", None)
    api.put("w", LOCK.format("new"))  # the lock the scheduler took for this pod, not yet watched
    for view in (stale_unlocked, stale_previous):
        assert await release_node_lock(client, "w", "default", "new", node=view)
        assert NODE_LOCK not in api.nodes["w"]["metadata"]["annotations"]
        api.put("w", LOCK.format("new"))


async def test_another_pods_lock_is_left_alone_and_a_free_node_costs_one_read(
    nodes: tuple[_Nodes, KubeClient],
) -> None:
    api, client = nodes
    view = dict(api.put("w", LOCK.format("other")))
    assert not await release_node_lock(client, "w", "default", "new", node=view)
    assert api.nodes["w"]["metadata"]["annotations"][NODE_LOCK] == LOCK.format("other")
    api.gets = 0
    free = dict(api.put("w", None))
    assert not await release_node_lock(client, "w", "default", "new", node=free)
    assert api.gets == 1
