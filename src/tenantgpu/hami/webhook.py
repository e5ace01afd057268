"""HAMi's mutating webhook on the wire: AdmissionReview (v1beta1 and v1) in, JSONPatch or denial out."""

from __future__ import annotations

import base64
import copy
import logging
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from tenantgpu.gpushare import ClusterState, SharingConfig, mutate_pod
from tenantgpu.gpushare.quota import QuotaBook
from tenantgpu.hami.tls import ServingCert, service_hosts
from tenantgpu.kubeclient import Informer, KubeClient

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/webhook"
_REASONS = {400: "BadRequest", 403: "Forbidden"}


def review_response(
    review: dict[str, Any], cfg: SharingConfig, quotas: QuotaBook | None = None
) -> dict[str, Any]:
    """Answer one AdmissionReview with the same apiVersion it came in, as controller-runtime does."""
    api_version = review.get("apiVersion") or "admission.k8s.io/v1beta1"
    request = review.get("request") or {}
    response: dict[str, Any] = {"uid": request.get("uid", "")}
    pod = request.get("object")
    if (request.get("kind") or {}).get("kind", "Pod") != "Pod" or not isinstance(pod, dict):
        response.update(allowed=True)
        return {"apiVersion": api_version, "kind": "AdmissionReview", "response": response}
    if request.get("namespace") and not (pod.get("metadata") or {}).get("namespace"):
        # CREATE requests may carry the namespace only beside the object; quotas are per namespace.
        pod = copy.deepcopy(pod)
        pod.setdefault("metadata", {})["namespace"] = request["namespace"]
    admission = mutate_pod(pod, cfg, quotas)
    response["allowed"] = admission.allowed
    if not admission.allowed:
        code = admission.code if admission.code >= 400 else 403
        response["status"] = {
            "code": code,
            "reason": _REASONS.get(code, "Forbidden"),
            "message": admission.message or "",
        }
    elif admission.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(admission.patch)).decode()
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": response}


class HamiWebhook:
    """The webhook's HTTPS server; `start()` then read `port`; `ca_bundle` goes into the webhook config.

    `quotas` returns the namespace quota book — the scheduler's, as in HAMi where both run in one pod.
    Without it, a `client` lets the webhook keep its own book from ResourceQuota and Pod informers.
    """

    def __init__(
        self,
        sharing: SharingConfig | None = None,
        *,
        quotas: Callable[[], QuotaBook | None] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        cert: ServingCert | None = None,
        service: str = "hami-scheduler",
        namespace: str = "kube-system",
        client: KubeClient | None = None,
    ) -> None:
        self.sharing = sharing or SharingConfig()
        self.quotas = quotas
        self._informers: list[Informer] = []
        if quotas is None and client is not None:
            self._informers = self._own_quota_book(client)
        self.host = host
        self.port = port
        self.cert = cert or ServingCert.issue(service_hosts(service, namespace, [host, "localhost"]), service)
        self.reviews = 0
        self._runner: web.AppRunner | None = None
        app = web.Application()
        app.router.add_post(WEBHOOK_PATH, self._review)
        app.router.add_get("/healthz", self._ok)
        app.router.add_get("/readyz", self._ok)
        self.app = app

    @property
    def ca_bundle(self) -> bytes:
        return self.cert.ca_pem

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}{WEBHOOK_PATH}"

    def _own_quota_book(self, client: KubeClient) -> list[Informer]:
        state = ClusterState(self.sharing)  # pods' usage is charged to their namespace's quota here
        pods, quotas = Informer(client, "pods"), Informer(client, "resourcequotas")

        def on_pod(kind: str, pod: dict[str, Any], _: dict[str, Any] | None) -> None:
            meta = pod.get("metadata") or {}
            if kind == "DELETED":
                state.remove_pod(meta.get("namespace", ""), meta.get("name", ""))
            else:
                state.upsert_pod(pod)

        def on_quota(kind: str, quota: dict[str, Any], _: dict[str, Any] | None) -> None:
            meta = quota.get("metadata") or {}
            if kind == "DELETED":
                state.remove_quota(meta.get("namespace", ""), meta.get("name", ""))
            else:
                state.upsert_quota(quota)

        pods.add_handler(on_pod)
        quotas.add_handler(on_quota)
        self.quotas = lambda: state.quotas
        return [quotas, pods]

    async def start(self) -> None:
        for informer in self._informers:
            await informer.start()
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.cert.server_context())
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        for informer in self._informers:
            await informer.stop()

    async def _ok(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _review(self, request: web.Request) -> web.Response:
        try:
            review = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return web.Response(status=400, text="request body is not an AdmissionReview")
        if not isinstance(review, dict):
            return web.Response(status=400, text="request body is not an AdmissionReview")
        self.reviews += 1
        quotas = self.quotas() if self.quotas else None
        body = orjson.dumps(review_response(review, self.sharing, quotas))
        return web.Response(body=body, content_type="application/json")
