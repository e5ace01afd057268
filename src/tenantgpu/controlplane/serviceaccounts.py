"""Service accounts: every active namespace gets its `default` ServiceAccount, as kube-controller-manager ensures.

Tokens are not stored in Secrets (Kubernetes stopped doing that in 1.24): a client asks the
`serviceaccounts/token` subresource (TokenRequest) for a short-lived token, which the API server signs.
"""

from __future__ import annotations

from tenantgpu.controlplane.everynamespace import EveryNamespace
from tenantgpu.kubeclient import Informer, KubeClient

DEFAULT_ACCOUNT = "default"


class ServiceAccountController(EveryNamespace):
    """Creates the `default` ServiceAccount in each namespace that lacks one, and again if it is deleted.

    It owns the tenant's namespace informer, which the other per-namespace duties share."""

    resource = "serviceaccounts"
    name = DEFAULT_ACCOUNT

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client, namespaces=Informer(client, "namespaces"))

    async def stop(self) -> None:
        await self.namespaces.stop()
        await super().stop()
