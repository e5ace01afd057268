"""A tiny in-memory API server for the client's HTTP-level tests: pods only, list/watch/CRUD/merge patch."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    return web.json_response(body, status=code)


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


class FakeApi:
    """Stores pods; every write bumps a global resourceVersion and is fanned out to open watches."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.rv = 100
        self.history: list[tuple[int, str, dict[str, Any]]] = []
        self.watchers: list[asyncio.Queue[tuple[str, dict[str, Any]] | None]] = []
        self.oldest_watchable = 0  # watches from a resourceVersion below this get 410 Gone
        self.requests: list[tuple[str, str, str | None]] = []
        self.bindings: list[dict[str, Any]] = []
        self.app = web.Application()
        ns = "/api/v1/namespaces/{ns}/pods"
        self.app.router.add_get("/api/v1/pods", self.list_or_watch)
        self.app.router.add_get(ns, self.list_or_watch)
        self.app.router.add_post(ns, self.create)
        self.app.router.add_get(ns + "/{name}", self.get)
        self.app.router.add_patch(ns + "/{name}", self.patch)
        self.app.router.add_delete(ns + "/{name}", self.delete)
        self.app.router.add_post(ns + "/{name}/binding", self.bind)

    def _write(self, kind: str, obj: dict[str, Any]) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, kind, json.loads(json.dumps(obj))))
        for q in self.watchers:
            q.put_nowait((kind, obj))

    async def list_or_watch(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(("GET", request.path, request.query.get("resourceVersion")))
        ns = request.match_info.get("ns")
        if request.query.get("watch") in ("1", "true"):
            return await self._watch(request, ns)
        items = [p for (pns, _), p in sorted(self.pods.items()) if ns in (None, pns)]
        return web.json_response(
            {
                "kind": "PodList",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self.rv)},
                "items": items,
            }
        )

    async def _watch(self, request: web.Request, ns: str | None) -> web.StreamResponse:
        since = int(request.query.get("resourceVersion") or self.rv)
        resp = web.StreamResponse()
        resp.content_type = "application/json"
        await resp.prepare(request)
        if since < self.oldest_watchable:
            gone = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "code": 410,
                "reason": "Expired",
                "message": "too old resource version",
            }
            await resp.write(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
            return resp
        q: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
        for rv, kind, obj in self.history:
            if rv > since:
                q.put_nowait((kind, obj))
        self.watchers.append(q)
        try:
            while (item := await q.get()) is not None:
                kind, obj = item
                if ns in (None, obj["metadata"]["namespace"]):
                    await resp.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
        finally:
            self.watchers.remove(q)
        return resp

    def close_watches(self) -> None:
        for q in self.watchers:
            q.put_nowait(None)

    async def create(self, request: web.Request) -> web.Response:
        body = await request.json()
        ns = request.match_info["ns"]
        name = body["metadata"]["name"]
        if (ns, name) in self.pods:
            return _status(409, "AlreadyExists", f'pods "{name}" already exists')
        body["metadata"]["namespace"] = ns
        body["metadata"].setdefault("uid", f"uid-{name}")
        self.pods[(ns, name)] = body
        self._write("ADDED", body)
        return web.json_response(body, status=201)

    async def get(self, request: web.Request) -> web.Response:
        key = (request.match_info["ns"], request.match_info["name"])
        if key not in self.pods:
            return _status(404, "NotFound", f'pods "{key[1]}" not found')
        return web.json_response(self.pods[key])

    async def patch(self, request: web.Request) -> web.Response:
        key = (request.match_info["ns"], request.match_info["name"])
        self.requests.append(("PATCH", request.path, request.content_type))
        if key not in self.pods:
            return _status(404, "NotFound", f'pods "{key[1]}" not found')
        if request.content_type != "application/merge-patch+json":
            return _status(415, "UnsupportedMediaType", request.content_type)
        patch = await request.json()
        want_rv = (patch.get("metadata") or {}).get("resourceVersion")
        if want_rv and want_rv != self.pods[key]["metadata"]["resourceVersion"]:
            return _status(409, "Conflict", "the object has been modified")
        self.pods[key] = _merge(self.pods[key], patch)
        self._write("MODIFIED", self.pods[key])
        return web.json_response(self.pods[key])

    async def delete(self, request: web.Request) -> web.Response:
        key = (request.match_info["ns"], request.match_info["name"])
        if key not in self.pods:
            return _status(404, "NotFound", f'pods "{key[1]}" not found')
        obj = self.pods.pop(key)
        self._write("DELETED", obj)
        return web.json_response(obj)

    async def bind(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bindings.append(body)
        key = (request.match_info["ns"], request.match_info["name"])
        self.pods[key]["spec"]["nodeName"] = body["target"]["name"]
        self._write("MODIFIED", self.pods[key])
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)
