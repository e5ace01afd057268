"""Admission webhooks: match the webhook configurations, call them with AdmissionReview, apply the verdicts.

Webhooks addressed by `clientConfig.service` are dialled through the tenant's egress (the tunnel);
those addressed by `clientConfig.url` are dialled directly. HTTP/1.1 is spoken over whatever stream the
dialler returns, with TLS started on top, so a tunnel only has to carry bytes; connections are kept
alive between calls to the same webhook, as kube-apiserver's HTTP client does.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.admission import AdmissionAttributes, AdmissionPlugin
from tenantgpu.apiserver.hooks import DirectEgress, Egress
from tenantgpu.apiserver.jsoncodec import dumps, loads
from tenantgpu.apiserver.patch import PatchError, apply_json_patch
from tenantgpu.apiserver.selectors import match_selector_object
from tenantgpu.apiserver.uids import UidSource

Obj = dict[str, Any]
ConfigurationSource = Callable[[bool], list[Obj]]
NamespaceLookup = Callable[[str], Obj | None]

ADMISSION_GROUP = "admissionregistration.k8s.io"
# what kube never sends to a webhook (rules.IsExemptAdmissionConfigurationResource)
EXEMPT_KINDS = frozenset(
    {
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    }
)
_MAX_RESPONSE = 8 * 1024 * 1024
# Idle keep-alive connections kept per webhook endpoint (a burst of admissions reuses them).
_MAX_IDLE_PER_ENDPOINT = 32
# Dials (with their TLS handshakes) in flight per webhook endpoint; more calls wait for a connection.
_MAX_DIALS_PER_ENDPOINT = 2


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
    """A small HTTP/1.1 POST over an egress stream with TLS, keeping connections alive per endpoint.

    Like Go's http.Transport in kube-apiserver, a finished exchange leaves its connection idle for the
    next call to the same webhook, so a burst of admissions pays one tunnel dial and one TLS handshake
    per connection, not per pod. A reused connection that turns out closed before any byte of an answer
    arrived (the webhook dropped it while idle) is replaced, and the request sent again.
    """

    def __init__(self, max_idle_per_endpoint: int = _MAX_IDLE_PER_ENDPOINT) -> None:
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._pools: dict[_Endpoint, _Pool] = {}
        self._max_idle = max_idle_per_endpoint

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
        self,
        egress: Egress,
        host: str,
        port: int,
        path: str,
        body: bytes,
        ca_bundle: str,
        dial_timeout: float = 10.0,
    ) -> tuple[int, bytes]:
        endpoint = _Endpoint(id(egress), host, port, ca_bundle)
        pool = self._pools.get(endpoint)
        if pool is None:
            pool = self._pools[endpoint] = _Pool(self._max_idle)
        context = self.context(ca_bundle)

        async def dial() -> _Connection:
            reader, writer = await egress.open_connection(host, port, ssl=context, server_hostname=host)
            return _Connection(reader, writer)

        request = (
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        while True:
            connection, reused = await pool.acquire(dial, dial_timeout)
            try:
                return await self._exchange(pool, connection, request)
            except _StaleConnection as exc:
                if not reused:
                    raise ConnectionResetError("webhook closed the connection without an answer") from exc
                # Nothing came back: the webhook closed it while idle; the request goes out again.

    async def _exchange(self, pool: _Pool, connection: _Connection, request: bytes) -> tuple[int, bytes]:
        keep = False
        try:
            try:
                connection.writer.write(request)
                await connection.writer.drain()
                status_line = await connection.reader.readline()
            except ConnectionError as exc:
                raise _StaleConnection() from exc
            if not status_line:
                raise _StaleConnection()
            status, payload, keep = await _read_response(connection.reader, status_line)
            return status, payload
        finally:
            # Anything but a complete exchange (an error, a timeout's cancellation) leaves the
            # connection in an unknown state: it is closed, never reused.
            if keep:
                pool.release(connection)
            else:
                connection.writer.close()

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()


class _Pool:
    """The kept-alive connections to one webhook endpoint, handed out as Go's http.Transport does.

    A call that finds no idle connection waits for whichever comes first: a dial made for the
    waiting calls or a connection another call gives back. Dials outlive the calls they were made
    for and join the pool. At most `max_dials` run at once: through a tunnel every dial and TLS
    handshake is several packets in a row on the agent's one shared stream, so when that stream is
    busy a burst of fresh dials would only queue the calls' own packets behind handshakes, while the
    connections already open serve them with one packet each way.
    """

    def __init__(self, max_idle: int, max_dials: int = _MAX_DIALS_PER_ENDPOINT) -> None:
        self.idle: list[_Connection] = []
        self._max_idle = max_idle
        self._max_dials = max_dials
        self._waiters: collections.deque[asyncio.Future[tuple[_Connection, bool]]] = collections.deque()
        self._dials: set[asyncio.Task[None]] = set()

    async def acquire(
        self, dial: Callable[[], Awaitable[_Connection]], dial_timeout: float
    ) -> tuple[_Connection, bool]:
        """A connection, and whether it carried requests before (so may have been closed while idle)."""
        while self.idle:
            connection = self.idle.pop()  # the most recently used: the least likely to have timed out
            if connection.usable:
                return connection, True
            connection.writer.close()
        waiter: asyncio.Future[tuple[_Connection, bool]] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._dial_for_waiters(dial, dial_timeout)
        try:
            return await waiter
        finally:
            if not waiter.done():
                waiter.cancel()

    def release(self, connection: _Connection) -> None:
        """A connection whose exchange completed: to the longest waiting call, or idle."""
        self._hand_over(connection, reused=True)

    def close(self) -> None:
        for task in list(self._dials):
            task.cancel()
        for connection in self.idle:
            connection.writer.close()
        self.idle.clear()

    def _dial_for_waiters(self, dial: Callable[[], Awaitable[_Connection]], timeout: float) -> None:
        waiting = sum(1 for waiter in self._waiters if not waiter.done())
        loop = asyncio.get_running_loop()
        while len(self._dials) < min(self._max_dials, waiting):
            task = loop.create_task(self._dial(dial, timeout))
            self._dials.add(task)

    async def _dial(self, dial: Callable[[], Awaitable[_Connection]], timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                connection = await dial()
        except Exception as exc:
            # The call waiting longest learns why (e.g. "No agent available"); the others keep waiting.
            waiter = self._next_waiter()
            if waiter is not None:
                waiter.set_exception(exc)
        else:
            self._hand_over(connection, reused=False)
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._dials.discard(task)  # type: ignore[arg-type]
        self._dial_for_waiters(dial, timeout)

    def _next_waiter(self) -> asyncio.Future[tuple[_Connection, bool]] | None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                return waiter
        return None

    def _hand_over(self, connection: _Connection, reused: bool) -> None:
        if not connection.usable:
            connection.writer.close()
            return
        waiter = self._next_waiter()
        if waiter is not None:
            waiter.set_result((connection, reused))
        elif len(self.idle) < self._max_idle:
            self.idle.append(connection)
        else:
            connection.writer.close()


class _StaleConnection(Exception):
    """The connection ended before any byte of an answer: the request may be sent again."""


@dataclass(frozen=True)
class _Endpoint:
    """Which idle connections a call may reuse: same egress, destination and trusted CA."""

    egress: int
    host: str
    port: int
    ca_bundle: str


@dataclass(frozen=True)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    @property
    def usable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing()


async def _read_response(reader: asyncio.StreamReader, status_line: bytes) -> tuple[int, bytes, bool]:
    """Status, body, and whether the connection may carry another request."""
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
    reusable = headers.get("connection", "").lower() != "close" and parts[0] != "HTTP/1.0"
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        total = 0
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                # Trailers, if any, end with an empty line; the connection is ready after it.
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
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
        reusable = False  # the body ended with the connection
    return int(parts[1]), payload, reusable


class _WebhookPhase:
    """The mutating or the validating webhook plugin."""

    def __init__(self, owner: WebhookAdmission, mutating: bool) -> None:
        self._owner = owner
        self.mutating = mutating
        self.name = "MutatingAdmissionWebhook" if mutating else "ValidatingAdmissionWebhook"

    async def admit(self, attributes: AdmissionAttributes) -> None:
        await self._owner.run(attributes, self.mutating)


# What of a request the rules of a webhook look at: operation, group, version, resource, subresource,
# and whether the kind is namespaced (the rule's scope).
_RuleKey = tuple[str, str, str, str, str, bool]


def _rule_key(attributes: AdmissionAttributes) -> _RuleKey:
    kind = attributes.kind
    return (
        attributes.operation,
        kind.group,
        kind.version,
        kind.plural,
        attributes.subresource,
        kind.namespaced,
    )


class _RuleIndex:
    """The webhooks whose rules cover each kind of request, for one set of configurations.

    Every write asks which webhooks apply, and nearly all of them (patches, bindings, events) match
    none: the rules are matched once per kind of request while the configurations stay the same
    objects (stored objects are never changed in place; a new revision is a new object).
    """

    def __init__(self, configurations: list[Obj]) -> None:
        self.configurations = configurations
        if len(configurations) > 1:
            configurations = sorted(configurations, key=lambda c: c["metadata"]["name"])
        self._webhooks = [w for c in configurations for w in c.get("webhooks") or []]
        self._by_key: dict[_RuleKey, list[Obj]] = {}

    def serves(self, configurations: list[Obj]) -> bool:
        mine = self.configurations
        if mine is configurations:
            return True
        return len(mine) == len(configurations) and all(
            a is b for a, b in zip(mine, configurations, strict=True)
        )

    def candidates(self, attributes: AdmissionAttributes) -> list[Obj]:
        key = _rule_key(attributes)
        found = self._by_key.get(key)
        if found is None:
            found = [
                w for w in self._webhooks if any(rule_matches(r, attributes) for r in w.get("rules") or [])
            ]
            self._by_key[key] = found
        return found


class WebhookAdmission:
    """Calls the webhooks registered in this API server's webhook configurations."""

    def __init__(
        self,
        configurations: ConfigurationSource,
        namespace: NamespaceLookup,
        egress: Egress,
        control_plane_egress: Egress | None = None,
    ) -> None:
        self._configurations = configurations
        self._namespace = namespace
        self._egress = egress
        # kube-apiserver dials a `url` webhook through its ControlPlane egress: from where the API server
        # runs (Kamaji's management cluster), not through the tunnel into the tenant.
        self._direct = control_plane_egress or DirectEgress()
        self._http = _HTTPClient()
        self._indexes: dict[bool, _RuleIndex] = {}
        self._uids = UidSource()

    def plugins(self) -> list[AdmissionPlugin]:
        return [_WebhookPhase(self, True), _WebhookPhase(self, False)]

    async def close(self) -> None:
        self._http.close()

    def _selected(self, webhook: Obj, attributes: AdmissionAttributes) -> bool:
        """Whether a webhook whose rules cover the request selects it by namespace and object labels."""
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

    def _index(self, mutating: bool) -> _RuleIndex:
        configurations = self._configurations(mutating)
        index = self._indexes.get(mutating)
        if index is None or not index.serves(configurations):
            index = self._indexes[mutating] = _RuleIndex(configurations)
        return index

    async def run(self, attributes: AdmissionAttributes, mutating: bool) -> None:
        if attributes.kind.group == ADMISSION_GROUP and attributes.kind.kind in EXEMPT_KINDS:
            return  # no webhook can lock the cluster's webhooks and policies away (kube's exemption)
        # Configurations in name order, webhooks in their order within each, as kube-apiserver calls them.
        for webhook in self._index(mutating).candidates(attributes):
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
            "uid": self._uids.next(),
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
                self._http.post(egress, host, port, path, body, ca_bundle, dial_timeout=timeout), timeout
            )
        except TimeoutError as exc:
            raise WebhookCallError(f"context deadline exceeded (timeout {timeout:g}s)") from exc
        except Exception as exc:
            # Whatever breaks the call (network, TLS, a broken egress) is a call error that the
            # webhook's failurePolicy decides, as in kube-apiserver; never the client's 400.
            raise WebhookCallError(f'Post "https://{host}:{port}{path}": {exc}') from exc
        if status != 200:
            raise WebhookCallError(f"received HTTP status {status} from webhook")
        try:
            review = loads(payload)
        except ValueError as exc:
            raise WebhookCallError(f"webhook returned invalid JSON: {exc}") from exc
        if not isinstance(review, dict) or not isinstance(review.get("response"), dict):
            raise WebhookCallError("webhook response has no response field")
        return review["response"]

    async def _call(self, webhook: Obj, attributes: AdmissionAttributes, mutating: bool) -> None:
        name = webhook.get("name", "")
        review, uid = self._review(webhook, attributes)
        try:
            response = await self._post(webhook, dumps(review))
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
                ops = loads(base64.b64decode(patch))
                attributes.obj = apply_json_patch(attributes.obj, ops)
            except (ValueError, PatchError, KeyError, IndexError, TypeError) as exc:
                if (webhook.get("failurePolicy") or "Fail") == "Ignore":
                    return
                raise errors.internal(f'webhook "{name}" returned an invalid patch: {exc}') from exc
            attributes.mutated = True
