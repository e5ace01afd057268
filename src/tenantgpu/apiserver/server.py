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
import secrets
import ssl
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml
from aiohttp import web

from tenantgpu.apiserver import discovery, errors, fielderrors, health, openapi, podexec
from tenantgpu.apiserver.admission import (
    AdmissionChain,
    AdmissionPlugin,
    DefaultStorageClass,
    NamespaceLifecycle,
    PersistentVolumeClaimResize,
    PriorityAdmission,
    RuntimeClassAdmission,
    StorageObjectInUseProtection,
)
from tenantgpu.apiserver.auth import (
    ANONYMOUS_USER,
    AUTHENTICATED,
    Attributes,
    Authenticator,
    ImpersonationError,
    SharedClientTrust,
    TokenSigner,
    UserInfo,
    impersonation,
)
from tenantgpu.apiserver.authorization import Authorizer
from tenantgpu.apiserver.bootstrap import (
    BOOTSTRAP_CONTROLLER_HOOK,
    BOOTSTRAP_ROLES_HOOK,
    PRIORITY_CLASSES_HOOK,
    KubernetesService,
)
from tenantgpu.apiserver.bootstraptoken import SECRET_NAMESPACE, BootstrapTokenAuthenticator
from tenantgpu.apiserver.certificates import (
    CertificateApproval,
    CertificateSigning,
    CertificateSubjectRestriction,
)
from tenantgpu.apiserver.defaults import SYSTEM_PRIORITIES
from tenantgpu.apiserver.fieldmanager import FieldManager, manager_name
from tenantgpu.apiserver.fieldtree import (
    FieldTree,
    FieldTypeError,
    Finding,
    checked_kinds,
    pointer_segments,
    unknown_fields_message,
)
from tenantgpu.apiserver.fieldversions import LATEST
from tenantgpu.apiserver.hooks import Egress, NodeProxySource, NoEgress, PodExecSource, PodLogSource
from tenantgpu.apiserver.http1 import ChunkedStream, HTTPServer, start_stream
from tenantgpu.apiserver.httputil import (
    ACCEPTED_BODY_TYPES,
    ANONYMOUS_PATHS,
    JSON,
    PATCH_TYPES,
    PROTOBUF,
    Target,
    json_response,
    query_flag,
    query_int,
    status_response,
    wants_table,
)
from tenantgpu.apiserver.jsoncodec import loads
from tenantgpu.apiserver.kamajischemas import crd_schema, object_meta_schema
from tenantgpu.apiserver.kinds import CUSTOM_RESOURCE_DEFINITION, VIRTUAL_KINDS, Kind, KindTable, kind_table
from tenantgpu.apiserver.limitranger import LimitRanger
from tenantgpu.apiserver.metrics import APIMetrics
from tenantgpu.apiserver.openapi_v2 import OPENAPI_V2_CONTENT_TYPE, openapi_v2_protobuf
from tenantgpu.apiserver.patch import (
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
    patched_fields,
)
from tenantgpu.apiserver.pki import ServerPKI, admin_kubeconfig, render_kubeconfig
from tenantgpu.apiserver.protobuf_bodies import ProtobufBodyError, decode_object
from tenantgpu.apiserver.quota import QuotaController, QuotaUsage, ResourceQuotaAdmission
from tenantgpu.apiserver.rbacwrites import RBACEscalation
from tenantgpu.apiserver.registry import DeleteOptions, Registry
from tenantgpu.apiserver.selectors import (
    FieldRequirement,
    SelectorError,
    check_field_selector,
    exact_name,
    field_requirements,
    parse_field_selector,
    parse_label_selector,
)
from tenantgpu.apiserver.serviceaccount import ServiceAccountAdmission
from tenantgpu.apiserver.serviceips import DEFAULT_SERVICE_CIDR, ServiceNetwork
from tenantgpu.apiserver.storage import Datastore
from tenantgpu.apiserver.structural import prune, prune_at
from tenantgpu.apiserver.subresources import SubresourceHandlers
from tenantgpu.apiserver.tables import to_table, watch_event_table
from tenantgpu.apiserver.watchcache import Entry, Event, Predicate, Watcher, encode
from tenantgpu.apiserver.webhooks import WebhookAdmission
from tenantgpu.inprocesswatch import IN_PROCESS_HEADER, InProcessWatch, InProcessWatches

log = logging.getLogger(__name__)

Obj = dict[str, Any]


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
    # where `url` webhooks are dialled from (None: straight from this process)
    control_plane_egress: Egress | None = None
    log_source: PodLogSource | None = None
    exec_source: PodExecSource | None = None
    node_proxy: NodeProxySource | None = None
    # Other CAs accepted at the TLS layer, so their certificates get a clean 401 rather than a failed
    # handshake (the lab passes every tenant's CA); users always come from this server's own CA.
    trusted_client_cas: Sequence[bytes] = ()
    # Or share one trust among all servers of a process: each adds its CA, all accept all at TLS level.
    client_trust: SharedClientTrust | None = None
    admission_plugins: Sequence[AdmissionPlugin] = ()
    max_body_bytes: int = 3 * 1024 * 1024
    watch_window: int = 1000
    # kube-apiserver's `--authorization-mode=Node,RBAC`: system:masters may do anything, a kubelet what the
    # Node authorizer allows it, everyone what the stored RBAC objects grant.
    authorizer: Authorizer = field(default_factory=Authorizer)
    # Services' cluster IPs come from here (Kamaji's `networkProfile.serviceCidr`).
    service_cidr: str = DEFAULT_SERVICE_CIDR
    # kube's ServiceAccount admission plugin, which refuses pods until a controller-manager has made their
    # namespace's `default` account: on for tenants, off for a bare server that runs no controllers.
    service_account_admission: bool = False


class _StreamSink:
    """A watch's events written straight to its streamed response, as lines of JSON."""

    __slots__ = ("stream",)

    def __init__(self, stream: ChunkedStream) -> None:
        self.stream = stream

    def take(self, event: Event) -> bool:
        return self.stream.hold(event.line())


class _InProcessSink:
    """A watch's events handed to a client of this process, as the stored objects themselves."""

    __slots__ = ("watch",)

    def __init__(self, watch: InProcessWatch) -> None:
        self.watch = watch

    def take(self, event: Event) -> bool:
        return self.watch.put(event.type, event.entry.obj)


def _warning_value(text: str) -> str:
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


FIELD_MANAGER_MAX_LENGTH = 128  # kube's FieldManagerMaxLength, in bytes


def _field_manager_causes(name: str) -> list[dict[str, str]]:
    """kube's ValidateFieldManager: at most 128 bytes, and only printable characters (each named with
    its byte offset, as Go's range over a string counts)."""
    causes = []
    if len(name.encode()) > FIELD_MANAGER_MAX_LENGTH:
        causes.append(fielderrors.too_long("fieldManager", FIELD_MANAGER_MAX_LENGTH).to_status_cause())
    offset = 0
    for char in name:
        if not char.isprintable():
            detail = f"invalid character U+{ord(char):04X} (at position {offset})"
            message = f"Invalid value: {fielderrors.go_quote(name)}: {detail}"
            causes.append({"reason": "FieldValueInvalid", "message": message, "field": "fieldManager"})
        offset += len(char.encode())
    return causes


def _manager(request: web.Request, options: str = "") -> str:
    """The request's field manager; with `options` (CreateOptions, UpdateOptions), a bad `fieldManager`
    is kube's 422 for those options."""
    given = request.query.get("fieldManager") or ""
    if options and given:
        causes = _field_manager_causes(given)
        if causes:
            raise errors.invalid(options, "", "meta.k8s.io", causes)
    return manager_name(given or None, request.headers.get("User-Agent", ""))


def _patch_options(request: web.Request, applying: bool) -> bool:
    """kube's PatchOptions checks: an apply needs a fieldManager; only an apply may force; the field
    manager's name. The force."""
    given = request.query.get("force")
    causes = _field_manager_causes(request.query.get("fieldManager") or "")
    if applying and not request.query.get("fieldManager"):
        causes.insert(
            0,
            {
                "reason": "FieldValueRequired",
                "message": "Required value: is required for apply patch",
                "field": "fieldManager",
            },
        )
    if causes:
        raise errors.invalid("PatchOptions", "", "meta.k8s.io", causes)
    if given is None:
        return False
    if not applying:
        raise errors.invalid(
            "PatchOptions",
            "",
            "meta.k8s.io",
            [
                {
                    "reason": "FieldValueForbidden",
                    "message": "Forbidden: may not be specified for non-apply patch",
                    "field": "force",
                }
            ],
        )
    if given.lower() not in ("true", "false", "1", "0", ""):
        raise errors.bad_request(f'invalid boolean value "{given}" for parameter force')
    return given.lower() in ("true", "1")


def _warned(response: web.Response, warnings: list[str]) -> web.Response:
    """Adds a `Warning: 299 - "…"` header per warning, which kubectl prints as `Warning: …`."""
    for text in warnings:
        response.headers.add("Warning", _warning_value(text))
    return response


def _strategy_warnings(kind: Kind, obj: Obj, old: Obj | None) -> list[str]:
    """The kind's strategy's WarningsOnCreate (`old` None) or WarningsOnUpdate, after the write's own."""
    warn = kind.strategy.warnings
    return [] if warn is None else warn(obj, old)


def _empty_pod_overhead(kind: Kind, body: Any) -> bool:
    """Whether a pod's create says `overhead: {}`. kube decodes that into an empty map that is not nil,
    which its RuntimeClass plugin refuses unless a class gives the pod an overhead; the map is gone only
    once the pod is encoded. The write's omitempty pruning would drop it first, so it is put back."""
    if kind.group or kind.kind != "Pod" or not isinstance(body, dict):
        return False
    spec = body.get("spec")
    return isinstance(spec, dict) and spec.get("overhead") == {}


# kube serves custom resources without strategic merge patch, which needs Go structs.
CUSTOM_RESOURCE_PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
)


def _json_patch_findings(
    body: list[Any], prune_at: Callable[[list[str], Any], tuple[bool, list[Finding]]]
) -> list[Finding]:
    """The unknown fields a JSON patch writes, by `prune_at` (its operations' values are pruned); an
    operation on a field the kind lacks is dropped, as kube's decoding drops the field."""
    findings: list[Finding] = []
    for operation in list(body or []):
        if not isinstance(operation, dict) or operation.get("op") not in ("add", "replace"):
            continue
        pointer = list(pointer_segments(str(operation.get("path", ""))))
        exists, found = prune_at(pointer, operation.get("value"))
        findings += found
        if not exists:
            body.remove(operation)
    return findings


def _prune_custom(schema: Any, body: Any, patch_type: str) -> list[Finding]:
    """A custom resource's unknown fields in a write's body (removed from it), by its CRD's schema."""
    meta = object_meta_schema()
    if patch_type != "application/json-patch+json":
        return [Finding(path) for path in prune(schema, body, metadata=meta)]

    def at(pointer: list[str], value: Any) -> tuple[bool, list[Finding]]:
        exists, paths = prune_at(schema, pointer, value, metadata=meta)
        return exists, [Finding(path) for path in paths]

    return _json_patch_findings(body, at)


def _advertised(host: str) -> str:
    """The address `default/kubernetes` names: the one served on, or loopback when serving on all."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def _minor_release(git_version: str) -> int:
    """The minor release, 31 of `v1.31.4`; a version that cannot be read knows every field."""
    minor = _version_info(git_version)["minor"]
    return int(minor) if minor.isdigit() else LATEST


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


class APIServer(SubresourceHandlers):
    """One Kubernetes-compatible API server: `await start()`, then talk to `url` with `ca_pem`."""

    def __init__(self, config: APIServerConfig) -> None:
        self.config = config
        self.kinds: KindTable = kind_table(config.extra_kinds, _minor_release(config.kubernetes_version))
        self.signer = TokenSigner(config.pki.service_account_key_pem)
        self._proxy_rng = random.Random()
        self._authenticator = Authenticator(
            config.pki.ca.cert_pem,
            self.signer,
            check_issuer=bool(config.trusted_client_cas) or config.client_trust is not None,
            # kube-apiserver's --enable-bootstrap-token-auth=true, as Kamaji (and kubeadm) run it
            tokens=(BootstrapTokenAuthenticator(self._token_secret),),
        )
        self._webhook_lists: dict[bool, tuple[int, list[Obj]]] = {}
        self.webhooks = WebhookAdmission(
            self._webhook_configurations, self._namespace_object, config.egress, config.control_plane_egress
        )
        # kube's order: LimitRanger's defaults come before the mutating webhooks (HAMi's sees them), its
        # limits are checked on what the webhooks left, before the validating webhooks and the quota.
        # RuntimeClass likewise: its overhead and scheduling go in before the mutating webhooks, its check
        # of the overhead comes after them (HAMi's may name a class), after PersistentVolumeClaimResize.
        # The three certificate plugins (validating only) follow RuntimeClass, as in kube's plugin order.
        accounts = [
            ServiceAccountAdmission(self._service_account, self._generate_name, mutating=mutating)
            for mutating in ((True, False) if config.service_account_admission else ())
        ]
        # kube's RBAC storage checks a write of a role or binding for escalation before admission
        self._rbac_writes = RBACEscalation(config.authorizer)
        self.admission = AdmissionChain(
            [
                self._rbac_writes,
                NamespaceLifecycle(self._namespace_object),
                LimitRanger(self._limit_ranges, mutating=True),
                *accounts[:1],
                PriorityAdmission(self._priority_class, self._default_priority_class),
                DefaultStorageClass(self._storage_classes),
                StorageObjectInUseProtection(),
                RuntimeClassAdmission(self._runtime_class, mutating=True),
                *config.admission_plugins,
                LimitRanger(self._limit_ranges, mutating=False),
                *accounts[1:],
                PersistentVolumeClaimResize(self._storage_class),
                RuntimeClassAdmission(self._runtime_class, mutating=False),
                CertificateApproval(self._signer_allowed),
                CertificateSigning(self._signer_allowed),
                CertificateSubjectRestriction(),
                *self.webhooks.plugins(),
            ]
        )
        self.registry = Registry(
            self.kinds,
            config.datastore,
            config.key_prefix or config.name,
            self.admission,
            window=config.watch_window,
            service_network=ServiceNetwork(config.service_cidr),
            minor=_minor_release(config.kubernetes_version),
        )
        config.authorizer.attach(self.registry)
        self._webhook_kinds = {
            mutating: self.kinds.resource("admissionregistration.k8s.io", "v1", plural)
            for mutating, plural in (
                (True, "mutatingwebhookconfigurations"),
                (False, "validatingwebhookconfigurations"),
            )
        }
        quota_usage = QuotaUsage(self.registry)
        self.admission.append(ResourceQuotaAdmission(quota_usage))
        self._quota_controller = QuotaController(self.registry, quota_usage)
        self.metrics = APIMetrics(self._storage_counts)
        self._http: HTTPServer | None = None
        self._port = config.port
        self._version = encode(_version_info(config.kubernetes_version))
        self._docs: dict[str, bytes] = {}
        self._users: weakref.WeakKeyDictionary[Any, UserInfo | bool | None] = weakref.WeakKeyDictionary()
        # The loopback listener (plain HTTP on 127.0.0.1) and the tokens it accepts, each minted in memory
        # for a component of this process by `loopback_config`.
        self._loopback_port = 0
        self._loopback_users: dict[str, UserInfo] = {}
        # The watches of this process's own components that take the stored objects as they are.
        self.in_process_watches = InProcessWatches()
        self._watch_tasks: set[asyncio.Task[Any]] = set()
        self._kubernetes_service: KubernetesService | None = None
        self._stopping = False
        self._fields = FieldTree(checked_kinds())
        self.field_manager = FieldManager(self._fields)
        self.registry.field_manager = self.field_manager
        # The fields of built-in kinds are those of the tenant's release (fieldversions.py).
        self._minor = self.registry.minor

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.registry.load()
        self._quota_controller.start()
        # Plain requests are served by our HTTP/1.1 protocol (`http1`); a connection switching protocols
        # (exec) goes to aiohttp's low-level server, whose one handler is the same `_handle`.
        limit = self.config.max_body_bytes

        def make_request(message, payload, protocol, writer, task):  # type: ignore[no-untyped-def]
            return web.BaseRequest(message, payload, protocol, writer, task, loop, client_max_size=limit)

        loop = asyncio.get_running_loop()
        fallback = web.Server(
            self._handle,  # type: ignore[arg-type]
            request_factory=make_request,
            handler_cancellation=True,
            access_log=None,
        )
        # A watch's events go out once the commit that brought them has run (ChunkedStream.hold).
        self._http = HTTPServer(self._handle, fallback, limit, defer=self.config.datastore.after_commit)
        try:
            self._port = await self._http.listen(
                self.config.host, self.config.port, self._ssl_context(), backlog=128
            )
        except BaseException:
            # e.g. the port is taken: leave nothing running, so the caller may retry elsewhere.
            await self.stop()
            raise
        # kube-apiserver's loopback client, as the components that run in this process reach it: the same
        # REST API and watches on 127.0.0.1 without TLS, which would cost two TLS sessions a watch in one
        # process (some 0.14 MiB each), authenticated by a token that never leaves the process.
        self._loopback_port = await self._http.listen("127.0.0.1", 0, None, backlog=16)
        self._docs.clear()
        self._kubernetes_service = KubernetesService(
            self.registry, _advertised(self.config.host), self._port, minor=self._minor
        )
        self._kubernetes_service.start()

    def _health_checks(self) -> list[health.Check]:
        """kube-apiserver's checks, in its order, answered from this server's state. The datastore is
        in this process: when it fails, requests fail, so `etcd` passes while the server serves."""
        service = self._kubernetes_service
        finished = service.finished if service is not None else set()

        def hook(name: str) -> health.Check:
            return health.Check(name, lambda: name in finished)

        return [
            health.Check("ping", lambda: True),
            health.Check("log", lambda: True),
            health.Check("etcd", lambda: True),
            health.Check("etcd-readiness", lambda: True, readyz_only=True),
            health.Check("informer-sync", lambda: self._http is not None, readyz_only=True),
            hook(BOOTSTRAP_ROLES_HOOK),
            hook(PRIORITY_CLASSES_HOOK),
            hook(BOOTSTRAP_CONTROLLER_HOOK),
            health.Check(
                "shutdown", lambda: not self._stopping, readyz_only=True, failure="process is shutting down"
            ),
        ]

    async def stop(self) -> None:
        self._stopping = True
        if self._kubernetes_service is not None:
            await self._kubernetes_service.stop()
            self._kubernetes_service = None
        await self._quota_controller.stop()
        self.registry.close()
        await self.webhooks.close()
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def delete_storage(self) -> None:
        """Removes every object of this server from the datastore (a deleted tenant); call after `stop()`."""
        await self.config.datastore.delete_prefix(self.registry.prefix + "/")

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
        trust = self.config.client_trust
        if trust is not None:
            # Our own CA, too, is read from the shared directory only: OpenSSL consults the directory for
            # an issuer name it has none of in memory, and another tenant's CA may carry our CA's name
            # (a TenantControlPlane of our name in another namespace).
            trust.add_ca(pki.ca.cert_pem)
            trust.attach(context)
        cas = [*([] if trust is not None else [pki.ca.cert_pem]), *self.config.trusted_client_cas]
        if cas:
            context.load_verify_locations(cadata=b"".join(cas).decode())
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

    def loopback(self, user: str, groups: Sequence[str] = ()) -> tuple[str, str]:
        """Where a component of this process reaches the server, and its bearer token: the loopback
        listener's URL and a token minted here for `user` (in `groups`). Only such tokens are accepted
        there."""
        token = secrets.token_urlsafe(32)
        self._loopback_users[token] = UserInfo(user, (*groups, AUTHENTICATED))
        return f"http://127.0.0.1:{self._loopback_port}", token

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

    def _priority_class(self, name: str) -> Obj | None:
        kind = self.kinds.resource("scheduling.k8s.io", "v1", "priorityclasses")
        found = None if kind is None else self.registry.get_object(kind, "", name)
        if found is None and name in SYSTEM_PRIORITIES:
            # Known before the start-up hook has stored them, so a system pod is never refused.
            return {"metadata": {"name": name}, "value": SYSTEM_PRIORITIES[name]}
        return found

    def _default_priority_class(self) -> Obj | None:
        kind = self.kinds.resource("scheduling.k8s.io", "v1", "priorityclasses")
        if kind is None:
            return None
        return next(
            (e.obj for e in self.registry.cache(kind).objects.values() if e.obj.get("globalDefault")), None
        )

    def _storage_class(self, name: str) -> Obj | None:
        kind = self.kinds.resource("storage.k8s.io", "v1", "storageclasses")
        return None if kind is None else self.registry.get_object(kind, "", name)

    def _storage_classes(self) -> list[Obj]:
        kind = self.kinds.resource("storage.k8s.io", "v1", "storageclasses")
        return [] if kind is None else [e.obj for e in self.registry.cache(kind).objects.values()]

    def _signer_allowed(self, user: UserInfo, verb: str, signer: str) -> bool:
        """Whether `user` may `verb` (approve, sign) for `signer`, asked of the authorizer as kube's
        certificate plugins ask it: the `signers` resource of certificates.k8s.io, named the signer."""
        attributes = Attributes(verb, "certificates.k8s.io", "signers", name=signer)
        return self.config.authorizer.allowed(user, attributes)

    def _runtime_class(self, name: str) -> Obj | None:
        kind = self.kinds.resource("node.k8s.io", "v1", "runtimeclasses")
        return None if kind is None else self.registry.get_object(kind, "", name)

    def _service_account(self, namespace: str, name: str) -> Obj | None:
        kind = self.kinds.resource("", "v1", "serviceaccounts")
        assert kind is not None
        return self.registry.get_object(kind, namespace, name)

    def _token_secret(self, name: str) -> Obj | None:
        """A Secret of kube-system, for the bootstrap token authenticator."""
        kind = self.kinds.resource("", "v1", "secrets")
        assert kind is not None
        return self.registry.get_object(kind, SECRET_NAMESPACE, name)

    def _generate_name(self, prefix: str) -> str:
        return self.registry.generate_name(prefix)

    def _namespace_object(self, name: str) -> Obj | None:
        kind = self.kinds.resource("", "v1", "namespaces")
        assert kind is not None
        return self.registry.get_object(kind, "", name)

    def _limit_ranges(self, namespace: str) -> list[Obj]:
        kind = self.kinds.resource("", "v1", "limitranges")
        assert kind is not None
        return [entry.obj for entry in self.registry.list(kind, namespace)]  # by name; [] at once if none

    def _webhook_configurations(self, mutating: bool) -> list[Obj]:
        # Asked on every write: straight from the cache, and the same list while the cache is unchanged
        # (the webhook chain orders them by name and matches their rules once per list).
        kind = self._webhook_kinds[mutating]
        assert kind is not None
        cache = self.registry.cache(kind)
        held = self._webhook_lists.get(mutating)
        if held is None or held[0] != cache.changes:
            held = self._webhook_lists[mutating] = (cache.changes, [e.obj for e in cache.objects.values()])
        return held[1]

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
        ssl_object = None
        if transport is not None:
            # The TLS object lives exactly as long as the connection and, unlike uvloop's transport,
            # can be weakly referenced: one certificate check per connection, not per request.
            ssl_object = transport.get_extra_info("ssl_object")
            key = ssl_object if ssl_object is not None else transport
            try:
                cert_user = self._users[key]
            except (KeyError, TypeError):
                peercert = transport.get_extra_info("peercert")
                der = (
                    ssl_object.getpeercert(binary_form=True) if ssl_object is not None and peercert else None
                )
                cert_user = self._authenticator.from_certificate(peercert, der)
                with contextlib.suppress(TypeError):
                    self._users[key] = cert_user
        if isinstance(cert_user, UserInfo):
            return cert_user
        plain = transport is not None and ssl_object is None
        if header is not None:
            scheme, _, token = header.partition(" ")
            if plain:
                # the loopback listener serves only the tokens minted for this process's components
                loopback = self._loopback_users.get(token.strip()) if scheme.lower() == "bearer" else None
                if loopback is None:
                    raise errors.unauthorized()
                return loopback
            if scheme.lower() == "bearer" and token.strip():
                user = self._authenticator.from_token(token.strip())
                if user is None:
                    raise errors.unauthorized()
                return user
            raise errors.unauthorized()
        if cert_user is False or plain:
            raise errors.unauthorized()
        return None

    def _impersonate(self, request: web.Request, user: UserInfo | None) -> UserInfo:
        """`kubectl --as`: the request acts as the user its headers name, if its own user may
        impersonate that user (and those groups): kube's impersonation filter."""
        if user is None:
            raise errors.unauthorized()
        try:
            asked = impersonation(request.headers)
        except ImpersonationError as exc:
            raise errors.bad_request(str(exc)) from None
        if asked is None:
            return user
        authorizer = self.config.authorizer
        for group, checked, name in asked.checks:
            resource, _, subresource = checked.partition("/")  # userextras/<key>
            attributes = Attributes("impersonate", group, resource, subresource, "", name, request.path)
            if not authorizer.allowed(user, attributes):
                reason = authorizer.authorize(user, attributes)[1]
                raise errors.forbidden_request(
                    user.name, "impersonate", resource, group, "", name, subresource, reason
                )
        return asked.user

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        verb, resource = request.method.lower(), ""
        try:
            user = self._authenticate(request)
            headers = request.headers
            if (
                "Impersonate-User" in headers
                or "Impersonate-Group" in headers
                or "Impersonate-Uid" in headers
            ):
                user = self._impersonate(request, user)
            path = unquote(request.path).rstrip("/") or "/"
            if user is None and not any(path == p or path.startswith(p + "/") for p in ANONYMOUS_PATHS):
                # kube-apiserver's --anonymous-auth (on by default, and Kamaji leaves it): a request with
                # no credential at all is system:anonymous, for the authorizers to judge; a credential
                # that fails was refused above with 401.
                user = ANONYMOUS_USER
            response, verb, resource = await self._route(request, path, user)
        except errors.APIError as error:
            response = status_response(errors.worded_for(error, self._minor))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not take the server down; the client gets a Status
            log.exception("internal error serving %s %s", request.method, request.path)
            response = status_response(errors.internal(f"{type(exc).__name__}: {exc}"))
        self.metrics.observe(verb, resource, response.status, time.perf_counter() - started)
        return response

    def _authorize_path(self, user: UserInfo, verb: str, path: str) -> None:
        """A non-resource request (`/version`, `/api`, …) as the authorizers judge it; 403 with their
        reason when none allows it."""
        asked = Attributes(verb=verb, path=path)
        if not self.config.authorizer.allowed(user, asked):
            reason = self.config.authorizer.authorize(user, asked)[1]
            raise errors.forbidden_path(user.name, verb, path, reason)

    async def _route(
        self, request: web.Request, path: str, user: UserInfo | None
    ) -> tuple[web.StreamResponse, str, str]:
        segments = path.strip("/").split("/") if path != "/" else []
        head = segments[0] if segments else ""
        if head in ("api", "apis"):
            assert user is not None
            return await self._api(request, segments, user)
        if user is not None:
            self._authorize_path(user, request.method.lower(), path)
        if request.method != "GET":
            raise errors.method_not_allowed()
        if head == "version":
            return json_response(self._version), "get", "version"
        if head in health.ENDPOINTS:
            query = {key: request.query.getall(key) for key in request.query}
            found = health.answer(head, self._health_checks(), segments[1:], query)
            if found is None:
                raise errors.unknown_path()
            response = web.Response(
                status=found.status,
                text=found.text,
                content_type="text/plain",
                headers={"X-Content-Type-Options": "nosniff"},
            )
            return response, "get", head
        if head == "metrics":
            return (
                web.Response(
                    body=self.metrics.render(), headers={"Content-Type": "text/plain; version=0.0.4"}
                ),
                "get",
                "metrics",
            )
        if head == "openapi" and len(segments) >= 2 and segments[1] == "v3":
            return await self._openapi_v3(segments[2:]), "get", "openapi"
        if segments == ["openapi", "v2"]:
            return self._openapi_v2(request), "get", "openapi"
        if not segments:
            paths = ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/metrics", "/readyz", "/version"]
            checks = self._health_checks()
            # as kube's root lists every check of every health endpoint on its own
            paths += [f"/{e}/{c.name}" for e in health.ENDPOINTS for c in health.endpoint_checks(e, checks)]
            for group, versions in self.kinds.group_versions().items():
                if group:
                    paths += [f"/apis/{group}", *(f"/apis/{group}/{v}" for v in versions)]
            return json_response({"paths": sorted(paths)}), "get", ""
        raise errors.unknown_path()

    def _openapi_kinds(self) -> dict[str, list[openapi.KindSchemaInfo]]:
        """The served kinds of each group-version, keyed as in the root index (`v1`, `apps/v1`)."""
        found: dict[str, list[openapi.KindSchemaInfo]] = {}
        for group, versions in self.kinds.group_versions().items():
            for version in versions:
                found[f"{group}/{version}" if group else version] = [
                    openapi.KindSchemaInfo(k.group, k.version, k.kind, k.namespaced, k.plural)
                    for k in self.kinds.in_group_version(group, version)
                ]
        return found

    def _openapi_v3_document(self, path: str) -> bytes:
        """`/openapi/v3` (path "") or one group-version's document (`api/v1`, `apis/apps/v1`)."""
        by_group_version = self._openapi_kinds()
        if not path:
            sources = {
                gv: openapi.openapi_v3_sources(gv, infos, self._minor)
                for gv, infos in by_group_version.items()
            }
            return encode(openapi.openapi_v3_root(list(by_group_version), documents=sources))
        for gv, infos in by_group_version.items():
            if openapi.group_version_path(gv) == path:
                return encode(
                    openapi.openapi_v3_group_version(infos[0].group, infos[0].version, infos, self._minor)
                )
        raise errors.unknown_path()

    def _openapi_v2(self, request: web.Request) -> web.Response:
        """Protobuf only: kubectl 1.27/1.28 validate with it, and a JSON body there breaks kubectl."""
        if "protobuf" not in request.headers.get("Accept", ""):
            raise errors.not_acceptable(OPENAPI_V2_CONTENT_TYPE)
        body = self._docs.get("openapi:v2")
        if body is None:
            infos = [
                openapi.KindSchemaInfo(k.group, k.version, k.kind, k.namespaced, k.plural) for k in self.kinds
            ]
            body = openapi_v2_protobuf(infos, version=self.config.kubernetes_version)
            self._docs["openapi:v2"] = body
        return web.Response(body=body, headers={"Content-Type": OPENAPI_V2_CONTENT_TYPE})

    async def _openapi_v3(self, rest: list[str]) -> web.Response:
        """Each document is built on its first request, then kept. Off the event loop: the first document
        that needs the client's models imports them, which takes most of a second."""
        path = "/".join(rest)
        doc = self._docs.get("openapi:" + path)
        if doc is None:
            doc = await asyncio.to_thread(self._openapi_v3_document, path)
            self._docs["openapi:" + path] = doc
        return json_response(doc)

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
            return json_response(doc, content_type=aggregated or JSON)
        if segments[0] == "api" and len(segments) == 2:
            group, version = "", segments[1]
        elif segments[0] == "apis" and len(segments) == 2:
            group_doc = discovery.api_group(self.kinds, segments[1])
            if group_doc is None:
                raise errors.unknown_path()
            return json_response(group_doc)
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
        return json_response(doc)

    def _target(self, segments: list[str]) -> Target:
        if segments[0] == "api":
            group, version, rest = "", segments[1], segments[2:]
        else:
            group, version, rest = segments[1], segments[2], segments[3:]
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            nested = self.kinds.resource(group, version, rest[2])
            if nested is not None and nested.namespaced:
                namespace, rest = rest[1], rest[2:]
        # `<name>/proxy/<path on the node>`: the rest of the path is the proxied one
        if not rest or (len(rest) > 3 and rest[2] != "proxy"):
            raise errors.unknown_path()
        kind = self.kinds.resource(group, version, rest[0])
        if kind is None:
            raise errors.unknown_path()
        name = rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else ""
        if subresource and kind.subresource(subresource) is None:
            raise errors.unknown_path()
        return Target(kind, namespace, name, subresource)

    async def _api(
        self, request: web.Request, segments: list[str], user: UserInfo
    ) -> tuple[web.StreamResponse, str, str]:
        if len(segments) <= 3 and not (segments[0] == "api" and len(segments) == 3):
            if request.method != "GET":
                raise errors.method_not_allowed()
            # discovery is a non-resource path: system:discovery grants it to authenticated users only
            self._authorize_path(user, "get", "/" + "/".join(segments))
            response = self._discovery(request, segments)
            if response is not None:
                return response, "get", "discovery"
        target = self._target(segments)
        kind = target.kind
        method = request.method
        query = request.query
        if method == "GET":
            verb = "get" if target.name else "watch" if query_flag(query, "watch") else "list"
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
            if kind is CUSTOM_RESOURCE_DEFINITION and not target.subresource:
                raise errors.method_not_allowed(
                    "tenantgpu serves no custom resources; the definitions listed are of the kinds it serves"
                )
            raise errors.method_not_allowed()
        name = target.name
        selector: tuple[FieldRequirement, ...] = ()
        if verb in ("list", "watch", "deletecollection") and "fieldSelector" in query:
            # kube's request info: the selector for authorizers, and a list or watch of one object by
            # `metadata.name` is a request for that name
            selector = field_requirements(query["fieldSelector"])
            if verb != "deletecollection":
                name = exact_name(selector)
        attributes = Attributes(
            verb, kind.group, kind.plural, target.subresource, target.namespace, name, request.path, selector
        )
        if not self.config.authorizer.allowed(user, attributes):
            reason = self.config.authorizer.authorize(user, attributes)[1]
            raise errors.forbidden_request(
                user.name, verb, kind.plural, kind.group, target.namespace, name, target.subresource, reason
            )
        if target.subresource == "proxy":
            return await self._proxy(request, target), verb, kind.plural
        handler = getattr(self, f"_verb_{verb}")
        deprecation = kind.deprecation_warnings(self._minor)
        if not deprecation:
            return await handler(request, target, user), verb, kind.plural
        try:
            response = await handler(request, target, user)
        except errors.APIError as error:  # kube warns on refusals too: the warning belongs to the route
            response = status_response(errors.worded_for(error, self._minor))
        if isinstance(response, web.Response) and not response.prepared:
            # the route's warning comes before those of the request (kube's AddWarningsHandler)
            later = response.headers.getall("Warning", [])
            response.headers.popall("Warning", None)
            _warned(response, deprecation)
            for value in later:
                response.headers.add("Warning", value)
        return response, verb, kind.plural

    # --- verbs ------------------------------------------------------------------------------------

    def _render(self, request: web.Request, kind: Kind, entry: Entry, status: int = 200) -> web.Response:
        if wants_table(request.headers.get("Accept", "")):
            table = self._table(kind, [entry.obj], request.query.get("includeObject", "Metadata"))
            table["metadata"] = {"resourceVersion": str(entry.revision)}
            return json_response(table, status)
        return json_response(entry.raw, status)

    def _table(self, kind: Kind, objects: list[Obj], include: str) -> Obj:
        try:
            return to_table(
                kind.kind, objects, include_object=include, now=dt.datetime.now(dt.UTC), minor=self._minor
            )
        except ValueError as exc:
            raise errors.bad_request(str(exc)) from exc

    async def _verb_get(self, request: web.Request, target: Target, user: UserInfo) -> web.StreamResponse:
        kind = target.kind
        entry = self.registry.get(kind, target.namespace, target.name)
        if target.subresource == "log":
            return await self._pod_log(request, entry)
        if target.subresource in podexec.STREAMS:
            return await self._pod_stream(request, target.subresource, entry)
        if target.subresource == "scale":
            return json_response(self._scale_of(kind, entry.obj))
        return self._render(request, kind, entry)

    def _predicate(self, request: web.Request, kind: Kind) -> Predicate | None:
        label_text = request.query.get("labelSelector", "")
        field_text = request.query.get("fieldSelector", "")
        try:
            labels = parse_label_selector(label_text) if label_text else None
            fields = parse_field_selector(field_text) if field_text else None
            if fields is not None:
                check_field_selector(kind.kind, fields)
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

    async def _verb_list(self, request: web.Request, target: Target, user: UserInfo) -> web.StreamResponse:
        kind = target.kind
        query = request.query
        revision = self.registry.revision
        entries = self.registry.list(kind, target.namespace or None, self._predicate(request, kind))
        limit = query_int(query, "limit")
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
        if wants_table(request.headers.get("Accept", "")):
            table = self._table(kind, [e.obj for e in entries], query.get("includeObject", "Metadata"))
            table["metadata"] = meta
            return json_response(table)
        head = encode({"kind": kind.list_kind, "apiVersion": kind.api_version, "metadata": meta})
        body = head[:-1] + b',"items":[' + b",".join(e.raw for e in entries) + b"]}"
        return json_response(body)

    @staticmethod
    def _sort_key(kind: Kind, obj: Obj) -> str:
        meta = obj["metadata"]
        return f"{meta.get('namespace', '')}/{meta['name']}" if kind.namespaced else meta["name"]

    def _stream_headers(self, kind: Kind) -> dict[str, str]:
        """A watch's headers, with the kind's deprecation warning: they go out before any event."""
        headers = {"Content-Type": JSON}
        for text in kind.deprecation_warnings(self._minor):
            headers["Warning"] = _warning_value(text)
        return headers

    async def _verb_watch(
        self, request: web.Request, target: Target, user: UserInfo
    ) -> web.StreamResponse | ChunkedStream:
        kind = target.kind
        query = request.query
        raw_version = query.get("resourceVersion", "")
        # The streaming-list form (client-go's WatchList): current objects first, then a bookmark.
        initial_events = query_flag(query, "sendInitialEvents")
        if raw_version in ("", "0") or initial_events:
            since = None
        else:
            try:
                since = int(raw_version)
            except ValueError as exc:
                raise errors.bad_request(f"invalid resource version: {raw_version!r}") from exc
        timeout = query_int(query, "timeoutSeconds")
        if timeout is None or timeout <= 0:
            timeout = random.randint(1800, 3600)
        bookmarks = query_flag(query, "allowWatchBookmarks")
        table = wants_table(request.headers.get("Accept", ""))
        include = query.get("includeObject", "Metadata")
        if include not in ("None", "Metadata", "Object"):
            raise errors.bad_request(f"includeObject must be one of None, Metadata, Object, not {include!r}")
        predicate = self._predicate(request, kind)
        field_text = query.get("fieldSelector", "")
        # the selector parsed already in _predicate; what it requires exactly indexes the watcher
        exact = {p: v for p, op, v in parse_field_selector(field_text).requirements if op in ("=", "==")}
        try:
            watcher, backlog = self.registry.watch(
                kind, target.namespace or None, predicate, since, required=exact.get if exact else None
            )
        except errors.APIError as error:
            if error.code != 410:
                raise
            # kube-apiserver answers a too-old version with 200 and one ERROR event, then ends the stream.
            response = await start_stream(request, 200, self._stream_headers(kind))
            await response.write(encode({"type": "ERROR", "object": error.status()}) + b"\n")
            await response.write_eof()
            return response

        local = self._in_process_watch(request) if not table else None
        if local is not None:
            # accepted before the headers go out: the client looks at it when they arrive
            local.accept(watcher.close, watcher.limit)
        deadline = time.monotonic() + timeout
        response = None
        try:
            response = await start_stream(request, 200, self._stream_headers(kind))
            if local is not None:
                await self._hand_over(
                    request, kind, watcher, backlog, local, deadline, bookmarks, initial_events
                )
            else:
                await self._write_events(
                    request,
                    kind,
                    watcher,
                    backlog,
                    response,
                    deadline,
                    bookmarks,
                    initial_events,
                    include if table else None,
                )
            watcher.sink = None
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            if local is not None:
                local.finish()
            self.registry.unwatch(kind, watcher)
        return response if response is not None else web.Response(status=200)  # the client left first

    async def _write_events(
        self,
        request: web.Request,
        kind: Kind,
        watcher: Watcher,
        backlog: list[Event],
        response: Any,
        deadline: float,
        bookmarks: bool,
        initial_events: bool,
        include: str | None,
    ) -> None:
        """A watch's events written to its streamed response, as lines of JSON (`include`: as a table's
        rows, with that much of each object)."""
        table = include is not None
        first_table = [True]

        def line(event: Event) -> bytes:
            if include is None:
                return event.line()
            # kube-apiserver sends the column definitions with the first event of a stream only.
            columns, first_table[0] = first_table[0], False
            rows = watch_event_table(
                event.type,
                kind.kind,
                event.entry.obj,
                now=dt.datetime.now(dt.UTC),
                include_object=include,
                include_columns=columns,
                minor=self._minor,
            )
            return encode(rows) + b"\n"

        chunk = b"".join(line(e) for e in backlog)
        if initial_events and not table:
            mark = self._bookmark(kind, initial_events_end=True)
            chunk += encode({"type": "BOOKMARK", "object": mark}) + b"\n"
        await response.write(chunk)
        last_sent = time.monotonic()
        stream = response if isinstance(response, ChunkedStream) else None
        if stream is not None and not table:
            # events go straight to the connection while this task waits
            watcher.sink = _StreamSink(stream)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            batch, ended = await watcher.next_batch(min(remaining, 10.0))
            if batch:
                await response.write(b"".join(line(e) for e in batch))
                last_sent = time.monotonic()
            if ended:
                return
            if batch:
                continue
            if request.transport is None or request.transport.is_closing():
                return
            if stream is not None:
                last_sent = max(last_sent, stream.last_write)
            if bookmarks and not table and time.monotonic() - last_sent >= 10.0:
                mark = self._bookmark(kind)
                await response.write(encode({"type": "BOOKMARK", "object": mark}) + b"\n")
                last_sent = time.monotonic()

    def _bookmark(self, kind: Kind, *, initial_events_end: bool = False) -> Obj:
        """A watch's BOOKMARK object at the current revision (the end of a streaming list's objects)."""
        meta: Obj = {"resourceVersion": str(self.registry.revision)}
        if initial_events_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": meta}

    def _in_process_watch(self, request: web.Request) -> InProcessWatch | None:
        """The in-process watch a component of this process opened for this request, if any."""
        key = request.headers.get(IN_PROCESS_HEADER)
        return self.in_process_watches.claim(key) if key else None

    async def _hand_over(
        self,
        request: web.Request,
        kind: Kind,
        watcher: Watcher,
        backlog: list[Event],
        local: InProcessWatch,
        deadline: float,
        bookmarks: bool,
        initial_events: bool,
    ) -> None:
        """The watch of a component of this process: the same events, as the stored objects themselves,
        handed over beside the connection, which carries only the response's start and end."""

        sink = _InProcessSink(local)
        going = all(map(sink.take, backlog))
        if going and initial_events:
            going = local.put("BOOKMARK", self._bookmark(kind, initial_events_end=True))
        watcher.sink = sink
        last_sent = time.monotonic()
        while going and not local.closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            batch, ended = await watcher.next_batch(min(remaining, 10.0))
            # a client too far behind is let go, as a connection's is: it watches again
            going = all(map(sink.take, batch)) and not ended
            if batch:
                last_sent = time.monotonic()
            elif request.transport is None or request.transport.is_closing():
                return
            elif bookmarks and time.monotonic() - last_sent >= 10.0:
                going = local.put("BOOKMARK", self._bookmark(kind))
                last_sent = time.monotonic()

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
        if content_type == PROTOBUF:
            if allow_protobuf:
                return raw
            try:
                return decode_object(raw)
            except ProtobufBodyError as exc:
                raise errors.unsupported_media_type(f"{JSON} ({exc})") from exc
        if content_type in (JSON, "*/*", "text/plain"):
            try:
                return loads(raw) if raw else None
            except (ValueError, UnicodeDecodeError) as exc:
                raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc
        if content_type in ("application/yaml", "application/x-yaml", "text/yaml"):
            try:
                return yaml.safe_load(raw) if raw else None
            except yaml.YAMLError as exc:
                raise errors.bad_request(f"error converting YAML to JSON: {exc}") from exc
        raise errors.unsupported_media_type(ACCEPTED_BODY_TYPES)

    def _dry_run(self, request: web.Request) -> bool:
        values = request.query.getall("dryRun", [])
        for value in values:
            if value != "All":
                raise errors.bad_request(f'Invalid dryRun value "{value}": only "All" is supported')
        return bool(values)

    async def _verb_create(self, request: web.Request, target: Target, user: UserInfo) -> web.StreamResponse:
        kind = target.kind
        if target.subresource:
            return await self._create_subresource(request, target, user)
        if kind.kind == "SelfSubjectAccessReview":
            return await self._self_subject_access_review(request, user)
        if kind.kind == "TokenReview":
            return await self._token_review(request)
        if kind.kind == "SelfSubjectReview":
            return await self._self_subject_review(request, user, kind)
        if kind.kind == "SelfSubjectRulesReview":
            return await self._self_subject_rules_review(request, user)
        if kind.kind in ("SubjectAccessReview", "LocalSubjectAccessReview"):
            return await self._subject_access_review(request, kind, target.namespace)
        if kind.kind == "Binding":
            body = await self._decode_body(request)
            name = ((body or {}).get("metadata") or {}).get("name", "")
            return await self._bind(request, target.namespace, name, body, user)
        manager = _manager(request, "CreateOptions")
        body = await self._decode_body(request)
        empty_overhead = _empty_pod_overhead(kind, body)
        warnings = self._check_fields(request, kind, body)
        if empty_overhead:
            body["spec"]["overhead"] = {}
        entry = await self.registry.create(
            kind, target.namespace, body, user, dry_run=self._dry_run(request), manager=manager
        )
        warnings += _strategy_warnings(kind, entry.obj, None)
        return _warned(self._render(request, kind, entry, 201), warnings)

    async def _verb_update(self, request: web.Request, target: Target, user: UserInfo) -> web.StreamResponse:
        kind = target.kind
        manager = _manager(request, "UpdateOptions")
        body = await self._decode_body(request)
        dry_run = self._dry_run(request)
        if target.subresource == "scale":
            return await self._update_scale(target, lambda _scale: body, user, dry_run, manager)
        warnings = self._check_fields(request, kind, body)
        old = self._warning_base(target)
        entry = await self.registry.update(
            kind,
            target.namespace,
            target.name,
            body,
            user,
            subresource=target.subresource,
            dry_run=dry_run,
            manager=manager,
        )
        return self._updated(request, target, entry, old, warnings)

    async def _verb_patch(self, request: web.Request, target: Target, user: UserInfo) -> web.StreamResponse:
        kind = target.kind
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type not in PATCH_TYPES:
            raise errors.unsupported_media_type(", ".join(PATCH_TYPES))
        if content_type not in CUSTOM_RESOURCE_PATCH_TYPES and crd_schema(
            kind.group, kind.version, kind.kind
        ):
            raise errors.unsupported_media_type(", ".join(CUSTOM_RESOURCE_PATCH_TYPES))
        applying = content_type == "application/apply-patch+yaml"
        force = _patch_options(request, applying)
        raw = await self._read_body(request)
        try:
            patch = yaml.safe_load(raw) if content_type.endswith("yaml") else loads(raw)
        except (ValueError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"error decoding patch: {exc}") from exc
        dry_run = self._dry_run(request)
        if content_type == "application/json-patch+json":
            if not isinstance(patch, list):
                raise errors.bad_request("json patch must be a list of operations")
        elif not isinstance(patch, dict):
            raise errors.bad_request("patch body must be a JSON object")
        # The omitempty fields the patch sets to their zero value: kube's decoding of the patched object
        # into Go structs drops them from it, so `hostNetwork: false` undoes a `true` and is then absent.
        kept_zeros: list[str] = []
        warnings = (
            []
            if target.subresource == "scale"
            else self._check_fields(request, kind, patch, content_type, kept_zeros)
        )

        def apply(obj: Obj, owned: bool = False) -> Obj:
            try:
                if content_type == "application/json-patch+json":
                    result = apply_json_patch(obj, patch)
                elif content_type == "application/merge-patch+json":
                    result = apply_merge_patch(obj, patch, owned=owned)
                else:
                    result = apply_strategic_merge_patch(obj, patch, kind.kind, owned=owned)
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
            if kept_zeros:
                self._drop_zeros(kind, result)
            return result

        if target.subresource == "scale":
            return await self._update_scale(target, apply, user, dry_run, _manager(request))
        if applying:
            return await self._apply(request, target, user, patch, force, kept_zeros, warnings)
        old = self._warning_base(target)
        entry = await self.registry.modify(
            kind,
            target.namespace,
            target.name,
            # modify hands each attempt its own copy of the object, so the patch may change it in place.
            lambda obj: apply(obj, owned=True),
            user,
            subresource=target.subresource,
            dry_run=dry_run,
            changes=patched_fields(patch, content_type),
            manager=_manager(request),
        )
        return self._updated(request, target, entry, old, warnings)

    def _updated(
        self, request: web.Request, target: Target, entry: Entry, old: Obj | None, warnings: list[str]
    ) -> web.Response:
        """The answer to a write of a stored object, with the warnings of the kind's strategy about it
        (`old` from `_warning_base`)."""
        kind = target.kind
        if kind.strategy.warnings and not target.subresource:
            warnings += _strategy_warnings(kind, entry.obj, old)
        return _warned(self._render(request, kind, entry), warnings)

    def _warning_base(self, target: Target) -> Obj | None:
        # only kinds whose strategy warns need the stored object (pods and nodes, the hot path, do not)
        kind = target.kind
        if not kind.strategy.warnings:
            return None
        return self.registry.get_object(kind, target.namespace, target.name)

    async def _apply(
        self,
        request: web.Request,
        target: Target,
        user: UserInfo,
        config: dict[str, Any],
        force: bool,
        kept_zeros: list[str],
        warnings: list[str],
    ) -> web.StreamResponse:
        """Server-side apply: kube's merge of the configuration, owned by its field manager."""
        kind = target.kind
        dry_run = self._dry_run(request)
        manager = request.query.get("fieldManager", "")

        def applied(live: Obj | None) -> Obj:
            obj = self.field_manager.apply(
                kind, live, config, manager, force=force, subresource=target.subresource
            )
            if kept_zeros:
                # the configuration's zero values apply (a `false` undoes a stored `true`), then go,
                # as Go's encoder leaves them out; the applier still owns them
                self._drop_zeros(kind, obj)
            return obj

        if self.registry.get_object(kind, target.namespace, target.name) is None:
            obj = applied(None)
            entry = await self.registry.create(kind, target.namespace, obj, user, dry_run=dry_run)
            warnings += _strategy_warnings(kind, entry.obj, None)
            return _warned(self._render(request, kind, entry, 201), warnings)
        old = self._warning_base(target)
        entry = await self.registry.modify(
            kind,
            target.namespace,
            target.name,
            applied,
            user,
            subresource=target.subresource,
            dry_run=dry_run,
        )
        return self._updated(request, target, entry, old, warnings)

    def _check_fields(
        self,
        request: web.Request,
        kind: Kind,
        body: Any,
        patch_type: str = "",
        kept_zeros: list[str] | None = None,
    ) -> list[str]:
        """kube's field validation of a write: unknown fields are dropped from `body` (with a warning for
        `Warn`, kube's default) or, with `fieldValidation=Strict` (kubectl's), refuse the write. A patch's
        omitempty fields set to their zero value are appended to `kept_zeros`."""
        mode = request.query.get("fieldValidation") or "Warn"
        if mode not in ("Ignore", "Warn", "Strict"):
            raise errors.bad_request(
                f'fieldValidation parameter: "{mode}" must be one of "Ignore", "Warn", or "Strict"'
            )
        root = self._fields.root(kind.group, kind.version, kind.kind)
        if root is None:
            custom = crd_schema(kind.group, kind.version, kind.kind)
            if custom is None:
                return []
            return self._field_findings(kind, _prune_custom(custom, body, patch_type), mode)
        try:
            if patch_type == "application/json-patch+json":
                findings = _json_patch_findings(
                    body,
                    lambda pointer, value: self._fields.prune_at(
                        root, pointer, value, minor=self._minor, kept_zeros=kept_zeros
                    ),
                )
            else:
                findings = self._fields.prune(
                    root, body, zeros=not patch_type, minor=self._minor, kept_zeros=kept_zeros
                )
        except FieldTypeError as exc:  # whatever fieldValidation says: kube could not decode the body
            raise errors.bad_request(
                f'{kind.kind} in version "{kind.version}" cannot be handled as a {kind.kind}: {exc}'
            ) from exc
        return self._field_findings(kind, findings, mode)

    def _drop_zeros(self, kind: Kind, obj: Obj) -> None:
        """Removes the omitempty fields holding their zero value from a built-in kind's whole object."""
        root = self._fields.root(kind.group, kind.version, kind.kind)
        if root is not None:
            self._fields.prune(root, obj, zeros=True, minor=self._minor)

    @staticmethod
    def _field_findings(kind: Kind, findings: list[Finding], mode: str) -> list[str]:
        """What the unknown fields of a write make of it under `fieldValidation=mode`: the warnings to
        send, or (Strict) the write refused."""
        if not findings or mode == "Ignore":
            return []
        if mode == "Strict":
            raise errors.bad_request(unknown_fields_message(kind.kind, kind.version, findings))
        return [f'unknown field "{finding.path}"' for finding in findings]

    async def _delete_options(self, request: web.Request) -> DeleteOptions:
        body = await self._decode_body(request) if request.can_read_body else None
        if body is not None and not isinstance(body, dict):
            raise errors.bad_request("DeleteOptions must be a JSON object")
        return DeleteOptions.parse(body, dict(request.query))

    async def _verb_delete(self, request: web.Request, target: Target, user: UserInfo) -> web.StreamResponse:
        options = await self._delete_options(request)
        entry, _gone = await self.registry.delete(
            target.kind, target.namespace, target.name, options, user, dry_run=self._dry_run(request)
        )
        return json_response(entry.raw)

    async def _verb_deletecollection(
        self, request: web.Request, target: Target, user: UserInfo
    ) -> web.StreamResponse:
        kind = target.kind
        options = await self._delete_options(request)
        deleted = await self.registry.delete_collection(
            kind,
            target.namespace or None,
            self._predicate(request, kind),
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
        return json_response(head[:-1] + b',"items":[' + b",".join(e.raw for e in deleted) + b"]}")
