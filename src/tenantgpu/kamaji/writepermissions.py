"""Kamaji's write permissions: a TenantControlPlane whose `spec.writePermissions` blocks creation, update or
deletion turns `WriteLimited`, and its tenant refuses those writes through a validating webhook.

Facts from clastix/kamaji (api/v1alpha1/tenantcontrolplane_types.go, controllers/soot/controllers/
write_permissions.go, internal/webhook/handlers/write_permission.go, internal/webhook/chainer.go,
internal/resources/k8s_deployment_resource.go, cmd/manager/cmd.go):

- the fields are `blockCreation`, `blockUpdate` and `blockDeletion` (the guide's `blockCreate` and
  `blockDelete` are not the API's names); any of them true makes the version status `WriteLimited`,
  after `Sleeping` and `NotReady` and before `Ready`;
- while the TCP is `WriteLimited`, the soot keeps a ValidatingWebhookConfiguration
  `kamaji-write-permissions` in the tenant, and deletes it otherwise. It holds two webhooks, both at
  `https://<--webhook-service-name>.<Kamaji's namespace>.svc:443/write-permission`, failurePolicy Fail,
  matchPolicy Equivalent, sideEffects NoneOnDryRun: `leases.write-permissions.kamaji.clastix.io` for
  CREATE and DELETE of every namespaced resource in `kube-node-lease`, and
  `catchall.write-permissions.kamaji.clastix.io` for the blocked operations on every resource, of any
  scope, outside `kube-system` and `kube-node-lease`;
- the handler refuses every such request with controller-runtime's `Denied`: 403, reason Forbidden,
  and the message `DENIAL` below.

The lab serves that handler in the process of the tenant's API server, over a socket pair with TLS,
under the name the configuration gives (`WEBHOOK_HOST`): the API server dials a `url` webhook through
its ControlPlane egress, which is the management cluster's network in Kamaji, so `ManagementNetwork`
stands for that network's Service. Its CA is made when the process starts; the soot writes its bundle
into the configuration, again after a restart.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
from typing import Any

from aiohttp import web

from tenantgpu.apiserver.hooks import DirectEgress
from tenantgpu.apiserver.pki import CertificateAuthority
from tenantgpu.kubeclient import ApiError, KubeClient
from tenantgpu.kubeclient.config import load_cert_chain
from tenantgpu.kubeclient.ensure import read_or_create

Obj = dict[str, Any]

CONFIGURATION = "kamaji-write-permissions"
LEASES_WEBHOOK = "leases.write-permissions.kamaji.clastix.io"
CATCHALL_WEBHOOK = "catchall.write-permissions.kamaji.clastix.io"
# Kamaji's Helm chart: the manager's --webhook-service-name default, in the chart's namespace
WEBHOOK_SERVICE = "kamaji-webhook-service"
WEBHOOK_NAMESPACE = "kamaji-system"
WEBHOOK_HOST = f"{WEBHOOK_SERVICE}.{WEBHOOK_NAMESPACE}.svc"
WEBHOOK_PATH = "/write-permission"
DENIAL = (
    "the current Control Plane has limited write permissions, current changes are blocked: "
    "removing the webhook may lead to an inconsistent state upon its completion"
)
NODE_LEASE = "kube-node-lease"
KUBE_SYSTEM = "kube-system"
RESOURCE = "validatingwebhookconfigurations"

# (blockCreation, blockUpdate, blockDeletion)
Blocks = tuple[bool, bool, bool]


def blocks_of(tcp: Obj) -> Blocks:
    """`spec.writePermissions` as (blockCreation, blockUpdate, blockDeletion)."""
    spec = (tcp.get("spec") or {}).get("writePermissions") or {}
    return (bool(spec.get("blockCreation")), bool(spec.get("blockUpdate")), bool(spec.get("blockDeletion")))


def _webhook(name: str, url: str, ca_bundle: str, operations: list[str], scope: str, selector: Obj) -> Obj:
    return {
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca_bundle},
        "rules": [
            {
                "operations": operations,
                "apiGroups": ["*"],
                "apiVersions": ["*"],
                "resources": ["*"],
                "scope": scope,
            }
        ],
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "namespaceSelector": {"matchExpressions": [selector]},
        "sideEffects": "NoneOnDryRun",
        "admissionReviewVersions": ["v1"],
    }


def configuration_webhooks(blocks: Blocks, ca_pem: bytes) -> list[Obj]:
    """The two webhooks of `kamaji-write-permissions`, in Kamaji's order."""
    url = f"https://{WEBHOOK_HOST}:443{WEBHOOK_PATH}"
    bundle = base64.b64encode(ca_pem).decode()
    name_label = "kubernetes.io/metadata.name"
    blocked = [op for op, on in zip(("CREATE", "UPDATE", "DELETE"), blocks, strict=True) if on]
    return [
        _webhook(
            LEASES_WEBHOOK,
            url,
            bundle,
            ["CREATE", "DELETE"],
            "Namespaced",
            {"key": name_label, "operator": "In", "values": [NODE_LEASE]},
        ),
        _webhook(
            CATCHALL_WEBHOOK,
            url,
            bundle,
            blocked,
            "*",
            {"key": name_label, "operator": "NotIn", "values": [KUBE_SYSTEM, NODE_LEASE]},
        ),
    ]


def review_response(review: Obj) -> Obj:
    """Kamaji's answer to an AdmissionReview: every create, update and delete is denied; a connect is
    allowed (its handler chain has nothing for it)."""
    request = review.get("request") or {}
    operation = str(request.get("operation") or "")
    response: Obj = {"uid": request.get("uid", "")}
    if operation in ("CREATE", "UPDATE", "DELETE"):
        response |= {"allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": DENIAL}}
    else:
        response |= {
            "allowed": True,
            "status": {"code": 200, "message": f"{operation.lower()} operation allowed"},
        }
    return {"apiVersion": review.get("apiVersion") or "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": response}  # fmt: skip


async def apply_write_permissions(client: KubeClient, blocks: Blocks, ca_pem: bytes) -> None:
    """The soot's reconcile: the configuration while any write is blocked (its webhooks replaced when they
    differ, as CreateOrUpdate does), none otherwise."""
    current = await client.get_if_found(RESOURCE, CONFIGURATION)
    if not any(blocks):
        if current is not None:
            try:
                await client.delete(RESOURCE, CONFIGURATION)
            except ApiError as err:
                if err.code != 404:
                    raise
        return
    webhooks = configuration_webhooks(blocks, ca_pem)
    if current is None:
        body = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": CONFIGURATION},
            "webhooks": webhooks,
        }
        current, created = await read_or_create(client, RESOURCE, body)
        if created:
            return
    if _comparable(current.get("webhooks") or []) == _comparable(webhooks):
        return
    await client.update(RESOURCE, {**current, "webhooks": webhooks})


def _comparable(webhooks: list[Obj]) -> list[Obj]:
    # the API server defaults what Kamaji leaves out (timeoutSeconds, objectSelector, matchConditions)
    keys = ("name", "clientConfig", "rules", "failurePolicy", "matchPolicy", "namespaceSelector", "sideEffects",
            "admissionReviewVersions")  # fmt: skip
    return [{k: w.get(k) for k in keys} for w in webhooks]


class ManagementNetwork:
    """The ControlPlane egress of the tenant API servers of one process: Kamaji's webhook Service answers
    here (`WEBHOOK_HOST`), any other address is dialled directly."""

    def __init__(self) -> None:
        self.ca = CertificateAuthority.create("kamaji-webhook-ca")
        cert, key = self.ca.issue_serving((WEBHOOK_HOST, f"{WEBHOOK_HOST}.cluster.local"), WEBHOOK_SERVICE)
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        load_cert_chain(self._context, cert, key)
        self._server = web.Server(self._handle)
        self._direct = DirectEgress()

    async def open_connection(
        self, host: str, port: int, *, ssl: ssl.SSLContext | None = None, server_hostname: str | None = None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if host not in (WEBHOOK_HOST, f"{WEBHOOK_HOST}.cluster.local") or port != 443:
            return await self._direct.open_connection(host, port, ssl=ssl, server_hostname=server_hostname)
        ours, theirs = socket.socketpair()
        loop = asyncio.get_running_loop()
        # the server's side returns only once the TLS handshake is done, so both sides shake hands at once
        accepted = asyncio.ensure_future(
            loop.connect_accepted_socket(self._server, theirs, ssl=self._context)
        )
        try:
            streams = await asyncio.open_connection(sock=ours, ssl=ssl, server_hostname=server_hostname)
        except BaseException:
            accepted.cancel()
            theirs.close()
            raise
        await accepted
        return streams

    @staticmethod
    async def _handle(request: web.BaseRequest) -> web.Response:
        if request.method != "POST" or request.path != WEBHOOK_PATH:
            return web.Response(status=404, text="404 page not found\n")
        try:
            review = await request.json()
        except ValueError:
            return web.Response(status=400, text="could not decode the AdmissionReview\n")
        return web.json_response(review_response(review if isinstance(review, dict) else {}))

    async def close(self) -> None:
        await self._server.shutdown(0)
