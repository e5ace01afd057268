"""HAMi's webhook server on the wire: HTTPS, reviews on kept-alive connections, and plain answers to
requests that are not reviews."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator

import aiohttp
import pytest

from tenantgpu.gpushare import SharingConfig
from tenantgpu.hami.webhook import MAX_REVIEW_BYTES, WEBHOOK_PATH, HamiWebhook


def _review(uid: str) -> dict:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": uid},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
        },
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"kind": "Pod"},
            "namespace": "team-a",
            "operation": "CREATE",
            "object": pod,
        },
    }


@pytest.fixture
async def webhook() -> AsyncIterator[HamiWebhook]:
    server = HamiWebhook(SharingConfig())
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def session(webhook: HamiWebhook) -> AsyncIterator[aiohttp.ClientSession]:
    tls = ssl.create_default_context(cadata=webhook.ca_bundle.decode())
    # one connection at most: the reviews below must share it
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls, limit=1)) as client:
        yield client


async def test_reviews_come_back_on_one_kept_alive_connection(
    webhook: HamiWebhook, session: aiohttp.ClientSession
) -> None:
    for uid in ("one", "two", "three"):
        async with session.post(webhook.url, json=_review(uid)) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"] == "application/json"
            answer = await resp.json()
        assert answer["kind"] == "AdmissionReview" and answer["apiVersion"] == "admission.k8s.io/v1"
        assert answer["response"]["uid"] == uid and answer["response"]["allowed"] is True
        assert answer["response"]["patchType"] == "JSONPatch"
    assert len(webhook._http.connections) == 1  # type: ignore[union-attr]
    assert webhook.reviews == 3


async def test_what_is_not_a_review_gets_a_plain_answer(
    webhook: HamiWebhook, session: aiohttp.ClientSession
) -> None:
    base = webhook.url.removesuffix(WEBHOOK_PATH)
    for path in ("/healthz", "/readyz"):
        async with session.get(base + path) as resp:
            assert (resp.status, await resp.text()) == (200, "ok")
    async with session.get(webhook.url) as resp:
        assert resp.status == 405 and resp.headers["Allow"] == "POST"
    async with session.post(base + "/elsewhere", data=b"{}") as resp:
        assert resp.status == 404
    for body in (b"not json", json.dumps(["a", "list"]).encode()):
        async with session.post(webhook.url, data=body) as resp:
            assert (resp.status, await resp.text()) == (400, "request body is not an AdmissionReview")
    async with session.post(webhook.url, data=b" " * (MAX_REVIEW_BYTES + 1)) as resp:
        assert resp.status == 413
    assert webhook.reviews == 0
    # the connection still serves reviews after all that
    async with session.post(webhook.url, json=_review("after")) as resp:
        assert resp.status == 200 and (await resp.json())["response"]["uid"] == "after"
