"""kube-controller-manager's bootstrapsigner and tokencleaner (kube 1.33's pkg/controller/bootstrap): the
detached JWS a joining node verifies, which tokens sign `kube-public/cluster-info`, when the ConfigMap is
written, and when the cleaner deletes an expired token Secret."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

from tenantgpu.controlplane.bootstrapsigner import (
    BootstrapSigner,
    detached_signature,
    signed_data,
    signing_token,
)
from tenantgpu.controlplane.tokencleaner import TokenCleaner
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

Obj = dict[str, Any]
NOW = 1_772_366_400.0  # 2026-03-01T12:00:00Z
KUBECONFIG = (
    "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://10.0.0.1:6443\n  name: ''\n"
)


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _secret(
    token_id: str = "abcdef", token_secret: str = "0123456789abcdef", *, uid: str = "u-1", **data: str
) -> Obj:
    values = {"token-id": token_id, "token-secret": token_secret, "usage-bootstrap-signing": "true"}
    values.update({key.replace("_", "-"): value for key, value in data.items()})
    return {
        "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system", "uid": uid},
        "type": "bootstrap.kubernetes.io/token",
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in values.items() if value},
    }


def test_the_signature_is_an_hs256_jws_with_its_payload_left_out() -> None:
    signature = detached_signature(KUBECONFIG, "abcdef", b"0123456789abcdef")
    header, payload, mac = signature.split(".")
    assert payload == ""
    # the header's exact bytes: a verifier recomputes the whole string and compares
    assert _unb64url(header) == b'{"alg":"HS256","kid":"abcdef"}'
    # RFC 7515: the MAC covers base64url(header) "." base64url(payload), without padding
    content = base64.urlsafe_b64encode(KUBECONFIG.encode()).rstrip(b"=")
    expected = hmac.new(b"0123456789abcdef", header.encode() + b"." + content, hashlib.sha256).digest()
    assert _unb64url(mac) == expected and "=" not in mac
    assert detached_signature(KUBECONFIG, "abcdef", b"0123456789abcdee") != signature
    assert detached_signature(KUBECONFIG + " ", "abcdef", b"0123456789abcdef") != signature


def test_which_token_secrets_may_sign() -> None:
    assert signing_token(_secret(), NOW) == ("abcdef", b"0123456789abcdef")
    assert signing_token(_secret(expiration="2026-03-01T12:00:01Z"), NOW) is not None
    refused = {
        "no signing usage": _secret(usage_bootstrap_signing=""),
        "usage not exactly true": _secret(usage_bootstrap_signing="yes"),
        "expired": _secret(expiration="2026-03-01T12:00:00Z"),
        "unreadable expiration": _secret(expiration="later"),
        "no token-secret": _secret(token_secret=""),
        "no token-id": {**_secret(), "data": {k: v for k, v in _secret()["data"].items() if k != "token-id"}},
        "token-id not its name's": {**_secret(), "metadata": {"name": "bootstrap-token-ghijkl"}},
        "a name of another form": {**_secret(), "metadata": {"name": "bootstrap-token-ABCDEF"}},
    }
    for what, secret in refused.items():
        assert signing_token(secret, NOW) is None, what
    # unlike the authenticator, signing reads the secret's value as it is, of any form
    assert signing_token(_secret(token_secret="Not A Token Secret"), NOW) == ("abcdef", b"Not A Token Secret")


def test_the_data_gets_one_signature_per_signing_token_and_loses_the_others() -> None:
    tokens = {"abcdef": b"0123456789abcdef", "ghijkl": b"ghijklmnopqrstuv"}
    first = signed_data({"kubeconfig": KUBECONFIG, "other": "kept"}, tokens)
    assert first is not None
    assert list(first) == ["jws-kubeconfig-abcdef", "jws-kubeconfig-ghijkl", "kubeconfig", "other"]
    assert first["jws-kubeconfig-ghijkl"] == detached_signature(KUBECONFIG, "ghijkl", b"ghijklmnopqrstuv")
    assert signed_data(first, tokens) is None, "nothing to write when every signature is right"
    fewer = signed_data(first, {"abcdef": b"0123456789abcdef"})
    assert fewer is not None and "jws-kubeconfig-ghijkl" not in fewer and fewer["other"] == "kept"
    assert signed_data({**first, "jws-kubeconfig-abcdef": "forged"}, tokens) == first
    assert signed_data(
        {"kubeconfig": "changed", **{k: v for k, v in first.items() if k != "kubeconfig"}}, tokens
    )
    assert signed_data({"other": "no kubeconfig"}, tokens) is None
    assert signed_data({"kubeconfig": KUBECONFIG}, {}) is None


class _Informer:
    """An informer's cache and handlers, filled by the test."""

    def __init__(self, *objects: Obj) -> None:
        self.cache = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects}
        self.handlers: list[Callable[[str, Obj, Obj | None], Any]] = []

    def add_handler(self, handler: Callable[[str, Obj, Obj | None], Any]) -> None:
        self.handlers.append(handler)

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def get(self, namespace: str | None, name: str) -> Obj | None:
        return self.cache.get((namespace or "", name))

    def items(self) -> list[Obj]:
        return list(self.cache.values())

    def put(self, obj: Obj) -> None:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        event = "MODIFIED" if key in self.cache else "ADDED"
        old, self.cache[key] = self.cache.get(key), obj
        for handler in self.handlers:
            handler(event, obj, old)

    def remove(self, obj: Obj) -> None:
        self.cache.pop((obj["metadata"]["namespace"], obj["metadata"]["name"]))
        for handler in self.handlers:
            handler("DELETED", obj, obj)


class _Client:
    """Records writes; `answer` may raise an ApiError for one."""

    def __init__(self, answer: Callable[[], Awaitable[None]] | None = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.answer = answer

    async def update(self, resource: str, body: Obj) -> Obj:
        self.calls.append(("update", body))
        if self.answer is not None:
            await self.answer()
        return body

    async def delete(
        self, resource: str, name: str, namespace: str | None = None, *, uid: str | None = None
    ) -> Obj:
        self.calls.append(("delete", (namespace, name, uid)))
        if self.answer is not None:
            await self.answer()
        return {}


def _api_error(code: int, reason: str) -> Callable[[], Awaitable[None]]:
    async def fail() -> None:
        raise ApiError({"code": code, "reason": reason, "message": reason})

    return fail


def _cluster_info(**data: str) -> Obj:
    return {
        "metadata": {"name": "cluster-info", "namespace": "kube-public", "resourceVersion": "7"},
        "data": {"kubeconfig": KUBECONFIG, **data},
    }


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def _signer(client: _Client, secrets: _Informer, config_maps: _Informer) -> BootstrapSigner:
    return BootstrapSigner(
        cast(KubeClient, client),
        secrets=cast(Informer, secrets),
        config_maps=cast(Informer, config_maps),
        clock=lambda: NOW,
    )


async def test_the_signer_writes_cluster_info_when_tokens_come_and_go() -> None:
    client, secrets, config_maps = _Client(), _Informer(_secret()), _Informer()
    signer = _signer(client, secrets, config_maps)
    await signer.start()
    try:
        await _settle()
        assert client.calls == [], "no cluster-info: nothing is written"
        config_maps.put(_cluster_info())
        await _settle()
        ((verb, body),) = client.calls
        assert verb == "update" and body["metadata"]["resourceVersion"] == "7"
        assert body["data"]["jws-kubeconfig-abcdef"] == detached_signature(
            KUBECONFIG, "abcdef", b"0123456789abcdef"
        )

        config_maps.put(body)  # the write's own event: every signature is right, no second write
        await _settle()
        assert len(client.calls) == 1

        secrets.remove(_secret())
        await _settle()
        assert client.calls[-1][1]["data"] == {"kubeconfig": KUBECONFIG}
    finally:
        await signer.stop()


async def test_the_signer_does_not_retry_a_refused_write() -> None:
    client, secrets = _Client(_api_error(403, "Forbidden")), _Informer(_secret())
    signer = _signer(client, secrets, _Informer(_cluster_info()))
    await signer.start()
    try:
        await asyncio.sleep(1.2)  # longer than the work queue's retry after a refusal
        assert len(client.calls) == 1
    finally:
        await signer.stop()


def _cleaner(client: _Client, secrets: _Informer, clock: Callable[[], float]) -> TokenCleaner:
    return TokenCleaner(cast(KubeClient, client), secrets=cast(Informer, secrets), clock=clock)


def _rfc3339(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + f".{int(moment % 1 * 1e6):06d}Z"


async def test_the_cleaner_deletes_an_expired_token_with_its_uid_as_precondition() -> None:
    client = _Client()
    secrets = _Informer(
        _secret("aaaaaa", expiration="2026-03-01T11:00:00Z", uid="u-a"),
        _secret("bbbbbb", expiration="whenever", uid="u-b"),
        _secret("cccccc"),  # no expiration: kept
        {**_secret("dddddd", expiration="2026-03-01T11:00:00Z"), "type": "Opaque"},
    )
    cleaner = _cleaner(client, secrets, lambda: NOW)
    await cleaner.start()
    try:
        await _settle()
        assert sorted(client.calls) == [
            ("delete", ("kube-system", "bootstrap-token-aaaaaa", "u-a")),
            ("delete", ("kube-system", "bootstrap-token-bbbbbb", "u-b")),
        ]
    finally:
        await cleaner.stop()


async def test_the_cleaner_comes_back_when_a_token_expires() -> None:
    client = _Client()
    secrets = _Informer(_secret(expiration=_rfc3339(time.time() + 0.4)))
    cleaner = _cleaner(client, secrets, time.time)
    await cleaner.start()
    try:
        await asyncio.sleep(0.2)
        assert client.calls == []
        started = time.monotonic()
        while not client.calls and time.monotonic() - started < 2:
            await asyncio.sleep(0.01)
        assert client.calls == [("delete", ("kube-system", "bootstrap-token-abcdef", "u-1"))]
        # an update that pushes the expiration back is looked at again then, not before
        client.calls.clear()
        secrets.put(_secret(expiration=_rfc3339(time.time() + 0.5)))
        await asyncio.sleep(0.3)
        assert client.calls == []
        await asyncio.sleep(0.5)
        assert len(client.calls) == 1
    finally:
        await cleaner.stop()


@pytest.mark.parametrize(("code", "reason"), [(404, "NotFound"), (409, "Conflict"), (403, "Forbidden")])
async def test_a_failed_deletion_is_not_retried(code: int, reason: str) -> None:
    client = _Client(_api_error(code, reason))
    cleaner = _cleaner(client, _Informer(_secret(expiration="2026-03-01T11:00:00Z")), lambda: NOW)
    await cleaner.start()
    try:
        await asyncio.sleep(1.2)  # longer than the work queue's retry after a refusal
        assert len(client.calls) == 1
    finally:
        await cleaner.stop()
