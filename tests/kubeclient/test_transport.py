"""The client's keep-alive HTTP/1.1 path: what it reads, what it retries, and how it fails."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from served import serve
from tenantgpu.kubeclient import ApiError, KubeClient, KubeConfig, transport


def _pod(name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "default"}}


@pytest.fixture
async def api() -> AsyncIterator[tuple[KubeClient, dict[str, object]]]:
    seen: dict[str, object] = {"in_flight": 0, "max_in_flight": 0, "queries": []}

    async def list_chunked(request: web.Request) -> web.StreamResponse:
        # Like kube-apiserver streaming a big list: chunked transfer encoding, no Content-Length.
        seen["queries"].append(dict(request.query))  # type: ignore[attr-defined]
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        body = json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "9"},
                           "items": [_pod(f"p{i}") for i in range(500)]}).encode()  # fmt: skip
        for at in range(0, len(body), 1000):
            await resp.write(body[at : at + 1000])
        await resp.write_eof()
        return resp

    async def slow(request: web.Request) -> web.Response:
        seen["in_flight"] = int(seen["in_flight"]) + 1  # type: ignore[call-overload]
        seen["max_in_flight"] = max(int(seen["max_in_flight"]), int(seen["in_flight"]))  # type: ignore[call-overload]
        await asyncio.sleep(float(request.query.get("sleep", "0.05")))
        seen["in_flight"] = int(seen["in_flight"]) - 1  # type: ignore[call-overload]
        return web.json_response(_pod(request.match_info["name"]))

    async def missing(request: web.Request) -> web.Response:
        status = {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404,
                  "message": 'pods "x" not found'}  # fmt: skip
        return web.json_response(status, status=404)

    app = web.Application()
    app.router.add_get("/prefix/api/v1/namespaces/default/pods", list_chunked)
    app.router.add_get("/prefix/api/v1/namespaces/default/pods/x", missing)
    app.router.add_get("/prefix/api/v1/namespaces/default/pods/{name}", slow)
    async for client in serve(app, "/prefix", pool_size=3):
        yield client, seen


async def test_a_chunked_list_is_read_whole_under_the_servers_path_prefix(api) -> None:  # type: ignore[no-untyped-def]
    client, _ = api
    listing = await client.list("pods", "default")
    assert [p["metadata"]["name"] for p in listing["items"]] == [f"p{i}" for i in range(500)]
    assert listing["items"][0]["kind"] == "Pod"


async def test_selectors_with_spaces_and_commas_reach_the_server_intact(api) -> None:  # type: ignore[no-untyped-def]
    client, seen = api
    await client.list(
        "pods", "default", label_selector="app in (a, b),tier!=x", field_selector="spec.nodeName=n-1"
    )
    assert seen["queries"][-1] == {
        "labelSelector": "app in (a, b),tier!=x",
        "fieldSelector": "spec.nodeName=n-1",
    }


async def test_requests_beyond_the_pool_size_wait_for_a_connection(api) -> None:  # type: ignore[no-untyped-def]
    client, seen = api
    pods = await asyncio.gather(*(client.get("pods", f"p{i}", "default") for i in range(10)))
    assert [p["metadata"]["name"] for p in pods] == [f"p{i}" for i in range(10)]
    assert seen["max_in_flight"] == 3  # pool_size


async def test_an_error_status_becomes_an_api_error(api) -> None:  # type: ignore[no-untyped-def]
    client, _ = api
    with pytest.raises(ApiError) as err:
        await client.get("pods", "x", "default")
    assert (err.value.code, err.value.reason) == (404, "NotFound")


async def test_after_a_timeout_the_next_request_gets_its_own_answer(api) -> None:  # type: ignore[no-untyped-def]
    client, _ = api
    with pytest.raises(TimeoutError):
        await client.request(
            "GET", "/api/v1/namespaces/default/pods/late", params={"sleep": "0.3"}, timeout=0.05
        )
    # The late answer is still to come on that connection: reusing it would hand it to the next request.
    answers = await asyncio.gather(*(client.get("pods", f"q{i}", "default") for i in range(6)))
    assert [a["metadata"]["name"] for a in answers] == [f"q{i}" for i in range(6)]


async def test_a_long_timeout_on_a_reused_connection_is_enforced_by_the_sweep(  # type: ignore[no-untyped-def]
    api, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, _ = api
    await client.get("pods", "warm", "default")  # an idle keep-alive connection to reuse
    monkeypatch.setattr(transport, "SWEEP_SECONDS", 0.05)  # timeouts from 0.1 s on go to the sweep
    started = asyncio.get_running_loop().time()
    with pytest.raises(TimeoutError):
        await client.request(
            "GET", "/api/v1/namespaces/default/pods/late", params={"sleep": "1.0"}, timeout=0.2
        )
    waited = asyncio.get_running_loop().time() - started
    assert 0.2 <= waited < 0.6  # the deadline, give or take one sweep, not the 1 s answer
    answers = await asyncio.gather(*(client.get("pods", f"s{i}", "default") for i in range(6)))
    assert [a["metadata"]["name"] for a in answers] == [f"s{i}" for i in range(6)]


async def test_after_a_cancelled_request_the_next_request_gets_its_own_answer(api) -> None:  # type: ignore[no-untyped-def]
    client, _ = api
    task = asyncio.create_task(
        client.request("GET", "/api/v1/namespaces/default/pods/c", params={"sleep": "0.2"})
    )
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    answers = await asyncio.gather(*(client.get("pods", f"r{i}", "default") for i in range(6)))
    assert [a["metadata"]["name"] for a in answers] == [f"r{i}" for i in range(6)]


async def test_an_unreachable_server_is_a_client_error_naming_it() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    client = KubeClient(KubeConfig(server=f"http://127.0.0.1:{port}"))
    try:
        with pytest.raises(aiohttp.ClientError, match=f"127.0.0.1:{port}"):
            await client.get("pods", "a", "default")
    finally:
        await client.close()


@pytest.fixture
async def dropping_server() -> AsyncIterator[tuple[KubeClient, list[int]]]:
    """Answers one request on each connection, then drops it when the next one arrives without
    answering: a keep-alive connection the server closed just as a request went out."""
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        await reader.readuntil(b"\r\n\r\n")
        body = json.dumps(_pod("ok")).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
        writer.write(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = KubeClient(KubeConfig(server=f"http://127.0.0.1:{port}"))
    try:
        yield client, connections
    finally:
        await client.close()
        server.close()


async def test_a_read_on_a_dropped_keep_alive_connection_is_sent_again(dropping_server) -> None:  # type: ignore[no-untyped-def]
    client, connections = dropping_server
    await client.get("pods", "a", "default")
    assert (await client.get("pods", "a", "default"))["metadata"]["name"] == "ok"
    assert len(connections) == 2


async def test_a_write_on_a_dropped_connection_is_not_sent_again_but_reported(dropping_server) -> None:  # type: ignore[no-untyped-def]
    client, connections = dropping_server
    await client.get("pods", "a", "default")
    # The server may have applied it: the caller must find out, not a second copy be sent.
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await client.create("pods", _pod("b"), "default")
    assert len(connections) == 1


def _event_line(i: int) -> bytes:
    obj = {
        "metadata": {"name": f"p{i}", "namespace": "default", "resourceVersion": str(i)},
        "pad": "x" * 2000,
    }
    return json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n"


@pytest.fixture
async def watches() -> AsyncIterator[KubeClient]:
    async def flood(request: web.Request) -> web.StreamResponse:
        # 20,000 events of 2 kB as fast as the server can write them: more than the reader buffers.
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        for start in range(0, 20_000, 500):
            await resp.write(b"".join(_event_line(i) for i in range(start, start + 500)))
        await resp.write_eof()
        return resp

    async def cut(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(_event_line(1))
        await asyncio.sleep(0.05)
        assert request.transport is not None
        request.transport.close()  # gone without the last chunk
        return resp

    async def gone(request: web.Request) -> web.Response:
        status = {"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410,
                  "message": "too old resource version: 1 (500)"}  # fmt: skip
        return web.json_response(status, status=410)

    async def endless(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        await resp.write(_event_line(1))
        await asyncio.sleep(30)
        return resp

    app = web.Application()
    app.router.add_get("/api/v1/pods", flood)
    app.router.add_get("/api/v1/nodes", cut)
    app.router.add_get("/api/v1/namespaces/default/pods", gone)
    app.router.add_get("/api/v1/namespaces/default/configmaps", endless)
    async for client in serve(app):
        yield client


async def test_a_watch_faster_than_its_reader_loses_nothing_and_keeps_order(watches: KubeClient) -> None:
    names = []
    async for event in watches.watch("pods"):
        names.append(event.object["metadata"]["name"])
        if len(names) % 1000 == 0:
            await asyncio.sleep(0.01)  # a slow reader: the connection pauses reading meanwhile
    assert names == [f"p{i}" for i in range(20_000)]


async def test_a_watch_cut_off_mid_stream_is_an_error_not_an_end(watches: KubeClient) -> None:
    seen = []
    with pytest.raises(aiohttp.ClientError):
        async for event in watches.watch("nodes"):
            seen.append(event.object["metadata"]["name"])
    assert seen == ["p1"]


async def test_a_watch_refused_with_410_is_an_api_error_to_relist_on(watches: KubeClient) -> None:
    with pytest.raises(ApiError) as err:
        async for _ in watches.watch("pods", "default", resource_version="1"):
            pass
    assert (err.value.code, err.value.reason) == (410, "Expired")


async def test_closing_the_client_ends_its_open_watches(watches: KubeClient) -> None:
    seen = []

    async def follow() -> None:
        async for event in watches.watch("configmaps", "default"):
            seen.append(event.object["metadata"]["name"])

    task = asyncio.create_task(follow())
    while not seen:
        await asyncio.sleep(0.01)
    await watches.close()
    with pytest.raises(aiohttp.ClientError):
        await asyncio.wait_for(task, 5)
