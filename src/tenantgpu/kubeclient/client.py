"""An async Kubernetes REST client on one keep-alive session: CRUD, patch, watch, bindings, events."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

from tenantgpu.inprocesswatch import IN_PROCESS_HEADER, InProcessWatch, InProcessWatches
from tenantgpu.kubeclient.config import KubeConfig, load_kubeconfig
from tenantgpu.kubeclient.errors import ApiError
from tenantgpu.kubeclient.events import EventCorrelator
from tenantgpu.kubeclient.resources import ResourceKind, resource_kind
from tenantgpu.kubeclient.transport import Http1Pool

PatchType = Literal["merge", "strategic", "json", "apply"]
_PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


@dataclass(frozen=True)
class WatchEvent:
    """One line of a watch stream: ADDED, MODIFIED, DELETED, BOOKMARK (ERROR becomes an ApiError)."""

    type: str
    object: dict[str, Any]
    # The object is the API server's own (an in-process watch): it must never be changed in place.
    shared: bool = False


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class KubeClient:
    """A thin client for one API server; create inside a running event loop, `await close()` when done."""

    def __init__(
        self,
        config: KubeConfig,
        *,
        user_agent: str = "tenantgpu",
        pool_size: int = 64,
        in_process: InProcessWatches | None = None,
    ) -> None:
        """`in_process`: the server's hand-over of watch events, for a client in the server's process."""
        self.config = config
        self.in_process = in_process
        self._ssl = config.ssl_context()
        self._user_agent = user_agent
        self._pool_size = pool_size
        self._pool: Http1Pool | None = None
        self._event_names = _EventNames()
        self._events = EventCorrelator()

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str], context: str | None = None, **kw: Any
    ) -> KubeClient:
        return cls(load_kubeconfig(path, context), **kw)

    def _headers(self) -> dict[str, str]:
        headers = {"User-Agent": self._user_agent, "Accept": "application/json"}
        if self.config.token:
            headers["Authorization"] = f"Bearer {self.config.token}"
        return headers

    def use_token(self, token: str) -> None:
        """Present `token` from the next request on, as client-go rereads a rotated token file."""
        self.config = dataclasses.replace(self.config, token=token)
        if self._pool is not None:
            self._pool.set_headers(self._headers())

    @property
    def pool(self) -> Http1Pool:
        if self._pool is None:
            self._pool = Http1Pool(
                self.config.server, self._ssl, headers=self._headers(), size=self._pool_size
            )
        return self._pool

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- plain requests -----------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
        decode: bool = True,
    ) -> dict[str, Any]:
        """One request; returns the decoded JSON body or raises ApiError with the server's Status.

        `decode=False` is for callers that do not look at the object the server sends back (status
        updates, events, bindings): it is read but not parsed, and {} is returned.
        """
        if body is None:
            data = None
        elif isinstance(body, bytes):
            data = body
        else:
            data = body.encode() if isinstance(body, str) else orjson.dumps(body)
        resp = await self.pool.request(
            method, path, params=params, body=data, content_type=content_type, timeout=timeout
        )
        if resp.status >= 400:
            raise ApiError.from_response(resp.status, resp.body)
        return orjson.loads(resp.body) if resp.body and decode else {}

    async def get_text(self, path: str, params: dict[str, str] | None = None) -> str:
        """GET a non-JSON body (e.g. pod logs)."""
        resp = await self.pool.request("GET", path, params=params)
        if resp.status >= 400:
            raise ApiError.from_response(resp.status, resp.body)
        return resp.body.decode("utf-8", "replace")

    # --- verbs --------------------------------------------------------------------------------

    async def get(
        self, resource: str | ResourceKind, name: str, namespace: str | None = None
    ) -> dict[str, Any]:
        return await self.request("GET", resource_kind(resource).path(namespace, name))

    async def get_if_found(
        self, resource: str | ResourceKind, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """GET, or None when the object does not exist (404)."""
        try:
            return await self.get(resource, name, namespace)
        except ApiError as err:
            if err.code == 404:
                return None
            raise

    async def list(
        self,
        resource: str | ResourceKind,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """A List object (`items`, `metadata.resourceVersion`); follows `continue` tokens."""
        rk = resource_kind(resource)
        params = _selectors(label_selector, field_selector)
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if limit:
            params["limit"] = str(limit)
        result = await self.request("GET", rk.path(namespace), params=params)
        cont = (result.get("metadata") or {}).get("continue")
        while cont and limit:
            page = await self.request("GET", rk.path(namespace), params={**params, "continue": cont})
            result["items"].extend(page.get("items") or [])
            result["metadata"] = page.get("metadata") or {}
            cont = result["metadata"].get("continue")
        result.setdefault("items", [])
        for item in result["items"]:
            # Lists omit kind/apiVersion per item; add them so cached objects look like GETs.
            item.setdefault("kind", rk.kind)
            item.setdefault("apiVersion", rk.api_version)
        return result

    async def create(
        self, resource: str | ResourceKind, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        rk = resource_kind(resource)
        ns = namespace or (body.get("metadata") or {}).get("namespace")
        body = {"apiVersion": rk.api_version, "kind": rk.kind, **body}
        return await self.request("POST", rk.path(ns), body=body)

    async def update(
        self, resource: str | ResourceKind, body: dict[str, Any], *, subresource: str | None = None
    ) -> dict[str, Any]:
        """PUT the whole object (optimistic concurrency through its metadata.resourceVersion)."""
        rk = resource_kind(resource)
        meta = body["metadata"]
        return await self.request("PUT", rk.path(meta.get("namespace"), meta["name"], subresource), body=body)

    async def update_status(self, resource: str | ResourceKind, body: dict[str, Any]) -> dict[str, Any]:
        return await self.update(resource, body, subresource="status")

    async def patch(
        self,
        resource: str | ResourceKind,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        decode: bool = True,
    ) -> dict[str, Any]:
        """PATCH; returns the patched object ({} with `decode=False`, see `request`). `force` takes the
        fields a server-side apply would conflict on."""
        rk = resource_kind(resource)
        params = {"fieldManager": field_manager} if field_manager else {}
        if force:
            params["force"] = "true"
        return await self.request(
            "PATCH",
            rk.path(namespace, name, subresource),
            params=params or None,
            body=patch,
            content_type=_PATCH_CONTENT_TYPES[patch_type],
            decode=decode,
        )

    async def delete(
        self,
        resource: str | ResourceKind,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
        propagation_policy: str | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy is not None:
            body["propagationPolicy"] = propagation_policy
        if uid is not None:
            body["preconditions"] = {"uid": uid}
        return await self.request("DELETE", resource_kind(resource).path(namespace, name), body=body)

    # --- watch --------------------------------------------------------------------------------

    async def watch(
        self,
        resource: str | ResourceKind,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        shared: bool = False,
    ) -> AsyncIterator[WatchEvent]:
        """Yield events until the server ends the stream; an ERROR event raises ApiError (410 = relist).

        `shared`: the caller never changes the objects, so a server in this process may hand over its
        own (the events are then marked `shared`) instead of encoding them for this client to decode."""
        rk = resource_kind(resource)
        params = _selectors(label_selector, field_selector)
        params["watch"] = "1"
        params["allowWatchBookmarks"] = "true"
        if resource_version:
            params["resourceVersion"] = resource_version
        # Like client-go, end each watch after 5-10 minutes so stale connections cannot linger forever.
        params["timeoutSeconds"] = str(timeout_seconds or random.randint(300, 600))
        hand_over = self.in_process if shared else None
        key, local = hand_over.open() if hand_over is not None else ("", None)
        try:
            async with self.pool.stream(
                "GET", rk.path(namespace), params=params, headers={IN_PROCESS_HEADER: key} if key else None
            ) as (status, body):
                if status >= 400:
                    raise ApiError.from_response(status, await body.read())
                # a server of this process took the hand-over: the connection carries no events
                events = (
                    _in_process_events(local)
                    if local is not None and local.accepted
                    else _stream_events(body, rk)
                )
                async for event in events:
                    yield event
        finally:
            if hand_over is not None and local is not None:
                local.close()
                hand_over.release(key)

    # --- conveniences -------------------------------------------------------------------------

    async def create_binding(
        self, namespace: str, pod: str, node: str, *, pod_uid: str | None = None
    ) -> None:
        """POST pods/<pod>/binding, as kube-scheduler and HAMi's extender do."""
        meta: dict[str, Any] = {"name": pod, "namespace": namespace}
        if pod_uid:
            meta["uid"] = pod_uid
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        await self.request(
            "POST", resource_kind("pods").path(namespace, pod, "binding"), body=body, decode=False
        )

    async def create_event(
        self,
        involved: dict[str, Any],
        *,
        reason: str,
        message: str,
        type: str = "Normal",
        component: str = "tenantgpu",
        host: str | None = None,
        decode: bool = True,
        reference: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Record a core/v1 Event about `involved` (an object as returned by the API); returns the Event
        ({} with `decode=False`, or when the recorder drops it as spam). `reference`, when given, is the
        involvedObject as the recorder's caller builds it (a kubelet's reference to its node has no
        apiVersion, and its name for uid). A repeat of an event this client recorded is counted on the
        first one, as client-go's recorder does (`events.EventCorrelator`)."""
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or (reference or {}).get("namespace") or "default"
        name, now = self._event_names.next(meta.get("name") or (reference or {}).get("name") or "object")
        source: dict[str, str] = {"component": component}
        if host:
            source["host"] = host
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": reference
            if reference is not None
            else {
                "apiVersion": involved.get("apiVersion", "v1"),
                "kind": involved.get("kind", "Pod"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": type,
            "source": source,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "eventTime": None,
            "count": 1,
            "reportingComponent": component,
            "reportingInstance": host or "",
        }
        correlated = self._events.correlate(body, name=self._event_names.next)
        if correlated.skip:
            return {}
        events = resource_kind("events")
        event = correlated.event
        if correlated.patch is not None:
            try:
                return await self.request(
                    "PATCH",
                    events.path(namespace, event["metadata"]["name"]),
                    body=correlated.patch,
                    content_type=_PATCH_CONTENT_TYPES["strategic"],
                    decode=decode,
                )
            except ApiError as err:
                if err.code != 404:
                    raise
            # The counted event is gone (an hour's TTL, or deleted), or its create is still on the way:
            # record it afresh, under a name of its own.
            fresh, _ = self._event_names.next(str(event["involvedObject"].get("name") or "object"))
            event = {
                **event,
                "metadata": {**event["metadata"], "name": fresh},
                "count": 1,
                "firstTimestamp": event["lastTimestamp"],
            }
            self._events.recorded(event)
        return await self.request("POST", events.path(namespace), body=event, decode=decode)


class _EventNames:
    """Event names as client-go's recorder makes them, `<object>.<unix nanoseconds in hex>`, with the
    event's RFC 3339 time (formatted once per second). Strictly increasing per client, so two events
    on one object within a clock tick still get distinct names."""

    def __init__(self) -> None:
        self._last_ns = 0
        self._second = -1
        self._stamp = ""

    def next(self, object_name: str) -> tuple[str, str]:
        ns = max(time.time_ns(), self._last_ns + 1)
        self._last_ns = ns
        second = ns // 1_000_000_000
        if second != self._second:
            self._second = second
            self._stamp = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"{object_name}.{ns:x}", self._stamp


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    params: dict[str, str] = {}
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    return params


async def _stream_events(body: AsyncIterator[bytes], rk: ResourceKind) -> AsyncIterator[WatchEvent]:
    """The events of a watch's response body, one JSON object per line."""
    buffer = b""
    async for chunk in body:
        if b"\n" not in chunk:
            buffer += chunk
            continue
        # one split per chunk: a chunk often carries several events, or the end of a big one
        *lines, buffer = (buffer + chunk).split(b"\n")
        # An idle watch waits for its next chunk in this frame: it must not hold on to the bytes
        # of the events it has handed on (a lab keeps some thirty watches per tenant).
        del chunk
        while lines:
            line = lines.pop(0)
            if line and not line.isspace():
                event = _decode_event(line, rk)
                del line
                yield event
                del event
    if buffer.strip():
        yield _decode_event(buffer, rk)


async def _in_process_events(local: InProcessWatch) -> AsyncIterator[WatchEvent]:
    """The events a server of this process hands over: its stored objects, shared."""
    while True:
        for item in await local.next_batch():
            if item is None:
                return
            kind, obj = item
            yield WatchEvent(kind, obj, shared=True)


def _decode_event(line: bytes, rk: ResourceKind) -> WatchEvent:
    event = orjson.loads(line)
    kind, obj = event.get("type", ""), event.get("object") or {}
    if kind == "ERROR":
        raise ApiError(obj if obj.get("kind") == "Status" else {"code": 500, "reason": "InternalError"})
    obj.setdefault("kind", rk.kind)
    obj.setdefault("apiVersion", rk.api_version)
    return WatchEvent(kind, obj)


async def sleep_backoff(attempt: int, base: float = 0.1, cap: float = 5.0) -> None:
    """Exponential backoff with jitter, as client-go's wait.Backoff does."""
    delay = min(cap, base * (2**attempt))
    await asyncio.sleep(delay * (0.5 + random.random() / 2))
