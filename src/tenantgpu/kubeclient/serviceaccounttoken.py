"""A client that acts as a service account, its token requested by another client and kept fresh.

The kubelet gives a pod its service account's token through a projected volume: it asks the API for one
(TokenRequest, `serviceaccounts/<name>/token`) and asks again once 80 % of the token's life has passed
(kube's token manager); client-go in the pod rereads the file, so its next requests carry the new token.
`ServiceAccountClient` does the same for a component of the lab that runs outside any pod's container:
`issuer` (the lab's own client) requests the tokens, and the component's `KubeClient` presents them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from tenantgpu.kubeclient.client import KubeClient

log = logging.getLogger(__name__)

# The kubelet's projected token: an hour and seven seconds (kube picks the odd figure so that such tokens
# can be told apart), renewed after 80 % of it.
DEFAULT_EXPIRATION_SECONDS = 3607
RENEW_FRACTION = 0.8
RETRY_SECONDS = 10.0


class ServiceAccountClient:
    """`await start()` returns a KubeClient authenticated as `namespace/name`; `close()` stops renewing and
    closes it."""

    def __init__(
        self,
        issuer: KubeClient,
        namespace: str,
        name: str,
        *,
        expiration_seconds: int = DEFAULT_EXPIRATION_SECONDS,
        renew_fraction: float = RENEW_FRACTION,
        user_agent: str | None = None,
    ) -> None:
        self.issuer = issuer
        self.namespace = namespace
        self.name = name
        self.expiration_seconds = expiration_seconds
        self.renew_fraction = renew_fraction
        self.user_agent = user_agent or f"tenantgpu/{name}"
        self.client: KubeClient | None = None
        self._renewing: asyncio.Task[None] | None = None

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    async def start(self) -> KubeClient:
        token, lifetime = await self._request()
        # The issuer's server and CA, and no client certificate: the token is the only credential.
        config = self.issuer.config.with_credentials(token=token)
        self.client = KubeClient(config, user_agent=self.user_agent)
        self._renewing = asyncio.create_task(self._renew(lifetime), name=f"token-{self.name}")
        return self.client

    async def close(self) -> None:
        if self._renewing is not None:
            self._renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewing
            self._renewing = None
        if self.client is not None:
            await self.client.close()
            self.client = None

    async def _request(self) -> tuple[str, float]:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": self.expiration_seconds},
        }
        result = await self.issuer.request(
            "POST", f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{self.name}/token", body=body
        )
        status = result.get("status") or {}
        seconds = (result.get("spec") or {}).get("expirationSeconds") or self.expiration_seconds
        return str(status["token"]), float(seconds)

    async def _renew(self, lifetime: float) -> None:
        wait = lifetime * self.renew_fraction
        while True:
            await asyncio.sleep(wait)
            try:
                token, lifetime = await self._request()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the old token is still good for a fifth of its life: keep asking
                log.warning("token for %s: %s; retrying in %.0f s", self.username, err, RETRY_SECONDS)
                wait = RETRY_SECONDS
                continue
            if self.client is not None:
                self.client.use_token(token)
            wait = lifetime * self.renew_fraction
