"""Service accounts: every active namespace gets its `default` ServiceAccount, as kube-controller-manager ensures.

Tokens are not stored in Secrets (Kubernetes stopped doing that in 1.24): a client asks the
`serviceaccounts/token` subresource (TokenRequest) for a short-lived token, which the API server signs.
"""

from __future__ import annotations

import contextlib
from typing import Any

from tenantgpu.controlplane.namespaces import is_terminating
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

DEFAULT_ACCOUNT = "default"


class ServiceAccountController:
    """Creates the `default` ServiceAccount in each namespace that lacks one."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.namespaces = Informer(client, "namespaces")
        self.accounts = Informer(client, "serviceaccounts", field_selector=f"metadata.name={DEFAULT_ACCOUNT}")

    async def start(self) -> None:
        self.namespaces.add_handler(self._namespace_changed)
        self.accounts.add_handler(self._account_changed)
        await self.accounts.start()
        await self.namespaces.start()
        for namespace in self.namespaces.items():
            await self._ensure(namespace)

    async def stop(self) -> None:
        await self.namespaces.stop()
        await self.accounts.stop()

    async def _namespace_changed(
        self, event: str, namespace: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if event != "DELETED":
            await self._ensure(namespace)

    async def _account_changed(self, event: str, account: dict[str, Any], old: dict[str, Any] | None) -> None:
        # Someone deleted a default account: put it back while its namespace lives.
        if event == "DELETED":
            namespace = self.namespaces.get(None, account["metadata"].get("namespace", ""))
            if namespace is not None:
                await self._ensure(namespace)

    async def _ensure(self, namespace: dict[str, Any]) -> None:
        if is_terminating(namespace):
            return
        name = (namespace.get("metadata") or {}).get("name", "")
        if self.accounts.get(name, DEFAULT_ACCOUNT) is not None:
            return
        body = {"metadata": {"name": DEFAULT_ACCOUNT, "namespace": name}}
        with contextlib.suppress(ApiError):  # 409: it exists already; 403/404: the namespace is going away
            await self.client.create("serviceaccounts", body, name)
