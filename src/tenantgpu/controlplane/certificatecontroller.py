"""What kube-controller-manager's certificate controllers share (pkg/controller/certificates,
certificate_controller.go): one informer on CertificateSigningRequests, every request handed to the
controller's `handle` at start and on each change."""

from __future__ import annotations

from typing import Any

from tenantgpu.kubeclient import Informer, KubeClient


class CertificateController:
    """Base of the csrsigning and csrapproving controllers; `requests` may be an informer they share."""

    def __init__(self, client: KubeClient, requests: Informer | None = None) -> None:
        self.client = client
        self.requests = requests or Informer(client, "certificatesigningrequests")

    async def start(self) -> None:
        self.requests.add_handler(self._changed)
        await self.requests.start()
        for csr in self.requests.items():
            await self.handle(csr)

    async def stop(self) -> None:
        await self.requests.stop()

    async def _changed(self, event: str, csr: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event == "DELETED":
            self.deleted(csr)
        else:
            await self.handle(csr)

    def deleted(self, csr: dict[str, Any]) -> None:
        """A request is gone (nothing to do unless the controller keeps state per request)."""

    async def handle(self, csr: dict[str, Any]) -> None:
        raise NotImplementedError
