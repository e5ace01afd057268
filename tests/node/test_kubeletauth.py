"""The kubelet's x509 authentication and webhook authorization (node/kubeletauth.py), as kube's kubelet
decides (pkg/kubelet/server/auth.go): who a certificate names, which `nodes` subresource a path is
authorised as, the 401 and 403 texts, and how long a SubjectAccessReview's answer is kept."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any

import pytest

from tenantgpu.kamaji import pki
from tenantgpu.kubeclient import ApiError
from tenantgpu.kubeclient.config import load_cert_chain
from tenantgpu.node.kubeletauth import (
    AUTHORIZED_TTL_SECONDS,
    UNAUTHORIZED_TTL_SECONDS,
    Caller,
    KubeletAuth,
    Verdict,
    caller_of,
    subresources_of,
)
from tenantgpu.node.release import KubeletRelease


def _peercert(ca: pki.KeyPair, client: pki.KeyPair | None) -> dict[str, Any] | None:
    """What the kubelet's TLS layer (`KubeletAuth.server_context`) makes of a client's certificate: a TLS
    handshake in memory, then the server side's `getpeercert()`."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving = pki.issue_serving_certificate(ca, "kubelet", ips=["127.0.0.1"], dns_names=[])
    load_cert_chain(server_ctx, serving.cert_pem, serving.key_pem)
    KubeletAuth("worker-1", ca.cert_pem, _Reviews(set())).server_context(server_ctx)
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.check_hostname, client_ctx.verify_mode = False, ssl.CERT_NONE
    if client is not None:
        load_cert_chain(client_ctx, client.cert_pem, client.key_pem)
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    server_in, server_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_ctx.wrap_bio(server_in, server_out, server_side=True)
    other = client_ctx.wrap_bio(to_client, to_server)
    for _ in range(10):
        for end in (other, server):
            with contextlib.suppress(ssl.SSLWantReadError):
                end.do_handshake()
        server_in.write(to_server.read())
        to_client.write(server_out.read())
    return server.getpeercert()


class _Reviews:
    """A SubjectAccessReview endpoint that allows what `allow` holds, and counts what it is asked."""

    def __init__(self, allow: set[tuple[str, str, str]], fail: bool = False) -> None:
        self.allow, self.fail = allow, fail
        self.asked: list[dict[str, Any]] = []

    async def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(body)
        if self.fail:
            raise ApiError({"code": 503, "reason": "ServiceUnavailable", "message": "down"})
        spec = body["spec"]
        attributes = spec["resourceAttributes"]
        return {"allowed": (spec["user"], attributes["verb"], attributes["subresource"]) in self.allow}


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


V131, V132, V133 = (KubeletRelease.parse(v) for v in ("v1.31.4", "v1.32.2", "v1.33.1"))


@pytest.mark.parametrize(
    ("path", "subresource"),
    [
        ("/containerLogs/default/p/c", "proxy"),
        ("/exec/default/p/c", "proxy"),
        ("/run/default/p/c", "proxy"),
        ("/stats/summary", "stats"),
        ("/metrics/cadvisor", "metrics"),
        ("/metrics", "metrics"),
        ("/logs/syslog", "log"),
        ("/spec/", "proxy"),  # `spec` is gone from the kubelet's list long before 1.27
        ("/checkpoint/default/p/c", "checkpoint"),
        ("/checkpointx", "proxy"),  # a subpath, not a prefix of the name
        ("/healthz", "proxy"),
        ("/pods", "proxy"),
    ],
)
def test_a_kubelet_path_is_authorised_as_the_nodes_subresource_kube_names(
    path: str, subresource: str
) -> None:
    assert subresources_of(path, V131) == subresources_of(path, V132) == (subresource,)


@pytest.mark.parametrize(
    ("path", "subresources"),
    [
        ("/pods", ("pods", "proxy")),
        ("/pods/", ("pods", "proxy")),
        ("/runningpods/", ("pods", "proxy")),
        ("/healthz", ("healthz", "proxy")),
        ("/healthz/ping", ("healthz", "proxy")),
        ("/configz", ("configz", "proxy")),
        ("/podsx", ("proxy",)),
        ("/stats/summary", ("stats",)),  # no fallback to `proxy` for the subdivided paths
        ("/metrics/resource", ("metrics",)),
        ("/containerLogs/default/p/c", ("proxy",)),
    ],
)
def test_kubelet_1_33_asks_the_fine_grained_subresource_first_and_then_proxy(
    path: str, subresources: tuple[str, ...]
) -> None:
    assert subresources_of(path, V133) == subresources


def test_the_certificate_names_the_user_its_organisations_the_groups_and_everyone_is_authenticated() -> None:
    ca = pki.generate_ca("tenant-ca")
    pair = pki.issue_client_certificate(ca, "kube-apiserver-kubelet-client", ("kubeadm:cluster-admins",))
    assert caller_of(_peercert(ca, pair)) == Caller(
        "kube-apiserver-kubelet-client", ("kubeadm:cluster-admins", "system:authenticated")
    )
    assert caller_of(_peercert(ca, None)) is None and caller_of(None) is None


def test_no_certificate_is_401_and_a_denial_names_user_verb_and_subresource_as_the_kubelet_does() -> None:
    ca = pki.generate_ca("tenant-ca")
    alice = _peercert(ca, pki.issue_client_certificate(ca, "alice"))
    reviews = _Reviews(allow={("alice", "get", "stats")})
    auth = KubeletAuth("worker-1", ca.cert_pem, reviews)

    async def run() -> list[Verdict]:
        return [
            await auth.check(None, "GET", "/containerLogs/default/p/c"),
            await auth.check(alice, "GET", "/containerLogs/default/p/c"),
            await auth.check(alice, "POST", "/exec/default/p/c"),
            await auth.check(alice, "GET", "/stats/summary"),
        ]

    anonymous, logs, exec_, stats = asyncio.run(run())
    assert anonymous == Verdict(401, "Unauthorized")
    assert logs == Verdict(403, "Forbidden (user=alice, verb=get, resource=nodes, subresource=proxy)")
    assert exec_ == Verdict(403, "Forbidden (user=alice, verb=create, resource=nodes, subresource=proxy)")
    assert stats == Verdict()
    # the anonymous request asked nothing; each review names this node's `nodes` subresource
    assert len(reviews.asked) == 3
    assert reviews.asked[0]["spec"] == {
        "user": "alice",
        "groups": ["system:authenticated"],
        "resourceAttributes": {
            "verb": "get",
            "version": "v1",
            "resource": "nodes",
            "subresource": "proxy",
            "name": "worker-1",
        },
    }


def test_answers_are_kept_five_minutes_when_allowed_and_thirty_seconds_when_denied() -> None:
    ca = pki.generate_ca("tenant-ca")
    bob = _peercert(ca, pki.issue_client_certificate(ca, "bob"))
    reviews = _Reviews(allow={("bob", "get", "proxy")})
    clock = _Clock()
    auth = KubeletAuth("worker-1", ca.cert_pem, reviews, clock=clock)

    async def check(method: str) -> Verdict:
        return await auth.check(bob, method, "/containerLogs/default/p/c")

    assert asyncio.run(check("GET")) == Verdict()
    assert asyncio.run(check("POST")).status == 403
    assert len(reviews.asked) == 2
    reviews.allow = {("bob", "create", "proxy")}  # RBAC changes; the kubelet goes on with what it kept

    clock.now += UNAUTHORIZED_TTL_SECONDS - 1
    assert asyncio.run(check("GET")) == Verdict() and asyncio.run(check("POST")).status == 403
    assert len(reviews.asked) == 2
    clock.now += 2  # the denial expired, the permission not yet
    assert asyncio.run(check("POST")) == Verdict() and asyncio.run(check("GET")) == Verdict()
    assert len(reviews.asked) == 3
    clock.now += AUTHORIZED_TTL_SECONDS
    assert asyncio.run(check("GET")).status == 403
    assert len(reviews.asked) == 4


def test_an_api_server_out_of_reach_denies_without_keeping_the_denial() -> None:
    ca = pki.generate_ca("tenant-ca")
    carol = _peercert(ca, pki.issue_client_certificate(ca, "carol"))
    reviews = _Reviews(allow={("carol", "get", "proxy")}, fail=True)
    auth = KubeletAuth("worker-1", ca.cert_pem, reviews)

    async def check() -> Verdict:
        return await auth.check(carol, "GET", "/containerLogs/default/p/c")

    assert asyncio.run(check()).status == 403
    reviews.fail = False
    assert asyncio.run(check()) == Verdict()
    assert len(reviews.asked) == 2


_DENIED_131 = "Forbidden (user=dave, verb=get, resource=nodes, subresource=proxy)"
_DENIED_132 = "Forbidden (user=dave, verb=get, resource=nodes, subresource(s)=[proxy])"
_DENIED_133 = "Forbidden (user=dave, verb=get, resource=nodes, subresource(s)=[pods proxy])"


@pytest.mark.parametrize(
    ("release", "allowed", "expected", "asked"),
    [
        # up to 1.31 one attribute and kube's single-subresource text
        (V131, set(), _DENIED_131, ["proxy"]),
        (V131, {("dave", "get", "pods")}, _DENIED_131, ["proxy"]),
        (V131, {("dave", "get", "proxy")}, None, ["proxy"]),
        # 1.32: the list's text, the gate still off
        (V132, set(), _DENIED_132, ["proxy"]),
        (V132, {("dave", "get", "pods")}, _DENIED_132, ["proxy"]),
        # 1.33: `nodes/pods` is enough and answers first; `nodes/proxy` still is enough
        (V133, set(), _DENIED_133, ["pods", "proxy"]),
        (V133, {("dave", "get", "pods")}, None, ["pods"]),
        (V133, {("dave", "get", "proxy")}, None, ["pods", "proxy"]),
        (V133, {("dave", "list", "pods")}, _DENIED_133, ["pods", "proxy"]),
    ],
)
def test_the_kubelets_release_decides_what_pods_needs_and_how_a_denial_reads(
    release: KubeletRelease, allowed: set[tuple[str, str, str]], expected: str | None, asked: list[str]
) -> None:
    ca = pki.generate_ca("tenant-ca")
    dave = _peercert(ca, pki.issue_client_certificate(ca, "dave"))
    reviews = _Reviews(allow=allowed)
    auth = KubeletAuth("worker-1", ca.cert_pem, reviews, release=lambda: release)
    verdict = asyncio.run(auth.check(dave, "GET", "/pods"))
    assert verdict == (Verdict() if expected is None else Verdict(403, expected))
    assert [body["spec"]["resourceAttributes"]["subresource"] for body in reviews.asked] == asked
