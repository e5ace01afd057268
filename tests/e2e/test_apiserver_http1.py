"""The API server's own HTTP/1.1 connections (`apiserver.http1`), spoken to byte by byte over TLS.

kubectl and the Python client exercise the common path everywhere else; these are the parts of
HTTP/1.1 they rarely send: pipelining, `Connection: close`, HTTP/1.0, HEAD, `Expect: 100-continue`,
chunked request bodies, garbage, a watch the client walks away from, and a connection that switches
protocols after serving a plain request.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import pytest
import uvloop
from apiserver_harness import BackgroundLoop, RawClient, RunningAPIServer, wait_for

from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.kinds import POD


@pytest.fixture(scope="module", params=["asyncio", "uvloop"])
def background_loop(request: pytest.FixtureRequest) -> Iterator[BackgroundLoop]:
    """The lab's processes run on uvloop, whose TLS transport differs from asyncio's: both are served."""
    loop = BackgroundLoop(uvloop.new_event_loop if request.param == "uvloop" else asyncio.new_event_loop)
    yield loop
    loop.close()


class Wire:
    """One TLS connection with the admin's client certificate; responses parsed by hand."""

    def __init__(self, apiserver: RunningAPIServer, *, receive_buffer: int | None = None) -> None:
        raw = RawClient(apiserver.kubeconfig)
        plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer is not None:
            plain.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        plain.settimeout(10)
        plain.connect((raw.host, raw.port))
        self.sock: ssl.SSLSocket = raw.context.wrap_socket(plain, server_hostname=raw.host)
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buffer += chunk
        return bool(chunk)

    def _take_until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            if not self._fill():
                raise EOFError(f"connection closed before {marker!r}; have {self.buffer[:200]!r}")
        head, _, self.buffer = self.buffer.partition(marker)
        return head

    def _take(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not self._fill():
                raise EOFError("connection closed inside a body")
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def response(self, *, head_only: bool = False) -> tuple[int, dict[str, str], bytes]:
        head = self._take_until(b"\r\n\r\n").decode()
        status_line, *lines = head.split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        status = int(status_line.split()[1])
        if head_only or status in (100, 101):
            return status, headers, b""
        if headers.get("transfer-encoding") == "chunked":
            return status, headers, b"".join(self.chunks())
        return status, headers, self._take(int(headers.get("content-length", "0")))

    def chunks(self) -> Iterator[bytes]:
        while True:
            size = int(self._take_until(b"\r\n"), 16)
            data = self._take(size)
            self._take(2)
            if size == 0:
                return
            yield data

    def closed_by_server(self) -> bool:
        try:
            return not self._fill()
        except (ConnectionResetError, ssl.SSLError):
            return True

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def wire(apiserver: RunningAPIServer) -> Iterator[Wire]:
    connection = Wire(apiserver)
    yield connection
    connection.close()


def _request(method: str, path: str, body: bytes = b"", extra: str = "", version: str = "1.1") -> bytes:
    head = f"{method} {path} HTTP/{version}\r\nHost: test\r\nAccept: application/json\r\n{extra}"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def _configmap(name: str) -> bytes:
    return json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}
    ).encode()


def test_pipelined_requests_are_answered_in_order_on_one_connection(wire: Wire) -> None:
    wire.send(
        _request("GET", "/version")
        + _request("POST", "/api/v1/namespaces/default/configmaps", _configmap("http1-pipelined"))
        + _request("GET", "/api/v1/namespaces/default/configmaps/http1-pipelined")
    )
    status, _, body = wire.response()
    assert status == 200 and "gitVersion" in json.loads(body)
    status, _, body = wire.response()
    assert status == 201 and json.loads(body)["metadata"]["name"] == "http1-pipelined"
    status, _, body = wire.response()
    assert status == 200 and json.loads(body)["data"] == {"k": "v"}


def test_connection_close_and_http10_end_the_connection_after_the_answer(apiserver: RunningAPIServer) -> None:
    for request in (
        _request("GET", "/version", extra="Connection: close\r\n"),
        _request("GET", "/version", version="1.0"),
    ):
        wire = Wire(apiserver)
        try:
            wire.send(request)
            status, headers, body = wire.response()
            assert status == 200 and json.loads(body)["gitVersion"]
            assert headers.get("connection") == "close"
            assert wire.closed_by_server()
        finally:
            wire.close()


def test_head_gets_the_headers_without_a_body(wire: Wire) -> None:
    wire.send(_request("HEAD", "/version") + _request("GET", "/version"))
    _, headers, _ = wire.response(head_only=True)  # (the API answers HEAD with a 405 Status)
    assert int(headers["content-length"]) > 0
    status, _, body = wire.response()  # the next answer starts right after the HEAD's headers
    assert status == 200 and json.loads(body)["gitVersion"]


def test_expect_100_continue_and_a_chunked_request_body(wire: Wire) -> None:
    body = _configmap("http1-chunked")
    half = len(body) // 2
    wire.send(
        b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: test\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
    )
    status, _, _ = wire.response()
    assert status == 100
    wire.send(b"%x\r\n%b\r\n%x\r\n%b\r\n0\r\n\r\n" % (half, body[:half], len(body) - half, body[half:]))
    status, _, answer = wire.response()
    assert status == 201 and json.loads(answer)["data"] == {"k": "v"}


def test_a_body_over_the_limit_gets_a_413_status_even_when_chunked(
    wire: Wire, apiserver: RunningAPIServer
) -> None:
    limit = apiserver.server.config.max_body_bytes
    padding = b"x" * (limit + 1024)
    body = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"k":"' + padding + b'"}}'
    wire.send(
        b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: test\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n%b\r\n0\r\n\r\n"
        % (len(body), body)
    )
    status, _, answer = wire.response()
    assert status == 413
    assert json.loads(answer)["reason"] == "RequestEntityTooLarge"
    wire.send(_request("GET", "/version"))  # the connection is still usable
    assert wire.response()[0] == 200


def test_garbage_gets_400_and_the_connection_is_closed(wire: Wire) -> None:
    wire.send(b"THIS IS NOT HTTP\r\n\r\n")
    status, _, body = wire.response()
    assert status == 400 and b"Bad Request" in body
    assert wire.closed_by_server()


def test_a_head_over_64_kib_gets_400_and_the_connection_is_closed(wire: Wire) -> None:
    wire.send(b"GET /version HTTP/1.1\r\nHost: test\r\nX-Padding: " + b"a" * (70 * 1024) + b"\r\n\r\n")
    status, _, body = wire.response()
    assert status == 400 and b"longer than 65536 bytes" in body
    assert wire.closed_by_server()


def _pod_watchers(apiserver: RunningAPIServer) -> int:
    kind = apiserver.server.kinds.resource("", "v1", "pods")
    assert kind is not None and kind.kind == POD.kind
    return int(apiserver.server.registry.cache(kind).watcher_count)


def test_a_watch_streams_chunks_and_ends_when_the_client_goes(apiserver: RunningAPIServer) -> None:
    before = _pod_watchers(apiserver)
    wire = Wire(apiserver)
    try:
        wire.send(_request("GET", "/api/v1/namespaces/default/pods?watch=true&resourceVersion=0"))
        status, headers, _ = wire.response(head_only=True)
        assert status == 200 and headers["transfer-encoding"] == "chunked"
        assert headers["content-type"] == "application/json"
        wait_for("the watch to be registered", lambda: _pod_watchers(apiserver) == before + 1)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "http1-watched"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        assert (
            RawClient(apiserver.kubeconfig).request("POST", "/api/v1/namespaces/default/pods", pod).status
            == 201
        )
        event: dict[str, Any] = {}
        for chunk in wire.chunks():
            for line in chunk.splitlines():
                event = json.loads(line)
                if event["object"]["metadata"]["name"] == "http1-watched":
                    break
            if event:
                break
        assert event["type"] == "ADDED"
    finally:
        wire.close()
    wait_for("the watch to end with its client", lambda: _pod_watchers(apiserver) == before)


def test_a_connection_switches_protocols_after_serving_a_plain_request(wire: Wire) -> None:
    """The upgrade goes to aiohttp with the request's bytes: its answer (here the pod does not exist)
    comes back on the same connection, after the plain answer."""
    wire.send(_request("GET", "/version"))
    assert wire.response()[0] == 200
    wire.send(
        b"POST /api/v1/namespaces/default/pods/nowhere/exec?command=true&stdout=true HTTP/1.1\r\n"
        b"Host: test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n"
    )
    status, _, body = wire.response()
    assert status == 404
    assert json.loads(body)["reason"] == "NotFound"


def test_many_sequential_requests_on_one_connection_keep_working(wire: Wire) -> None:
    for i in range(50):
        wire.send(_request("GET", f"/api/v1/namespaces/default/configmaps?limit={i + 1}"))
        status, _, body = wire.response()
        assert status == 200 and json.loads(body)["kind"] == "ConfigMapList"


def test_a_watch_whose_client_stops_reading_gets_every_event_in_order_when_it_reads_again(
    apiserver: RunningAPIServer,
) -> None:
    """Events go straight to a waiting watch's connection in the commit that recorded them, unless the
    connection paused writing (the client stopped reading): then they queue behind, in order."""
    raw = RawClient(apiserver.kubeconfig)
    wire = Wire(apiserver, receive_buffer=4096)  # fills up after a few events
    names = [f"paused-{i:03d}" for i in range(48)]
    try:
        wire.send(_request("GET", "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0"))
        status, _, _ = wire.response(head_only=True)
        assert status == 200
        filler = "x" * 262_144  # 48 events of 256 KiB: far beyond what the sockets buffer
        for name in names:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name},
                "data": {"f": filler},
            }
            assert raw.request("POST", "/api/v1/namespaces/default/configmaps", body).status == 201
        seen: list[tuple[str, int]] = []
        for chunk in wire.chunks():
            for line in chunk.splitlines():
                meta = json.loads(line)["object"]["metadata"]
                if meta["name"].startswith("paused-"):
                    seen.append((meta["name"], int(meta["resourceVersion"])))
            if len(seen) >= len(names):
                break
        assert [name for name, _ in seen] == names
        assert [rv for _, rv in seen] == sorted(rv for _, rv in seen)
    finally:
        wire.close()
        for name in names:
            raw.request("DELETE", f"/api/v1/namespaces/default/configmaps/{name}")


def test_the_events_of_one_commit_reach_a_watch_as_one_chunk(apiserver: RunningAPIServer) -> None:
    """Writes of one loop turn share a commit; a waiting watch gets that commit's events in one chunk,
    written once the commit has run, in revision order."""
    wire = Wire(apiserver)
    names = [f"one-commit-{i}" for i in range(3)]
    try:
        wire.send(_request("GET", "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0"))
        status, _, _ = wire.response(head_only=True)
        assert status == 200
        kind = apiserver.server.kinds.resource("", "v1", "configmaps")
        assert kind is not None
        wait_for(
            "the watch to be registered", lambda: apiserver.server.registry.cache(kind).watcher_count > 0
        )
        admin = UserInfo("admin", ("system:masters",))

        async def create_together() -> None:
            await asyncio.gather(
                *(
                    apiserver.server.registry.create(
                        kind,
                        "default",
                        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}},
                        admin,
                    )
                    for n in names
                )
            )

        apiserver.loop.run(create_together())
        chunk: bytes = b""
        for chunk in wire.chunks():
            if b"one-commit-" in chunk:
                break
        events = [json.loads(line) for line in chunk.splitlines()]
        assert [e["object"]["metadata"]["name"] for e in events] == names
        versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        assert versions == sorted(versions)
    finally:
        wire.close()
        for name in names:
            RawClient(apiserver.kubeconfig).request("DELETE", f"/api/v1/namespaces/default/configmaps/{name}")
