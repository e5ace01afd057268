"""kube-controller-manager's csrapproving controller: approves a kubelet's request for its client
certificate when the requester may ask for one.

Facts from Kubernetes 1.33, pkg/controller/certificates/approver/sarapprove.go: a request is looked at
only while it has no certificate and neither an Approved nor a Denied condition. It is a kubelet client
request when it names the `kubernetes.io/kube-apiserver-client-kubelet` signer and passes that signer's
subject and usage checks (helpers.go's `IsKubeletClientCSR`). If its requester's name is the request's
common name it is a renewal (`selfnodeclient`), else a first request (`nodeclient`, what a bootstrap
token's group may create under kubeadm's `kubeadm:node-autoapprove-bootstrap` binding). For each kind it
matches, a SubjectAccessReview asks whether the requester (spec.username, uid, groups, extra) may
`create` `certificatesigningrequests/<kind>` in `certificates.k8s.io`; the first allowed one adds the
condition Approved / AutoApproved with that kind's message through the `approval` subresource. Nothing
else is approved or denied. A request it recognises but no review allows is looked at again, after
200 ms doubling up to 1000 s (certificate_controller.go's rate limiter), so it is approved once RBAC
allows its requester; meanwhile it stays pending for a person or another approver.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime
from typing import Any

from tenantgpu.apiserver.certificates import (
    APPROVED,
    DENIED,
    KUBE_APISERVER_CLIENT_KUBELET,
    conditions,
    decode_bytes,
    parse_request,
)
from tenantgpu.controlplane.certificatecontroller import CertificateController
from tenantgpu.controlplane.csrsigning import kubelet_client_error, request_common_name
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

log = logging.getLogger(__name__)

SELF_NODE_CLIENT = (
    "selfnodeclient",
    "Auto approving self kubelet client certificate after SubjectAccessReview.",
)
RETRY_BASE_SECONDS = 0.2
RETRY_MAX_SECONDS = 1000.0
NODE_CLIENT = ("nodeclient", "Auto approving kubelet client certificate after SubjectAccessReview.")


def approval_kinds(csr: dict[str, Any]) -> list[tuple[str, str]]:
    """The (subresource, message) kinds a pending request is recognised as, in the order they are tried;
    [] for one the controller leaves alone."""
    spec, status = csr.get("spec") or {}, csr.get("status") or {}
    if status.get("certificate"):
        return []
    if {c.get("type") for c in conditions(csr)} & {APPROVED, DENIED}:
        return []
    if spec.get("signerName") != KUBE_APISERVER_CLIENT_KUBELET:
        return []
    try:
        request = parse_request(decode_bytes(spec.get("request")) or b"")
    except ValueError:
        return []
    if kubelet_client_error(request, {str(u) for u in spec.get("usages") or []}) is not None:
        return []
    kinds = [NODE_CLIENT]
    if spec.get("username") == request_common_name(request):
        kinds.insert(0, SELF_NODE_CLIENT)
    return kinds


def access_review(csr: dict[str, Any], subresource: str) -> dict[str, Any]:
    """The SubjectAccessReview asking whether the requester may create that kind of request."""
    spec = csr.get("spec") or {}
    review: dict[str, Any] = {
        "resourceAttributes": {
            "group": "certificates.k8s.io",
            "resource": "certificatesigningrequests",
            "verb": "create",
            "subresource": subresource,
            "version": "*",
        }
    }
    for key, wanted in (("username", "user"), ("uid", "uid"), ("groups", "groups"), ("extra", "extra")):
        if spec.get(key):
            review[wanted] = spec[key]
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": review}


class CSRApprovingController(CertificateController):
    """Auto-approves kubelet client certificate requests whose requester a SubjectAccessReview allows."""

    def __init__(self, client: KubeClient, *, requests: Informer | None = None) -> None:
        super().__init__(client, requests)
        self._failures: dict[str, int] = {}
        self._retries: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def stop(self) -> None:
        for handle in self._retries.values():
            handle.cancel()
        self._retries.clear()
        for task in list(self._tasks):
            task.cancel()
        await super().stop()

    def deleted(self, csr: dict[str, Any]) -> None:
        self._forget(csr["metadata"]["name"])

    def _forget(self, name: str) -> None:
        self._failures.pop(name, None)
        if (handle := self._retries.pop(name, None)) is not None:
            handle.cancel()

    def _retry_later(self, name: str) -> None:
        failures = self._failures.get(name, 0)
        self._failures[name] = failures + 1
        delay = min(RETRY_BASE_SECONDS * 2**failures, RETRY_MAX_SECONDS)
        if (handle := self._retries.pop(name, None)) is not None:
            handle.cancel()
        self._retries[name] = asyncio.get_running_loop().call_later(delay, self._retry, name)

    def _retry(self, name: str) -> None:
        self._retries.pop(name, None)
        csr = self.requests.get(None, name)
        if csr is None:
            self._forget(name)
            return
        task = asyncio.create_task(self.handle(csr), name=f"csrapproving-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def handle(self, csr: dict[str, Any]) -> None:
        name = csr["metadata"]["name"]
        kinds = approval_kinds(csr)
        if not kinds:
            self._forget(name)
            return
        if await self._approve(csr, kinds):
            self._forget(name)
        else:
            self._retry_later(name)

    async def _approve(self, csr: dict[str, Any], kinds: list[tuple[str, str]]) -> bool:
        """Whether a review allowed one of the kinds (and the approval was written)."""
        for subresource, message in kinds:
            try:
                review = await self.client.request(
                    "POST",
                    "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                    body=access_review(csr, subresource),
                )
            except ApiError as err:
                log.warning("csrapproving: reviewing %s: %s", csr["metadata"].get("name"), err)
                return False
            if not (review.get("status") or {}).get("allowed"):
                continue
            condition = {
                "type": APPROVED,
                "status": "True",
                "reason": "AutoApproved",
                "message": message,
                "lastUpdateTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            body = {
                **csr,
                "status": {**(csr.get("status") or {}), "conditions": [*conditions(csr), condition]},
            }
            with contextlib.suppress(ApiError):  # a newer version, or the request is gone: the watch tells
                await self.client.update("certificatesigningrequests", body, subresource="approval")
            return True
        return False
