"""Admission webhooks: match the webhook configurations, call them with AdmissionReview, apply the verdicts.

Webhooks addressed by `clientConfig.service` are dialled through the tenant's egress (the tunnel);
those addressed by `clientConfig.url` are dialled directly. HTTP/1.1 is spoken over whatever stream the
dialler returns, with TLS started on top, so a tunnel only has to carry bytes.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from tenantgpu import eventloop
from tenantgpu.apiserver import errors
from tenantgpu.apiserver.admission import AdmissionAttributes, AdmissionPlugin
from tenantgpu.apiserver.hooks import DirectEgress, Egress
from tenantgpu.apiserver.patch import PatchError, apply_json_patch
from tenantgpu.apiserver.selectors import match_selector_object

Obj = dict[str, Any]
ConfigurationSource = Callable[[bool], list[Obj]]
NamespaceLookup = Callable[[str], Obj | None]

_MAX_RESPONSE = 8 * 1024 * 1024


class WebhookCallError(Exception):
    """The webhook could not be called or answered nonsense; failurePolicy decides what follows."""


def _matches(patterns: list[str] | None, value: str) -> bool:
    return patterns is None or "*" in patterns or value in patterns


def _resource_matches(patterns: list[str] | None, resource: str, subresource: str) -> bool:
    if patterns is None:
        return False
    wanted = f"{resource}/{subresource}" if subresource else resource
    for pattern in patterns:
        if pattern == "*/*" or pattern == wanted:
            return True
        if pattern == "*" and not subresource:
            return True
        main, _, sub = pattern.partition("/")
        if subresource and sub and (main in ("*", resource)) and sub in ("*", subresource):
            return True
    return False


def rule_matches(rule: Obj, attributes: AdmissionAttributes) -> bool:
    """Whether one `RuleWithOperations` covers the request (operations, group, version, resource, scope)."""
    kind = attributes.kind
    operations = rule.get("operations") or []
    if "*" not in operations and attributes.operation not in operations:
        return False
    if not _matches(rule.get("apiGroups"), kind.group) or not _matches(rule.get("apiVersions"), kind.version):
        return False
    if not _resource_matches(rule.get("resources"), kind.plural, attributes.subresource):
        return False
    scope = rule.get("scope") or "*"
    if scope == "Cluster" and kind.namespaced:
        return False
    return not (scope == "Namespaced" and not kind.namespaced)


class _HTTPClient:
    """A small HTTP/1.1 POST over an egress stream with TLS on top."""

    def __init__(self) -> None:
        self._contexts: dict[str, ssl.SSLContext] = {}

    def context(self, ca_bundle: str) -> ssl.SSLContext:
        context = self._contexts.get(ca_bundle)
        if context is None:
            if ca_bundle:
                try:
                    pem = base64.b64decode(ca_bundle).decode()
                except ValueError as exc:
                    raise WebhookCallError(f"invalid caBundle: {exc}") from exc
                context = ssl.create_default_context(cadata=pem)
            else:
                context = ssl.create_default_context()
            self._contexts[ca_bundle] = context
        return context

    async def post(
        self, egress: Egress, host: str, port: int, path: str, body: bytes, ca_bundle: str
    ) -> tuple[int, bytes]:
        _, plain_writer = await egress.open_connection(host, port)
        try:
            reader, writer = await eventloop.start_tls(
                plain_writer, self.context(ca_bundle), host, _MAX_RESPONSE
            )
        except BaseException:
            plain_writer.close()
            raise
        try:
            head = (
                f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                f"Accept: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
            status_line = await reader.readline()
            parts = status_line.decode("latin-1").split()
            if len(parts) < 2 or not parts[1].isdigit():
                raise WebhookCallError(f"malformed HTTP response: {status_line[:80]!r}")
            headers: dict[str, str] = {}
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                key, _, value = line.decode("latin-1").partition(":")
                headers[key.strip().lower()] = value.strip()
            if headers.get("transfer-encoding", "").lower() == "chunked":
                chunks = []
                total = 0
                while True:
                    size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        break
                    total += size
                    if total > _MAX_RESPONSE:
                        raise WebhookCallError("webhook response too large")
                    chunks.append(await reader.readexactly(size))
                    await reader.readline()
                payload = b"".join(chunks)
            elif "content-length" in headers:
                length = int(headers["content-length"])
                if length > _MAX_RESPONSE:
                    raise WebhookCallError("webhook response too large")
                payload = await reader.readexactly(length)
            else:
                payload = await reader.read(_MAX_RESPONSE)
            return int(parts[1]), payload
        finally:
            writer.close()


class _WebhookPhase:
    """The mutating or the validating webhook plugin."""

    def __init__(self, owner: WebhookAdmission, mutating: bool) -> None:
        self._owner = owner
        self.mutating = mutating
        self.name = "MutatingAdmissionWebhook" if mutating else "ValidatingAdmissionWebhook"

    async def admit(self, attributes: AdmissionAttributes) -> None:
        await self._owner.run(attributes, self.mutating)


class WebhookAdmission:
    """Calls the webhooks registered in this API server's webhook configurations."""

    def __init__(
        self, configurations: ConfigurationSource, namespace: NamespaceLookup, egress: Egress
    ) -> None:
        self._configurations = configurations
        self._namespace = namespace
        self._egress = egress
        self._direct = DirectEgress()
        self._http = _HTTPClient()

    def plugins(self) -> list[AdmissionPlugin]:
        return [_WebhookPhase(self, True), _WebhookPhase(self, False)]

    async def close(self) -> None:
        return None

    def _selected(self, webhook: Obj, attributes: AdmissionAttributes) -> bool:
        if not any(rule_matches(rule, attributes) for rule in webhook.get("rules") or []):
            return False
        kind = attributes.kind
        namespace_selector = webhook.get("namespaceSelector")
        if namespace_selector and (kind.namespaced or kind.kind == "Namespace"):
            if kind.kind == "Namespace":
                source = attributes.obj or attributes.old or {}
                labels = (source.get("metadata") or {}).get("labels") or {}
            else:
                ns = self._namespace(attributes.namespace) or {}
                labels = (ns.get("metadata") or {}).get("labels") or {}
            if not match_selector_object(namespace_selector, labels):
                return False
        object_selector = webhook.get("objectSelector")
        if object_selector:
            candidates = [o for o in (attributes.obj, attributes.old) if o is not None]
            if not any(
                match_selector_object(object_selector, (o.get("metadata") or {}).get("labels") or {})
                for o in candidates
            ):
                return False
        return True

    async def run(self, attributes: AdmissionAttributes, mutating: bool) -> None:
        configurations = sorted(self._configurations(mutating), key=lambda c: c["metadata"]["name"])
        for configuration in configurations:
            for webhook in configuration.get("webhooks") or []:
                if not self._selected(webhook, attributes):
                    continue
                if attributes.dry_run and webhook.get("sideEffects") not in ("None", "NoneOnDryRun"):
                    raise errors.bad_request(
                        f'admission webhook "{webhook.get("name")}" does not support dry run'
                    )
                await self._call(webhook, attributes, mutating)

    def _review(self, webhook: Obj, attributes: AdmissionAttributes) -> tuple[Obj, str]:
        versions = webhook.get("admissionReviewVersions") or ["v1"]
        version = "v1" if "v1" in versions else "v1beta1"
        kind = attributes.kind
        gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
        gvr = {"group": kind.group, "version": kind.version, "resource": kind.plural}
        options_kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}.get(
            attributes.operation
        )
        request: Obj = {
            "uid": str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": attributes.name,
            "namespace": attributes.namespace,
            "operation": attributes.operation,
            "userInfo": attributes.user.as_dict(),
            "object": attributes.obj,
            "oldObject": attributes.old,
            "dryRun": attributes.dry_run,
            "options": {"kind": options_kind, "apiVersion": "meta.k8s.io/v1"} if options_kind else None,
        }
        if attributes.subresource:
            request["subResource"] = attributes.subresource
            request["requestSubResource"] = attributes.subresource
        review = {"kind": "AdmissionReview", "apiVersion": f"admission.k8s.io/{version}", "request": request}
        return review, request["uid"]

    async def _post(self, webhook: Obj, body: bytes) -> Obj:
        client = webhook.get("clientConfig") or {}
        ca_bundle = client.get("caBundle") or ""
        if client.get("url"):
            url = urlsplit(client["url"])
            if url.scheme != "https" or not url.hostname:
                raise WebhookCallError(f"webhook url must be https: {client['url']}")
            host, port = url.hostname, url.port or 443
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            egress: Egress = self._direct
        elif client.get("service"):
            service = client["service"]
            host = f"{service.get('name')}.{service.get('namespace')}.svc"
            port = int(service.get("port") or 443)
            path = service.get("path") or "/"
            egress = self._egress
        else:
            raise WebhookCallError("webhook clientConfig has neither url nor service")
        timeout = float(webhook.get("timeoutSeconds") or 10)
        try:
            status, payload = await asyncio.wait_for(
                self._http.post(egress, host, port, path, body, ca_bundle), timeout
            )
        except TimeoutError as exc:
            raise WebhookCallError(f"context deadline exceeded (timeout {timeout:g}s)") from exc
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, ValueError) as exc:
            raise WebhookCallError(f'Post "https://{host}:{port}{path}": {exc}') from exc
        if status != 200:
            raise WebhookCallError(f"received HTTP status {status} from webhook")
        try:
            review = json.loads(payload)
        except ValueError as exc:
            raise WebhookCallError(f"webhook returned invalid JSON: {exc}") from exc
        if not isinstance(review, dict) or not isinstance(review.get("response"), dict):
            raise WebhookCallError("webhook response has no response field")
        return review["response"]

    async def _call(self, webhook: Obj, attributes: AdmissionAttributes, mutating: bool) -> None:
        name = webhook.get("name", "")
        review, uid = self._review(webhook, attributes)
        try:
            response = await self._post(webhook, json.dumps(review).encode())
            if response.get("uid") not in (None, uid):
                raise WebhookCallError(f"expected response.uid={uid}, got {response.get('uid')}")
        except WebhookCallError as exc:
            if (webhook.get("failurePolicy") or "Fail") == "Ignore":
                return
            raise errors.internal(f'failed calling webhook "{name}": {exc}') from exc
        if not response.get("allowed"):
            result = dict(response.get("status") or {})
            code = int(result.get("code") or 400)
            code = max(code, 400)
            message = result.get("message") or result.get("reason") or ""
            denied = f'admission webhook "{name}" denied the request'
            raise errors.APIError(
                code,
                result.get("reason") or ("Forbidden" if code == 403 else "BadRequest"),
                f"{denied}: {message}" if message else f"{denied} without explanation",
                result.get("details"),
            )
        patch = response.get("patch")
        if patch and mutating and attributes.obj is not None:
            if response.get("patchType", "JSONPatch") != "JSONPatch":
                raise errors.internal(f'webhook "{name}" returned an unsupported patchType')
            try:
                ops = json.loads(base64.b64decode(patch))
                attributes.obj = apply_json_patch(attributes.obj, ops)
            except (ValueError, PatchError, KeyError, IndexError, TypeError) as exc:
                if (webhook.get("failurePolicy") or "Fail") == "Ignore":
                    return
                raise errors.internal(f'webhook "{name}" returned an invalid patch: {exc}') from exc
            attributes.mutated = True
