"""Wire details of the client: watch lines however the stream is chunked, and events named as client-go does."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from served import serve
from tenantgpu.kubeclient import KubeClient


def _line(kind: str, name: str, rv: int) -> bytes:
    obj = {"metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv)}}
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


@pytest.fixture
async def chunked_watch() -> AsyncIterator[KubeClient]:
    """A watch whose bytes arrive as two events in one write, one event over three writes, blank lines,
    and a last event without its newline."""
    a, b, c, d = (
        _line("ADDED", "a", 1),
        _line("MODIFIED", "b", 2),
        _line("MODIFIED", "c", 3),
        _line("DELETED", "d", 4),
    )
    writes = [a + b[:7], b[7:], b"\n", c[:5], c[5:20], c[20:] + b"  \n", d.rstrip(b"\n")]

    async def watch(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        for piece in writes:
            await resp.write(piece)
            await asyncio.sleep(0.01)  # separate TCP segments, so the client sees the chunks apart
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/api/v1/pods", watch)
    async for client in serve(app):
        yield client


async def test_watch_events_survive_any_chunking(chunked_watch: KubeClient) -> None:
    seen = [
        (e.type, e.object["metadata"]["name"], e.object["kind"]) async for e in chunked_watch.watch("pods")
    ]
    assert seen == [
        ("ADDED", "a", "Pod"),
        ("MODIFIED", "b", "Pod"),
        ("MODIFIED", "c", "Pod"),
        ("DELETED", "d", "Pod"),
    ]


@pytest.fixture
async def event_sink() -> AsyncIterator[tuple[KubeClient, list[dict]]]:
    received: list[dict] = []

    async def create(request: web.Request) -> web.Response:
        body = await request.json()
        received.append(body)
        return web.json_response(body, status=201)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/events", create)
    async for client in serve(app):
        yield client, received


async def test_events_are_named_like_client_go_and_never_collide(
    event_sink: tuple[KubeClient, list[dict]],
) -> None:
    client, received = event_sink
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "ns", "uid": "u1"}}
    for reason in ("FilteringSucceed", "Scheduled", "BindingSucceed"):
        await client.create_event(pod, reason=reason, message="m", component="hami-scheduler")
    names = [e["metadata"]["name"] for e in received]
    assert all(re.fullmatch(r"p\.[0-9a-f]{16}", n) for n in names), names  # <name>.<unix nanoseconds, hex>
    assert len(set(names)) == 3 and names == sorted(names, key=lambda n: int(n.split(".")[1], 16))
    first = received[0]
    assert first["metadata"]["namespace"] == "ns" and first["involvedObject"]["uid"] == "u1"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", first["firstTimestamp"])
    assert first["firstTimestamp"] == first["lastTimestamp"]


async def test_a_result_nobody_reads_is_not_decoded_but_errors_still_raise(
    event_sink: tuple[KubeClient, list[dict]],
) -> None:
    from tenantgpu.kubeclient import ApiError

    client, received = event_sink
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "ns", "uid": "u1"}}
    assert await client.create_event(pod, reason="Scheduled", message="m", decode=False) == {}
    assert received[-1]["reason"] == "Scheduled"  # sent all the same
    assert (await client.create_event(pod, reason="Again", message="m"))["reason"] == "Again"
    with pytest.raises(ApiError) as caught:
        await client.request("POST", "/api/v1/namespaces/ns/nothing-here", body={}, decode=False)
    assert caught.value.code == 404
