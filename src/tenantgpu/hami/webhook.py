"""HAMi's mutating webhook on the wire: AdmissionReview (v1beta1 and v1) in, JSONPatch or denial out."""

from __future__ import annotations

import base64
import copy
import logging
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from tenantgpu.apiserver.http1 import HTTPServer
from tenantgpu.gpushare import ClusterState, SharingConfig, mutate_pod
from tenantgpu.gpushare.quota import QuotaBook
from tenantgpu.hami.tls import ServingCert, service_hosts
from tenantgpu.klog import ComponentLog
from tenantgpu.kubeclient import Informer, KubeClient

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/webhook"
# An AdmissionReview carries one object, which the API server limits to 3 MiB.
MAX_REVIEW_BYTES = 3 * 1024 * 1024
_HEALTH_PATHS = ("/healthz", "/readyz")
_REASONS = {400: "BadRequest", 403: "Forbidden"}
# HAMi's webhook names the pod in each line it logs (webhook.go)
_TEMPLATE = "Processing admission hook for pod {}/{}, UID: {}"
# A denial's message → the severity, source line and tail of the line HAMi logs for it
_DENIAL_LINES = {
    "pod has no containers": ("W", "webhook.go:61", " - Denying admission as pod has no containers"),
    "pod has node assigned": ("I", "webhook.go:110", " - Pod already has node assigned"),
    "exceeding resource quota": ("I", "webhook.go:187", " - Denying admission"),
}


def log_denial(klog: ComponentLog, pod: dict[str, Any], message: str, code: int) -> None:
    """The line HAMi's webhook logs when it refuses a pod (at its default verbosity, only refusals)."""
    meta = pod.get("metadata") or {}
    who = _TEMPLATE.format(meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""))
    if code == 500:  # a device's MutateAdmission failed
        klog.errorf("webhook.go:80", f"validating pod failed:{message}")
        return
    severity, source, tail = _DENIAL_LINES.get(message, ("W", "webhook.go:100", ""))
    if not tail:  # "container NAME is privileged"
        tail = f" - Denying admission as {message}"
    entry = klog.warningf if severity == "W" else klog.infof
    entry(source, who + tail)


def review_response(
    review: dict[str, Any],
    cfg: SharingConfig,
    quotas: QuotaBook | None = None,
    klog: ComponentLog | None = None,
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
        if klog is not None:
            log_denial(klog, pod, admission.message or "", code)
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
        klog: ComponentLog | None = None,
    ) -> None:
        self.sharing = sharing or SharingConfig()
        # HAMi's webhook runs in the scheduler's container and logs to it
        self.klog = klog or ComponentLog()
        self.quotas = quotas
        self._informers: list[Informer] = []
        if quotas is None and client is not None:
            self._informers = self._own_quota_book(client)
        self.host = host
        self.port = port
        self.cert = cert or ServingCert.issue(service_hosts(service, namespace, [host, "localhost"]), service)
        self.reviews = 0
        self._http: HTTPServer | None = None

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
        # The API servers' own HTTP/1.1 server: a review costs the worker about a sixth less CPU than on
        # aiohttp's web server (bench/webhook). A request to switch protocols, which no API server
        # sends, goes to aiohttp.
        fallback = web.Server(self._handle, access_log=None)  # type: ignore[arg-type]
        self._http = HTTPServer(self._handle, fallback, MAX_REVIEW_BYTES)
        self.port = await self._http.listen(self.host, self.port, self.cert.server_context())

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None
        for informer in self._informers:
            await informer.stop()

    async def _handle(self, request: Any) -> web.Response:
        if request.path == WEBHOOK_PATH:
            if request.method != "POST":
                return web.Response(status=405, text="405: Method Not Allowed", headers={"Allow": "POST"})
            try:
                return await self._review(request)
            except web.HTTPRequestEntityTooLarge as err:
                return web.Response(status=err.status, text=err.text)
        if request.path in _HEALTH_PATHS:
            if request.method not in ("GET", "HEAD"):
                return web.Response(
                    status=405, text="405: Method Not Allowed", headers={"Allow": "GET, HEAD"}
                )
            return web.Response(text="ok")
        return web.Response(status=404, text="404: Not Found")

    async def _review(self, request: Any) -> web.Response:
        try:
            review = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return web.Response(status=400, text="request body is not an AdmissionReview")
        if not isinstance(review, dict):
            return web.Response(status=400, text="request body is not an AdmissionReview")
        self.reviews += 1
        quotas = self.quotas() if self.quotas else None
        body = orjson.dumps(review_response(review, self.sharing, quotas, self.klog))
        return web.Response(body=body, content_type="application/json")
