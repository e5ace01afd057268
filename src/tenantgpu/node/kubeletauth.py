"""Who may use the kubelet's HTTPS endpoint: x509 authentication and webhook authorization, as kubeadm's
kubelet is configured (the KubeletConfiguration Kamaji uploads: `authentication.anonymous.enabled: false`,
`x509.clientCAFile: /etc/kubernetes/pki/ca.crt`, `authorization.mode: Webhook`).

Facts from kube's kubelet (pkg/kubelet/server/auth.go and server.go):
- a request without a client certificate the cluster CA signed is answered `401 Unauthorized`;
- the certificate's CN is the user and its O entries the groups, with `system:authenticated` added;
- each request is authorised as the verb of its HTTP method (GET get, POST create, PUT update, PATCH
  patch, DELETE delete) on `nodes/<subresource>` of this node, the subresource `proxy` unless the path is
  one of those the kubelet subdivides (`/stats` stats, `/metrics` metrics, `/logs` log, `/checkpoint`
  checkpoint; `/spec` had its own until the kubelet stopped serving it, before 1.27). From 1.33, where
  KubeletFineGrainedAuthz is beta and on, `/pods` and `/runningpods` are first asked as `pods`, `/healthz`
  as `healthz` and `/configz` as `configz`, then as `proxy`: either permission lets the request in
  (`/statusz` behind the alpha ComponentStatusz gate is not served, so not modelled);
- the decision comes from a SubjectAccessReview the kubelet creates with its own credentials; allowed
  answers are kept 5 minutes and denied ones 30 seconds (`cacheAuthorizedTTL`, `cacheUnauthorizedTTL`);
- a denial is `403 Forbidden (user=U, verb=V, resource=nodes, subresource=S)` up to 1.31; from 1.32,
  where the kubelet builds a list of attributes, `… subresource(s)=[S1 S2])` (Go's `%v` of the list).

The tenant API server reaches `/containerLogs` and `/exec` as `kube-apiserver-kubelet-client` of the group
`kubeadm:cluster-admins`, with the certificate Kamaji keeps in `<tcp>-api-server-kubelet-client-certificate`.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tenantgpu.apiserver.auth import AUTHENTICATED, subject_parts
from tenantgpu.kubeclient import ApiError
from tenantgpu.node.release import FALLBACK_VERSION, KubeletRelease

AUTHORIZED_TTL_SECONDS = 300.0
UNAUTHORIZED_TTL_SECONDS = 30.0

_VERBS = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_SUBPATHS = (
    ("/stats", "stats"),
    ("/metrics", "metrics"),
    ("/logs", "log"),
    ("/checkpoint", "checkpoint"),
)
# KubeletFineGrainedAuthz: asked before `proxy`
_FINE_GRAINED_SUBPATHS = (
    ("/pods", "pods"),
    ("/healthz", "healthz"),
    ("/configz", "configz"),
    ("/runningpods", "pods"),
)

# (SubjectAccessReview body) -> its status
ReviewSender = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Caller:
    """The user a client certificate names."""

    user: str
    groups: tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    """What the kubelet answers: None to serve the request, else the status and text to send."""

    status: int | None = None
    text: str = ""


def _is_subpath(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def subresources_of(path: str, release: KubeletRelease) -> tuple[str, ...]:
    """The `nodes` subresources a kubelet path is authorised as, in the order the kubelet asks."""
    subdivided = next((sub for prefix, sub in _SUBPATHS if _is_subpath(path, prefix)), "proxy")
    if release.fine_grained_kubelet_authz:
        for prefix, sub in _FINE_GRAINED_SUBPATHS:
            if _is_subpath(path, prefix):
                return (sub, subdivided)
    return (subdivided,)


def caller_of(peercert: dict[str, Any] | None) -> Caller | None:
    """The user of a verified peer certificate (`getpeercert()`), or None without one."""
    if not peercert:
        return None
    user, groups = subject_parts(peercert.get("subject", ()))
    return Caller(user, (*groups, AUTHENTICATED)) if user else None


@dataclass
class KubeletAuth:
    """The kubelet's authenticator and authorizer for one node, with its cluster's CA."""

    node_name: str
    client_ca_pem: bytes
    review: ReviewSender
    # the kubelet's release, known once the worker has asked its API server
    release: Callable[[], KubeletRelease] = lambda: KubeletRelease.parse(FALLBACK_VERSION)
    clock: Callable[[], float] = time.monotonic
    _decisions: dict[tuple[Caller, str, str], tuple[bool, float]] = field(default_factory=dict)

    def server_context(self, ctx: ssl.SSLContext) -> ssl.SSLContext:
        """`ctx` asking clients for a certificate of the cluster CA (one without is still let in, to be
        answered 401, as the kubelet's TLS config does with `VerifyClientCertIfGiven`)."""
        ctx.load_verify_locations(cadata=self.client_ca_pem.decode())
        ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx

    async def check(self, peercert: dict[str, Any] | None, method: str, path: str) -> Verdict:
        caller = caller_of(peercert)
        if caller is None:
            return Verdict(401, "Unauthorized")
        release = self.release()
        verb, subresources = _VERBS.get(method.upper(), "*"), subresources_of(path, release)
        for subresource in subresources:
            if await self._allowed(caller, verb, subresource):
                return Verdict()
        named = (
            f"subresource(s)=[{' '.join(subresources)}]"
            if release.lists_kubelet_authz_attributes
            else f"subresource={subresources[0]}"
        )
        return Verdict(403, f"Forbidden (user={caller.user}, verb={verb}, resource=nodes, {named})")

    async def _allowed(self, caller: Caller, verb: str, subresource: str) -> bool:
        key = (caller, verb, subresource)
        now = self.clock()
        kept = self._decisions.get(key)
        if kept is not None and kept[1] > now:
            return kept[0]
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": caller.user,
                "groups": list(caller.groups),
                "resourceAttributes": {
                    "verb": verb,
                    "version": "v1",
                    "resource": "nodes",
                    "subresource": subresource,
                    "name": self.node_name,
                },
            },
        }
        try:
            status = await self.review(body)
        except (ApiError, OSError, TimeoutError, aiohttp.ClientError):
            return False  # an API server out of reach denies, and the denial is not kept
        allowed = bool(status.get("allowed"))
        ttl = AUTHORIZED_TTL_SECONDS if allowed else UNAUTHORIZED_TTL_SECONDS
        self._decisions[key] = (allowed, now + ttl)
        return allowed
