"""The HTTPS front of one API server: routing, authentication, content negotiation and `Status` errors.

`APIServer(config)` is the entry point; many instances share one process and one event loop, each
with its own port, CA and key prefix in the shared datastore.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import logging
import random
import ssl
import tempfile
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml
from aiohttp import web

from tenantgpu.apiserver import discovery, errors
from tenantgpu.apiserver.admission import AdmissionChain, AdmissionPlugin, NamespaceLifecycle
from tenantgpu.apiserver.auth import Attributes, Authenticator, Authorizer, TokenSigner, UserInfo
from tenantgpu.apiserver.hooks import Egress, LogOptions, NoEgress, PodLogSource
from tenantgpu.apiserver.kinds import SCALE_PATHS, VIRTUAL_KINDS, Kind, KindTable, kind_table
from tenantgpu.apiserver.metrics import APIMetrics
from tenantgpu.apiserver.patch import (
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)
from tenantgpu.apiserver.pki import ServerPKI, admin_kubeconfig, render_kubeconfig
from tenantgpu.apiserver.registry import DeleteOptions, Registry, now_rfc3339
from tenantgpu.apiserver.selectors import SelectorError, parse_field_selector, parse_label_selector
from tenantgpu.apiserver.storage import Datastore
from tenantgpu.apiserver.watchcache import Entry, Event, Predicate, encode
from tenantgpu.apiserver.webhooks import WebhookAdmission

try:
    from tenantgpu.apiserver.tables import to_table
except ImportError:
    from tenantgpu.apiserver._interim import to_table  # type: ignore[assignment]
try:
    from tenantgpu.apiserver import openapi as _openapi
except ImportError:
    _openapi = None  # type: ignore[assignment]
try:
    from tenantgpu.apiserver.ssar_protobuf import decode_self_subject_access_review
except ImportError:
    decode_self_subject_access_review = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
JSON = "application/json"
PROTOBUF = "application/vnd.kubernetes.protobuf"
_ACCEPTED_BODY_TYPES = f"{JSON}, application/yaml, {PROTOBUF}"
_PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)
_ANONYMOUS_PATHS = ("/healthz", "/livez", "/readyz", "/version")
_SUCCESS_CREATED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


@dataclass
class APIServerConfig:
    """Everything one API server needs; its owner persists `pki` to restart with the same identity."""

    name: str
    datastore: Datastore
    pki: ServerPKI
    key_prefix: str = ""
    kubernetes_version: str = "v1.31.4"
    host: str = "127.0.0.1"
    port: int = 0
    extra_kinds: Sequence[Kind] = ()
    egress: Egress = field(default_factory=NoEgress)
    log_source: PodLogSource | None = None
    # Other CAs accepted at the TLS layer, so their certificates get a clean 401 rather than a failed
    # handshake (the lab passes every tenant's CA); users always come from this server's own CA.
    trusted_client_cas: Sequence[bytes] = ()
    admission_plugins: Sequence[AdmissionPlugin] = ()
    max_body_bytes: int = 3 * 1024 * 1024
    watch_window: int = 1000
    authorizer: Authorizer = field(default_factory=Authorizer)


@dataclass(frozen=True)
class _Target:
    """A parsed resource request path."""

    kind: Kind
    namespace: str
    name: str
    subresource: str


def _version_info(git_version: str) -> Obj:
    core = git_version.lstrip("v").split("-")[0].split("+")[0]
    major, minor = [*core.split("."), "0", "0"][:2]
    return {
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.22.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def _json_response(body: Any, status: int = 200, content_type: str = JSON) -> web.Response:
    data = body if isinstance(body, bytes) else encode(body)
    return web.Response(body=data, status=status, headers={"Content-Type": content_type})


def _status_response(error: errors.APIError) -> web.Response:
    return _json_response(error.status(), error.code)


def _wants_table(accept: str) -> bool:
    return "as=Table" in accept and "g=meta.k8s.io" in accept


def _query_flag(query: Any, name: str) -> bool:
    return query.get(name, "").lower() in ("true", "1")


def _parse_int(query: Any, name: str) -> int | None:
    value = query.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise errors.bad_request(f"invalid value for {name}: {value!r}") from exc


def _get_path(obj: Obj, path: Sequence[str]) -> Any:
    value: Any = obj
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _set_path(obj: Obj, path: Sequence[str], value: Any) -> None:
    for part in path[:-1]:
        obj = obj.setdefault(part, {})
    obj[path[-1]] = value


class APIServer:
    """One Kubernetes-compatible API server: `await start()`, then talk to `url` with `ca_pem`."""

    def __init__(self, config: APIServerConfig) -> None:
        self.config = config
        self.kinds: KindTable = kind_table(config.extra_kinds)
        self.signer = TokenSigner(config.pki.service_account_key_pem)
        self._authenticator = Authenticator(
            config.pki.ca.cert_pem, self.signer, check_issuer=bool(config.trusted_client_cas)
        )
        self.webhooks = WebhookAdmission(self._webhook_configurations, self._namespace_object, config.egress)
        self.admission = AdmissionChain(
            [NamespaceLifecycle(self._namespace_object), *config.admission_plugins, *self.webhooks.plugins()]
        )
        self.registry = Registry(
            self.kinds,
            config.datastore,
            config.key_prefix or config.name,
            self.admission,
            window=config.watch_window,
        )
        self.metrics = APIMetrics(self._storage_counts)
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._port = config.port
        self._version = encode(_version_info(config.kubernetes_version))
        self._docs: dict[str, bytes] = {}
        self._users: weakref.WeakKeyDictionary[Any, UserInfo | bool | None] = weakref.WeakKeyDictionary()
        self._watch_tasks: set[asyncio.Task[Any]] = set()

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.registry.load()
        app = web.Application(client_max_size=self.config.max_body_bytes)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        self._site = web.TCPSite(
            self._runner, self.config.host, self.config.port, ssl_context=self._ssl_context()
        )
        await self._site.start()
        server = self._site._server
        assert server is not None
        self._port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._docs.clear()

    async def stop(self) -> None:
        self.registry.close()
        await self.webhooks.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _ssl_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        pki = self.config.pki
        # The ssl module loads keys only from files; they live for the blink of this call.
        with tempfile.TemporaryDirectory() as tmp:
            cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert_file.write_bytes(pki.serving_cert_pem)
            key_file.touch(0o600)
            key_file.write_bytes(pki.serving_key_pem)
            context.load_cert_chain(cert_file, key_file)
        cas = b"".join([pki.ca.cert_pem, *self.config.trusted_client_cas]).decode()
        context.load_verify_locations(cadata=cas)
        context.verify_mode = ssl.CERT_OPTIONAL
        context.set_alpn_protocols(["http/1.1"])
        return context

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"https://{self.config.host}:{self._port}"

    @property
    def ca_pem(self) -> bytes:
        return self.config.pki.ca.cert_pem

    def admin_kubeconfig(self, user: str = "kubernetes-admin") -> str:
        """A kubeconfig with a fresh `system:masters` client certificate."""
        return admin_kubeconfig(self.config.name, self.url, self.config.pki.ca, user)

    def user_kubeconfig(self, user: str, groups: Sequence[str] = ()) -> str:
        cert, key = self.config.pki.ca.issue_client(user, groups)
        return render_kubeconfig(
            self.config.name, self.url, self.ca_pem, user, client_cert_pem=cert, client_key_pem=key
        )

    def issue_service_account_token(
        self, namespace: str, name: str, expiration_seconds: int | None = None
    ) -> str:
        """A token for `system:serviceaccount:<namespace>:<name>` that this server accepts."""
        return self.signer.issue(namespace, name, expiration_seconds=expiration_seconds)

    def service_account_kubeconfig(self, namespace: str, name: str) -> str:
        token = self.issue_service_account_token(namespace, name)
        return render_kubeconfig(
            self.config.name, self.url, self.ca_pem, f"{namespace}-{name}", token=token, namespace=namespace
        )

    # --- helpers for plugins ----------------------------------------------------------------------

    def _namespace_object(self, name: str) -> Obj | None:
        kind = self.kinds.resource("", "v1", "namespaces")
        assert kind is not None
        return self.registry.get_object(kind, "", name)

    def _webhook_configurations(self, mutating: bool) -> list[Obj]:
        plural = "mutatingwebhookconfigurations" if mutating else "validatingwebhookconfigurations"
        kind = self.kinds.resource("admissionregistration.k8s.io", "v1", plural)
        assert kind is not None
        return [entry.obj for entry in self.registry.list(kind, None)]

    def _storage_counts(self) -> list[tuple[str, int, int]]:
        counts = []
        for kind in self.kinds:
            if kind.kind in VIRTUAL_KINDS:
                continue
            cache = self.registry.cache(kind)
            counts.append((kind.group_resource, len(cache.objects), cache.watcher_count))
        return counts

    # --- request entry ----------------------------------------------------------------------------

    def _authenticate(self, request: web.Request) -> UserInfo | None:
        header = request.headers.get("Authorization")
        transport = request.transport
        cert_user: UserInfo | bool | None = None
        if transport is not None:
            try:
                cert_user = self._users[transport]
            except KeyError:
                peercert = transport.get_extra_info("peercert")
                ssl_object = transport.get_extra_info("ssl_object")
                der = (
                    ssl_object.getpeercert(binary_form=True) if ssl_object is not None and peercert else None
                )
                cert_user = self._authenticator.from_certificate(peercert, der)
                with contextlib.suppress(TypeError):
                    self._users[transport] = cert_user
        if isinstance(cert_user, UserInfo):
            return cert_user
        if header is not None:
            scheme, _, token = header.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                user = self._authenticator.from_token(token.strip())
                if user is None:
                    raise errors.unauthorized()
                return user
            raise errors.unauthorized()
        if cert_user is False:
            raise errors.unauthorized()
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        verb, resource = request.method.lower(), ""
        try:
            user = self._authenticate(request)
            path = unquote(request.path).rstrip("/") or "/"
            if user is None and not any(path == p or path.startswith(p + "/") for p in _ANONYMOUS_PATHS):
                raise errors.unauthorized()
            response, verb, resource = await self._route(request, path, user)
        except errors.APIError as error:
            response = _status_response(error)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not take the server down; the client gets a Status
            log.exception("internal error serving %s %s", request.method, request.path)
            response = _status_response(errors.internal(f"{type(exc).__name__}: {exc}"))
        self.metrics.observe(verb, resource, response.status, time.perf_counter() - started)
        return response

    async def _route(
        self, request: web.Request, path: str, user: UserInfo | None
    ) -> tuple[web.StreamResponse, str, str]:
        segments = path.strip("/").split("/") if path != "/" else []
        head = segments[0] if segments else ""
        if head in ("api", "apis"):
            assert user is not None
            return await self._api(request, segments, user)
        if user is not None and not self.config.authorizer.allowed(
            user, Attributes(verb=request.method.lower(), path=path)
        ):
            raise errors.APIError(
                403,
                "Forbidden",
                f'forbidden: User "{user.name}" cannot {request.method.lower()} path "{path}"',
            )
        if request.method != "GET":
            raise errors.method_not_allowed()
        if head == "version":
            return _json_response(self._version), "get", "version"
        if head in ("healthz", "livez", "readyz"):
            return web.Response(text="ok", content_type="text/plain"), "get", head
        if head == "metrics":
            return (
                web.Response(
                    body=self.metrics.render(), headers={"Content-Type": "text/plain; version=0.0.4"}
                ),
                "get",
                "metrics",
            )
        if head == "openapi" and len(segments) >= 2 and segments[1] == "v3" and _openapi is not None:
            return self._openapi_v3(segments[2:]), "get", "openapi"
        if not segments:
            paths = ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/metrics", "/readyz", "/version"]
            for group, versions in self.kinds.group_versions().items():
                if group:
                    paths += [f"/apis/{group}", *(f"/apis/{group}/{v}" for v in versions)]
            return _json_response({"paths": sorted(paths)}), "get", ""
        raise errors.unknown_path()

    def _openapi_v3(self, rest: list[str]) -> web.Response:
        assert _openapi is not None
        key = "/".join(rest)
        doc = self._docs.get("openapi:" + key)
        if doc is None:
            if not rest:
                doc = encode(_openapi.openapi_v3_root(list(self.kinds)))
            else:
                if rest[0] == "api" and len(rest) == 2:
                    group, version = "", rest[1]
                elif rest[0] == "apis" and len(rest) == 3:
                    group, version = rest[1], rest[2]
                else:
                    raise errors.unknown_path()
                kinds = self.kinds.in_group_version(group, version)
                if not kinds:
                    raise errors.unknown_path()
                doc = encode(_openapi.openapi_v3_group_version(group, version, kinds))
            self._docs["openapi:" + key] = doc
        return _json_response(doc)

    # --- discovery and resources ----------------------------------------------------------------

    def _discovery(self, request: web.Request, segments: list[str]) -> web.Response | None:
        accept = request.headers.get("Accept", "")
        if segments == ["api"] or segments == ["apis"]:
            core = segments == ["api"]
            aggregated = discovery.aggregated_content_type(accept)
            key = f"{segments[0]}:{aggregated}"
            doc = self._docs.get(key)
            if doc is None:
                if aggregated is not None:
                    doc = encode(discovery.aggregated(self.kinds, aggregated, core=core))
                elif core:
                    doc = encode(discovery.api_versions(f"{self.config.host}:{self.port}"))
                else:
                    doc = encode(discovery.api_group_list(self.kinds))
                self._docs[key] = doc
            return _json_response(doc, content_type=aggregated or JSON)
        if segments[0] == "api" and len(segments) == 2:
            group, version = "", segments[1]
        elif segments[0] == "apis" and len(segments) == 2:
            group_doc = discovery.api_group(self.kinds, segments[1])
            if group_doc is None:
                raise errors.unknown_path()
            return _json_response(group_doc)
        elif segments[0] == "apis" and len(segments) == 3:
            group, version = segments[1], segments[2]
        else:
            return None
        if not self.kinds.in_group_version(group, version):
            raise errors.unknown_path()
        key = f"gv:{group}/{version}"
        doc = self._docs.get(key)
        if doc is None:
            doc = self._docs[key] = encode(discovery.resource_list(self.kinds, group, version))
        return _json_response(doc)

    def _target(self, segments: list[str]) -> _Target:
        if segments[0] == "api":
            group, version, rest = "", segments[1], segments[2:]
        else:
            group, version, rest = segments[1], segments[2], segments[3:]
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            nested = self.kinds.resource(group, version, rest[2])
            if nested is not None and nested.namespaced:
                namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise errors.unknown_path()
        kind = self.kinds.resource(group, version, rest[0])
        if kind is None:
            raise errors.unknown_path()
        name = rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else ""
        if subresource and kind.subresource(subresource) is None:
            raise errors.unknown_path()
        return _Target(kind, namespace, name, subresource)

    async def _api(
        self, request: web.Request, segments: list[str], user: UserInfo
    ) -> tuple[web.StreamResponse, str, str]:
        if len(segments) <= 3 and not (segments[0] == "api" and len(segments) == 3):
            if request.method != "GET":
                raise errors.method_not_allowed()
            response = self._discovery(request, segments)
            if response is not None:
                return response, "get", "discovery"
        target = self._target(segments)
        kind = target.kind
        method = request.method
        query = request.query
        if method == "GET":
            verb = "get" if target.name else "watch" if _query_flag(query, "watch") else "list"
        elif method == "POST":
            verb = "create"
            if target.name and not target.subresource:
                raise errors.method_not_allowed()
        elif method == "PUT":
            verb = "update"
        elif method == "PATCH":
            verb = "patch"
        elif method == "DELETE":
            verb = "delete" if target.name else "deletecollection"
        else:
            raise errors.method_not_allowed()
        allowed_verbs = kind.subresource(target.subresource).verbs if target.subresource else kind.verbs  # type: ignore[union-attr]
        if verb not in allowed_verbs or (verb in ("update", "patch", "delete") and not target.name):
            raise errors.method_not_allowed()
        attributes = Attributes(
            verb, kind.group, kind.plural, target.subresource, target.namespace, target.name, request.path
        )
        if not self.config.authorizer.allowed(user, attributes):
            raise errors.forbidden_request(
                user.name, verb, kind.plural, kind.group, target.namespace, target.name
            )
        handler = getattr(self, f"_verb_{verb}")
        response = await handler(request, target, user)
        return response, verb, kind.plural

    # --- verbs ------------------------------------------------------------------------------------

    def _render(self, request: web.Request, kind: Kind, entry: Entry, status: int = 200) -> web.Response:
        if _wants_table(request.headers.get("Accept", "")):
            table = self._table(kind, [entry.obj], request.query.get("includeObject", "Metadata"))
            table["metadata"] = {"resourceVersion": str(entry.revision)}
            return _json_response(table, status)
        return _json_response(entry.raw, status)

    def _table(self, kind: Kind, objects: list[Obj], include: str) -> Obj:
        return to_table(kind.kind, objects, include_object=include, now=dt.datetime.now(dt.UTC))

    async def _verb_get(self, request: web.Request, target: _Target, user: UserInfo) -> web.StreamResponse:
        kind = target.kind
        entry = self.registry.get(kind, target.namespace, target.name)
        if target.subresource == "log":
            return await self._pod_log(request, entry)
        if target.subresource == "scale":
            return _json_response(self._scale_of(kind, entry.obj))
        return self._render(request, kind, entry)

    def _predicate(self, request: web.Request) -> Predicate | None:
        label_text = request.query.get("labelSelector", "")
        field_text = request.query.get("fieldSelector", "")
        try:
            labels = parse_label_selector(label_text) if label_text else None
            fields = parse_field_selector(field_text) if field_text else None
        except SelectorError as exc:
            raise errors.bad_request(str(exc)) from exc
        except ValueError as exc:
            raise errors.bad_request(f"unable to parse selector: {exc}") from exc
        if labels is None and fields is None:
            return None

        def predicate(obj: Obj) -> bool:
            if labels is not None and not labels.matches(obj["metadata"].get("labels") or {}):
                return False
            return fields is None or fields.matches(obj)

        return predicate

    async def _verb_list(self, request: web.Request, target: _Target, user: UserInfo) -> web.StreamResponse:
        kind = target.kind
        query = request.query
        revision = self.registry.revision
        entries = self.registry.list(kind, target.namespace or None, self._predicate(request))
        limit = _parse_int(query, "limit")
        start = query.get("continue")
        if start:
            try:
                token = json.loads(base64.urlsafe_b64decode(start.encode()))
                after, revision = token["start"], int(token["rv"])
            except (ValueError, KeyError, TypeError) as exc:
                raise errors.bad_request(
                    "continue key is not valid: incorrect encoded start resourceVersion"
                ) from exc
            entries = [e for e in entries if self._sort_key(kind, e.obj) > after]
        next_token = ""
        remaining = 0
        if limit is not None and limit > 0 and len(entries) > limit:
            remaining = len(entries) - limit
            entries = entries[:limit]
            last = self._sort_key(kind, entries[-1].obj)
            next_token = base64.urlsafe_b64encode(
                json.dumps({"start": last, "rv": revision}).encode()
            ).decode()
        meta: Obj = {"resourceVersion": str(revision)}
        if next_token:
            meta["continue"] = next_token
            meta["remainingItemCount"] = remaining
        if _wants_table(request.headers.get("Accept", "")):
            table = self._table(kind, [e.obj for e in entries], query.get("includeObject", "Metadata"))
            table["metadata"] = meta
            return _json_response(table)
        head = encode({"kind": kind.list_kind, "apiVersion": kind.api_version, "metadata": meta})
        body = head[:-1] + b',"items":[' + b",".join(e.raw for e in entries) + b"]}"
        return _json_response(body)

    @staticmethod
    def _sort_key(kind: Kind, obj: Obj) -> str:
        meta = obj["metadata"]
        return f"{meta.get('namespace', '')}/{meta['name']}" if kind.namespaced else meta["name"]

    async def _verb_watch(self, request: web.Request, target: _Target, user: UserInfo) -> web.StreamResponse:
        kind = target.kind
        query = request.query
        raw_version = query.get("resourceVersion", "")
        if raw_version in ("", "0"):
            since = None
        else:
            try:
                since = int(raw_version)
            except ValueError as exc:
                raise errors.bad_request(f"invalid resource version: {raw_version!r}") from exc
        timeout = _parse_int(query, "timeoutSeconds")
        if timeout is None or timeout <= 0:
            timeout = random.randint(1800, 3600)
        bookmarks = _query_flag(query, "allowWatchBookmarks")
        table = _wants_table(request.headers.get("Accept", ""))
        include = query.get("includeObject", "Metadata")
        predicate = self._predicate(request)
        try:
            watcher, backlog = self.registry.watch(kind, target.namespace or None, predicate, since)
        except errors.APIError as error:
            if error.code != 410:
                raise
            # kube-apiserver answers a too-old version with 200 and one ERROR event, then ends the stream.
            response = web.StreamResponse(status=200, headers={"Content-Type": JSON})
            await response.prepare(request)
            await response.write(encode({"type": "ERROR", "object": error.status()}) + b"\n")
            await response.write_eof()
            return response
        response = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        response.enable_chunked_encoding()

        def line(event: Event) -> bytes:
            if not table:
                return event.line()
            rows = self._table(kind, [event.entry.obj], include)
            rows["metadata"] = {"resourceVersion": str(event.entry.revision)}
            return encode({"type": event.type, "object": rows}) + b"\n"

        deadline = time.monotonic() + timeout
        try:
            await response.prepare(request)
            if backlog:
                await response.write(b"".join(line(e) for e in backlog))
            else:
                await response.write(b"")
            last_sent = time.monotonic()
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    event = await asyncio.wait_for(watcher.queue.get(), timeout=min(remaining, 10.0))
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break
                    if bookmarks and not table and time.monotonic() - last_sent >= 10.0:
                        mark = {
                            "kind": kind.kind,
                            "apiVersion": kind.api_version,
                            "metadata": {"resourceVersion": str(self.registry.revision)},
                        }
                        await response.write(encode({"type": "BOOKMARK", "object": mark}) + b"\n")
                        last_sent = time.monotonic()
                    continue
                if event is None:
                    break
                chunk = [line(event)]
                while not watcher.queue.empty():
                    more = watcher.queue.get_nowait()
                    if more is None:
                        deadline = 0
                        break
                    chunk.append(line(more))
                await response.write(b"".join(chunk))
                last_sent = time.monotonic()
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            self.registry.unwatch(kind, watcher)
        return response

    async def _read_body(self, request: web.Request) -> bytes:
        length = request.content_length
        if length is not None and length > self.config.max_body_bytes:
            raise errors.too_large(self.config.max_body_bytes)
        try:
            return await request.read()
        except web.HTTPRequestEntityTooLarge as exc:
            raise errors.too_large(self.config.max_body_bytes) from exc

    async def _decode_body(self, request: web.Request, *, allow_protobuf: bool = False) -> Any:
        raw = await self._read_body(request)
        content_type = request.headers.get("Content-Type", JSON).split(";")[0].strip().lower() or JSON
        if content_type == PROTOBUF and allow_protobuf:
            return raw
        if content_type in (JSON, "*/*", "text/plain"):
            try:
                return json.loads(raw) if raw else None
            except (ValueError, UnicodeDecodeError) as exc:
                raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc
        if content_type in ("application/yaml", "application/x-yaml", "text/yaml"):
            try:
                return yaml.safe_load(raw) if raw else None
            except yaml.YAMLError as exc:
                raise errors.bad_request(f"error converting YAML to JSON: {exc}") from exc
        raise errors.unsupported_media_type(content_type, _ACCEPTED_BODY_TYPES)

    def _dry_run(self, request: web.Request) -> bool:
        values = request.query.getall("dryRun", [])
        for value in values:
            if value != "All":
                raise errors.bad_request(f'Invalid dryRun value "{value}": only "All" is supported')
        return bool(values)

    async def _verb_create(self, request: web.Request, target: _Target, user: UserInfo) -> web.StreamResponse:
        kind = target.kind
        if target.subresource:
            return await self._create_subresource(request, target, user)
        if kind.kind == "SelfSubjectAccessReview":
            return await self._self_subject_access_review(request, user)
        if kind.kind == "TokenReview":
            return await self._token_review(request)
        if kind.kind == "Binding":
            body = await self._decode_body(request)
            name = ((body or {}).get("metadata") or {}).get("name", "")
            return await self._bind(request, target.namespace, name, body, user)
        body = await self._decode_body(request)
        entry = await self.registry.create(kind, target.namespace, body, user, dry_run=self._dry_run(request))
        return self._render(request, kind, entry, 201)

    async def _verb_update(self, request: web.Request, target: _Target, user: UserInfo) -> web.StreamResponse:
        kind = target.kind
        body = await self._decode_body(request)
        dry_run = self._dry_run(request)
        if target.subresource == "scale":
            return await self._update_scale(target, lambda _scale: body, user, dry_run)
        subresource = "" if target.subresource == "finalize" else target.subresource
        entry = await self.registry.update(
            kind, target.namespace, target.name, body, user, subresource=subresource, dry_run=dry_run
        )
        return self._render(request, kind, entry)

    async def _verb_patch(self, request: web.Request, target: _Target, user: UserInfo) -> web.StreamResponse:
        kind = target.kind
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type not in _PATCH_TYPES:
            raise errors.unsupported_media_type(content_type, ", ".join(_PATCH_TYPES))
        raw = await self._read_body(request)
        try:
            patch = yaml.safe_load(raw) if content_type.endswith("yaml") else json.loads(raw)
        except (ValueError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"error decoding patch: {exc}") from exc
        dry_run = self._dry_run(request)
        if content_type == "application/json-patch+json":
            if not isinstance(patch, list):
                raise errors.bad_request("json patch must be a list of operations")
        elif not isinstance(patch, dict):
            raise errors.bad_request("patch body must be a JSON object")

        def apply(obj: Obj) -> Obj:
            try:
                if content_type == "application/json-patch+json":
                    result = apply_json_patch(obj, patch)
                elif content_type == "application/merge-patch+json":
                    result = apply_merge_patch(obj, patch)
                else:
                    result = apply_strategic_merge_patch(obj, patch, kind.kind)
            except PatchError as exc:
                raise errors.APIError(
                    422, "Invalid", f"the server rejected our request due to an error in our request: {exc}"
                ) from exc
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise errors.APIError(
                    422, "Invalid", f"the server rejected our request due to an error in our request: {exc!r}"
                ) from exc
            if not isinstance(result, dict):
                raise errors.bad_request("the patch does not produce an object")
            return result

        if target.subresource == "scale":
            return await self._update_scale(target, apply, user, dry_run)
        if (
            content_type == "application/apply-patch+yaml"
            and self.registry.get_object(kind, target.namespace, target.name) is None
        ):
            # Server-side apply of a new object creates it (field ownership is not tracked).
            entry = await self.registry.create(kind, target.namespace, patch, user, dry_run=dry_run)
            return self._render(request, kind, entry, 201)
        entry = await self.registry.modify(
            kind, target.namespace, target.name, apply, user, subresource=target.subresource, dry_run=dry_run
        )
        return self._render(request, kind, entry)

    async def _delete_options(self, request: web.Request) -> DeleteOptions:
        body = await self._decode_body(request) if request.can_read_body else None
        if body is not None and not isinstance(body, dict):
            raise errors.bad_request("DeleteOptions must be a JSON object")
        return DeleteOptions.parse(body, dict(request.query))

    async def _verb_delete(self, request: web.Request, target: _Target, user: UserInfo) -> web.StreamResponse:
        options = await self._delete_options(request)
        entry, _gone = await self.registry.delete(
            target.kind, target.namespace, target.name, options, user, dry_run=self._dry_run(request)
        )
        return _json_response(entry.raw)

    async def _verb_deletecollection(
        self, request: web.Request, target: _Target, user: UserInfo
    ) -> web.StreamResponse:
        kind = target.kind
        options = await self._delete_options(request)
        deleted = await self.registry.delete_collection(
            kind,
            target.namespace or None,
            self._predicate(request),
            options,
            user,
            dry_run=self._dry_run(request),
        )
        head = encode(
            {
                "kind": kind.list_kind,
                "apiVersion": kind.api_version,
                "metadata": {"resourceVersion": str(self.registry.revision)},
            }
        )
        return _json_response(head[:-1] + b',"items":[' + b",".join(e.raw for e in deleted) + b"]}")

    # --- subresources and virtual kinds -----------------------------------------------------------

    async def _create_subresource(
        self, request: web.Request, target: _Target, user: UserInfo
    ) -> web.StreamResponse:
        body = await self._decode_body(request)
        if target.subresource == "binding":
            return await self._bind(request, target.namespace, target.name, body, user)
        if target.subresource == "eviction":
            options = DeleteOptions.parse((body or {}).get("deleteOptions"), {})
            await self.registry.delete(
                target.kind, target.namespace, target.name, options, user, dry_run=self._dry_run(request)
            )
            return _json_response(_SUCCESS_CREATED, 201)
        if target.subresource == "token":
            return self._token_request(target, body)
        raise errors.method_not_allowed()

    async def _bind(
        self, request: web.Request, namespace: str, name: str, body: Any, user: UserInfo
    ) -> web.Response:
        if not isinstance(body, dict):
            raise errors.bad_request("Binding must be a JSON object")
        node = ((body.get("target") or {}).get("name")) or ""
        if not name or not node:
            raise errors.invalid(
                "Binding",
                name,
                "",
                [{"reason": "FieldValueRequired", "message": "Required value", "field": "target.name"}],
            )
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        pods = self.kinds.resource("", "v1", "pods")
        assert pods is not None

        def bind(pod: Obj) -> Obj:
            spec = pod.setdefault("spec", {})
            if spec.get("nodeName"):
                raise errors.conflict(
                    "pods/binding", name, "", f'pod {name} is already assigned to node "{spec["nodeName"]}"'
                )
            if pod["metadata"].get("deletionTimestamp"):
                raise errors.conflict(
                    "pods/binding", name, "", f"pod {name} is being deleted, cannot be assigned to a host"
                )
            spec["nodeName"] = node
            if annotations:
                pod["metadata"].setdefault("annotations", {}).update(annotations)
            status = pod.setdefault("status", {})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": now_rfc3339(),
                }
            )
            status["conditions"] = conditions
            return pod

        # Binding writes spec and status together, so it bypasses the status/spec split of updates.
        await self.registry.modify(
            pods, namespace, name, bind, user, subresource="binding", dry_run=self._dry_run(request)
        )
        return _json_response(_SUCCESS_CREATED, 201)

    def _token_request(self, target: _Target, body: Any) -> web.Response:
        account = self.registry.get(target.kind, target.namespace, target.name)
        spec = (body or {}).get("spec") or {}
        seconds = int(spec.get("expirationSeconds") or 3600)
        audiences = spec.get("audiences") or None
        token = self.signer.issue(
            target.namespace,
            target.name,
            account.obj["metadata"].get("uid", ""),
            expiration_seconds=seconds,
            **({"audiences": audiences} if audiences else {}),
        )
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)
        result = {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": target.name, "namespace": target.namespace, "creationTimestamp": None},
            "spec": {
                "audiences": audiences or [],
                "expirationSeconds": seconds,
                "boundObjectRef": spec.get("boundObjectRef"),
            },
            "status": {"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")},
        }
        return _json_response(result, 201)

    async def _self_subject_access_review(self, request: web.Request, user: UserInfo) -> web.Response:
        body = await self._decode_body(request, allow_protobuf=True)
        if isinstance(body, bytes):
            if decode_self_subject_access_review is None:
                raise errors.unsupported_media_type(PROTOBUF, JSON)
            try:
                body = decode_self_subject_access_review(body)
            except Exception as exc:  # any malformed protobuf is the client's mistake
                raise errors.bad_request(f"unable to decode SelfSubjectAccessReview: {exc}") from exc
        if not isinstance(body, dict):
            raise errors.bad_request("SelfSubjectAccessReview must be an object")
        spec = body.get("spec") or {}
        resource = spec.get("resourceAttributes")
        if resource:
            attributes = Attributes(
                resource.get("verb", ""),
                resource.get("group", ""),
                resource.get("resource", ""),
                resource.get("subresource", ""),
                resource.get("namespace", ""),
                resource.get("name", ""),
            )
        else:
            non_resource = spec.get("nonResourceAttributes") or {}
            attributes = Attributes(non_resource.get("verb", ""), path=non_resource.get("path", ""))
        allowed = self.config.authorizer.allowed(user, attributes)
        result = {
            "kind": "SelfSubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": {"allowed": allowed, **({} if allowed else {"reason": "no rule allows it"})},
        }
        return _json_response(result, 201)

    async def _token_review(self, request: web.Request) -> web.Response:
        body = await self._decode_body(request)
        spec = (body or {}).get("spec") or {}
        user = self.signer.verify(str(spec.get("token", "")))
        status: Obj = {"authenticated": user is not None}
        if user is not None:
            status["user"] = user.as_dict()
            status["audiences"] = spec.get("audiences") or ["https://kubernetes.default.svc.cluster.local"]
        else:
            status["error"] = "invalid bearer token"
        result = {
            "kind": "TokenReview",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }
        return _json_response(result, 201)

    def _scale_of(self, kind: Kind, obj: Obj) -> Obj:
        spec_path, status_path, selector_path = SCALE_PATHS[kind.kind]
        meta = obj["metadata"]
        status: Obj = {"replicas": _get_path(obj, status_path) or 0}
        selector = _get_path(obj, selector_path)
        if selector:
            status["selector"] = selector
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace", ""),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
                "creationTimestamp": meta.get("creationTimestamp"),
            },
            "spec": {"replicas": _get_path(obj, spec_path) or 0},
            "status": status,
        }

    async def _update_scale(
        self, target: _Target, change: Any, user: UserInfo, dry_run: bool
    ) -> web.Response:
        kind = target.kind
        spec_path = SCALE_PATHS[kind.kind][0]
        new_scale: list[Obj] = []

        def rescale(obj: Obj) -> Obj:
            scale = change(self._scale_of(kind, obj))
            if not isinstance(scale, dict):
                raise errors.bad_request("Scale must be a JSON object")
            replicas = (scale.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                raise errors.invalid(
                    "Scale",
                    target.name,
                    "autoscaling",
                    [
                        {
                            "reason": "FieldValueInvalid",
                            "message": "must be greater than or equal to 0",
                            "field": "spec.replicas",
                        }
                    ],
                )
            _set_path(obj, spec_path, replicas)
            new_scale.append(scale)
            return obj

        entry = await self.registry.modify(
            kind, target.namespace, target.name, rescale, user, dry_run=dry_run
        )
        return _json_response(self._scale_of(kind, entry.obj))

    async def _pod_log(self, request: web.Request, entry: Entry) -> web.StreamResponse:
        pod = entry.obj
        name = pod["metadata"]["name"]
        containers = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
        container = request.query.get("container", "")
        if not container:
            if len(containers) != 1:
                raise errors.bad_request(
                    f"a container name must be specified for pod {name}, "
                    f"choose one of: [{' '.join(containers)}]"
                )
            container = containers[0]
        init = [c.get("name", "") for c in (pod.get("spec") or {}).get("initContainers") or []]
        if container not in containers and container not in init:
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        node = (pod.get("spec") or {}).get("nodeName")
        source = self.config.log_source
        if not node or source is None:
            raise errors.bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            )
        options = LogOptions(
            container,
            _query_flag(request.query, "follow"),
            _query_flag(request.query, "previous"),
            _parse_int(request.query, "tailLines"),
            _query_flag(request.query, "timestamps"),
            _parse_int(request.query, "sinceSeconds"),
            _parse_int(request.query, "limitBytes"),
        )
        stream = source.stream(pod, options)
        first = await anext(stream, b"")  # errors before any byte become a Status
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            await response.write(first)
            async for chunk in stream:
                await response.write(chunk)
            await response.write_eof()
        return response
