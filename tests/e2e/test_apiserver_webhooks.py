"""Admission webhooks called by the API server: url and service (through the egress hook) addressed."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import Iterator
from ssl import SSLContext
from typing import Any

import pytest
from aiohttp import web
from apiserver_harness import BackgroundLoop, RawClient, RunningAPIServer, start_server

from tenantgpu.apiserver.pki import CertificateAuthority
from tenantgpu.kubeclient.config import load_cert_chain

pytestmark = pytest.mark.slow  # real TLS webhook servers and timeouts


class FakeTunnel:
    """An egress that sends `<svc>.<ns>.svc:<port>` to the local webhook server, as the tunnel would."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.dialled: list[tuple[str, int]] = []

    async def open_connection(
        self, host: str, port: int, *, ssl: SSLContext | None = None, server_hostname: str | None = None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        self.dialled.append((host, port))
        # TLS still names the service, though the bytes go to the local server.
        return await asyncio.open_connection(
            "127.0.0.1", self.port, ssl=ssl, server_hostname=server_hostname or host if ssl else None
        )


class WebhookServer:
    """A TLS AdmissionReview endpoint: /mutate adds a label, /deny refuses labelled pods, /slow sleeps."""

    def __init__(self) -> None:
        self.ca = CertificateAuthority.create("webhook-ca")
        self.reviews: list[dict[str, Any]] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/mutate", self._mutate)
        app.router.add_post("/deny", self._deny)
        app.router.add_post("/slow", self._slow)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        cert, key = self.ca.issue_serving(["127.0.0.1", "hook.kube-system.svc"])
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        load_cert_chain(context, cert, key)
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _review(self, request: web.Request) -> dict[str, Any]:
        review = await request.json()
        self.reviews.append(review)
        return review

    def _answer(self, review: dict[str, Any], response: dict[str, Any]) -> web.Response:
        response["uid"] = review["request"]["uid"]
        return web.json_response(
            {"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response}
        )

    async def _mutate(self, request: web.Request) -> web.Response:
        review = await self._review(request)
        patch = [
            {"op": "add", "path": "/metadata/labels/mutated", "value": "yes"},
            {"op": "replace", "path": "/spec/schedulerName", "value": "hami-scheduler"},
        ]
        encoded = base64.b64encode(json.dumps(patch).encode()).decode()
        return self._answer(review, {"allowed": True, "patchType": "JSONPatch", "patch": encoded})

    async def _deny(self, request: web.Request) -> web.Response:
        review = await self._review(request)
        labels = review["request"]["object"]["metadata"].get("labels") or {}
        if labels.get("deny") == "yes":
            return self._answer(
                review, {"allowed": False, "status": {"code": 403, "message": "pods labelled deny"}}
            )
        return self._answer(review, {"allowed": True})

    async def _slow(self, request: web.Request) -> web.Response:
        review = await self._review(request)
        await asyncio.sleep(3)
        return self._answer(review, {"allowed": False})


@pytest.fixture(scope="module")
def hook(background_loop: BackgroundLoop) -> Iterator[WebhookServer]:
    server = WebhookServer()
    background_loop.run(server.start())
    yield server
    background_loop.run(server.stop())


@pytest.fixture(scope="module")
def tunnel(hook: WebhookServer) -> FakeTunnel:
    return FakeTunnel(hook.port)


@pytest.fixture(scope="module")
def tenant(
    background_loop: BackgroundLoop, tmp_path_factory: pytest.TempPathFactory, tunnel: FakeTunnel
) -> Iterator[RunningAPIServer]:
    running = start_server(background_loop, tmp_path_factory.mktemp("hooked"), "hooked", egress=tunnel)
    yield running
    background_loop.run(running.server.stop())


def _configuration(kind: str, name: str, webhook: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [webhook],
    }


def _webhook(name: str, client_config: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": client_config,
        "rules": [
            {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **extra,
    }


def _pod(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def test_service_webhook_is_dialled_through_the_egress_and_mutates(
    tenant: RunningAPIServer, hook: WebhookServer, tunnel: FakeTunnel
) -> None:
    raw = RawClient(tenant.kubeconfig)
    raw.request("POST", "/api/v1/namespaces", {"metadata": {"name": "gpu", "labels": {"hami": "on"}}})
    ca_bundle = base64.b64encode(hook.ca.cert_pem).decode()
    webhook = _webhook(
        "mutate.hami.io",
        {
            "service": {"name": "hook", "namespace": "kube-system", "path": "/mutate", "port": 443},
            "caBundle": ca_bundle,
        },
        namespaceSelector={"matchLabels": {"hami": "on"}},
        objectSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
    )
    created = raw.request(
        "POST",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        _configuration("MutatingWebhookConfiguration", "hami", webhook),
    )
    assert created.status == 201
    pod = raw.request("POST", "/api/v1/namespaces/gpu/pods", _pod("p1", "gpu")).json()
    assert pod["metadata"]["labels"]["mutated"] == "yes" and pod["spec"]["schedulerName"] == "hami-scheduler"
    assert tunnel.dialled[-1] == ("hook.kube-system.svc", 443)
    review = hook.reviews[-1]
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["request"]["operation"] == "CREATE"
    assert review["request"]["userInfo"]["groups"][0] == "system:masters"
    calls = len(hook.reviews)
    skipped = raw.request("POST", "/api/v1/namespaces/gpu/pods", _pod("p2", "gpu", skip="1")).json()
    elsewhere = raw.request("POST", "/api/v1/namespaces/default/pods", _pod("p3")).json()
    # (a pod without labels has no `labels` map at all: kube does not store an empty one)
    unmutated = [p["metadata"].get("labels", {}) for p in (skipped, elsewhere)]
    assert all("mutated" not in labels for labels in unmutated)
    assert len(hook.reviews) == calls

    # kube's store names a generateName create, gives it a uid and a creationTimestamp after the
    # mutating phase: a mutating webhook sees none of them (Store.Create, FillObjectMetaSystemFields).
    generated = _pod("", "gpu")
    generated["metadata"] = {"generateName": "web-", "namespace": "gpu", "labels": {"app": "web"}}
    made = raw.request("POST", "/api/v1/namespaces/gpu/pods", generated).json()
    seen = hook.reviews[-1]["request"]
    assert seen["name"] == "" and seen["namespace"] == "gpu"
    assert not {"name", "uid", "creationTimestamp"} & set(seen["object"]["metadata"])
    # and the status as sent (Go encodes the empty struct): the phase and QoS class come after admission
    assert seen["object"]["status"] == {}
    assert made["metadata"]["name"].startswith("web-") and len(made["metadata"]["name"]) == len("web-") + 5
    assert made["metadata"]["uid"] and made["metadata"]["creationTimestamp"]
    assert made["metadata"]["labels"]["mutated"] == "yes" and made["status"]["phase"] == "Pending"


def test_url_webhook_denies_with_its_message(tenant: RunningAPIServer, hook: WebhookServer) -> None:
    raw = RawClient(tenant.kubeconfig)
    webhook = _webhook(
        "deny.example.com",
        {
            "url": f"https://127.0.0.1:{hook.port}/deny",
            "caBundle": base64.b64encode(hook.ca.cert_pem).decode(),
        },
        admissionReviewVersions=["v1beta1"],
    )
    raw.request(
        "POST",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        _configuration("ValidatingWebhookConfiguration", "deny", webhook),
    )
    denied = raw.request("POST", "/api/v1/namespaces/default/pods", _pod("bad", deny="yes"))
    assert denied.status == 403
    assert (
        denied.json()["message"]
        == 'admission webhook "deny.example.com" denied the request: pods labelled deny'
    )
    assert hook.reviews[-1]["apiVersion"] == "admission.k8s.io/v1beta1"
    assert raw.request("POST", "/api/v1/namespaces/default/pods", _pod("good")).status == 201
    # The validating phase comes after the store has named the object.
    generated = _pod("")
    generated["metadata"] = {"generateName": "job-"}
    made = raw.request("POST", "/api/v1/namespaces/default/pods", generated).json()
    seen = hook.reviews[-1]["request"]
    assert seen["name"] == made["metadata"]["name"] == seen["object"]["metadata"]["name"]
    assert seen["object"]["metadata"]["uid"] == made["metadata"]["uid"]
    raw.request("DELETE", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/deny")


def test_failure_policy_decides_when_a_webhook_is_unreachable_or_slow(
    tenant: RunningAPIServer, hook: WebhookServer
) -> None:
    raw = RawClient(tenant.kubeconfig)
    path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    unreachable = {"url": "https://127.0.0.1:1/x"}
    raw.request(
        "POST",
        path,
        _configuration(
            "ValidatingWebhookConfiguration",
            "lenient",
            _webhook("a.example.io", unreachable, failurePolicy="Ignore"),
        ),
    )
    assert raw.request("POST", "/api/v1/namespaces/default/pods", _pod("lenient")).status == 201
    slow = {
        "url": f"https://127.0.0.1:{hook.port}/slow",
        "caBundle": base64.b64encode(hook.ca.cert_pem).decode(),
    }
    raw.request(
        "PUT",
        f"{path}/lenient",
        _configuration(
            "ValidatingWebhookConfiguration",
            "lenient",
            _webhook("a.example.io", slow, failurePolicy="Ignore", timeoutSeconds=1),
        ),
    )
    assert raw.request("POST", "/api/v1/namespaces/default/pods", _pod("patient")).status == 201
    raw.request(
        "POST",
        path,
        _configuration(
            "ValidatingWebhookConfiguration",
            "strict",
            _webhook("b.example.io", unreachable, failurePolicy="Fail"),
        ),
    )
    refused = raw.request("POST", "/api/v1/namespaces/default/pods", _pod("refused"))
    assert refused.status == 500 and 'failed calling webhook "b.example.io"' in refused.json()["message"]
    raw.request("DELETE", f"{path}/strict")
    raw.request("DELETE", f"{path}/lenient")
    assert raw.request("POST", "/api/v1/namespaces/default/pods", _pod("after")).status == 201
