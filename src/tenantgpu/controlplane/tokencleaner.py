"""kube-controller-manager's tokencleaner (`--controllers=*,…,tokencleaner`, as Kamaji runs it): deletes
bootstrap token Secrets once they expire.

Facts from Kubernetes 1.33 (`pkg/controller/bootstrap/tokencleaner.go`,
`k8s.io/cluster-bootstrap/util/secrets`): each added or changed Secret of type
`bootstrap.kubernetes.io/token` in kube-system is looked at; an expired one (or one whose `expiration`
cannot be read) is deleted with its uid as precondition, so a Secret made anew under the same name is
spared (409); one not yet expired is looked at again when it expires; one without `expiration` is left
alone. A deletion that fails otherwise is not retried: the next change of the Secret brings it back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from tenantgpu.apiserver.bootstraptoken import expiration, is_token_secret
from tenantgpu.controlplane.workqueue import Key, WorkQueue, object_key
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class TokenCleaner:
    """Deletes expired bootstrap token Secrets. `secrets` is the bootstrap token Secrets' informer it
    shares with the bootstrapsigner; `clock` gives the time expirations are checked against."""

    def __init__(
        self, client: KubeClient, *, secrets: Informer, clock: Callable[[], float] = time.time
    ) -> None:
        self.client = client
        self.secrets = secrets
        self.clock = clock
        self.queue: WorkQueue[Key] = WorkQueue("tokencleaner", self._sync)

    async def start(self) -> None:
        self.secrets.add_handler(self._changed)
        await self.secrets.start()  # shared: starting an informer that runs already is a no-op
        for secret in self.secrets.items():  # kube hands a new handler the cached objects as adds
            self._changed("ADDED", secret, None)
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()
        await self.secrets.stop()

    def _changed(self, event: str, secret: Obj, old: Obj | None) -> None:
        if event != "DELETED" and is_token_secret(secret):
            self.queue.add(object_key(secret))

    async def _sync(self, key: Key) -> None:
        secret = self.secrets.get(*key)
        if secret is None or not is_token_secret(secret):
            return
        remaining, expired = expiration(secret, self.clock())
        if expired:
            uid = (secret.get("metadata") or {}).get("uid") or None
            try:
                await self.client.delete("secrets", key[1], key[0], uid=uid)
            except ApiError as err:
                # 404: gone already; 409: the uid differs, a new Secret took the name
                if err.code not in (404, 409):
                    log.debug("tokencleaner: deleting %s/%s: %s", key[0], key[1], err)
        elif remaining > 0:
            self.queue.add_after(key, remaining)
