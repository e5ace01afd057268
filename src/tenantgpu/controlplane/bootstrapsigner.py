"""kube-controller-manager's bootstrapsigner (`--controllers=*,bootstrapsigner,…`, as Kamaji runs it):
keeps ConfigMap `kube-public/cluster-info` signed with every bootstrap token that may sign, so that a
joining node (kubeadm's token discovery) can trust the cluster's `kubeconfig` it reads there anonymously.

Facts from Kubernetes 1.33 (`pkg/controller/bootstrap/bootstrapsigner.go`, `util.go`,
`k8s.io/cluster-bootstrap/token/jws`):
- each signature is the ConfigMap's data key `jws-kubeconfig-<token id>`: a JWS (HS256, the token's
  secret as key) of the `kubeconfig` value with its payload left out (`<header>..<signature>`), the
  protected header `{"alg":"HS256","kid":"<token id>"}`;
- a token signs when its Secret (type `bootstrap.kubernetes.io/token` in kube-system) is named
  `bootstrap-token-<id>` with `token-id` = that id, has a non-empty `token-secret`, has not expired and
  is marked `usage-bootstrap-signing: "true"`;
- every added or changed `cluster-info` and every added, changed or deleted token Secret asks for one
  sync; the sync writes the ConfigMap only when a signature is new, changed or left over from a token
  gone, and leaves it alone when it does not exist or has no `kubeconfig`;
- a write that fails is not retried (a conflict means a newer ConfigMap, whose event syncs again).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from tenantgpu.apiserver.bootstraptoken import (
    TOKEN_ID_KEY,
    TOKEN_SECRET_KEY,
    USAGE_SIGNING,
    data_value,
    has_expired,
    is_token_secret,
    token_id_of,
)
from tenantgpu.controlplane.workqueue import Key, WorkQueue, object_key
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

log = logging.getLogger(__name__)

Obj = dict[str, Any]

PUBLIC_NAMESPACE = "kube-public"
CLUSTER_INFO = "cluster-info"
KUBECONFIG_KEY = "kubeconfig"
SIGNATURE_PREFIX = "jws-kubeconfig-"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def detached_signature(content: str, token_id: str, token_secret: bytes) -> str:
    """The compact JWS of `content` signed HS256 with the token, its payload part left empty (RFC 7515,
    appendix F). A verifier recomputes it and compares the strings, so the header's bytes matter: its
    keys in this order, no spaces."""
    header = _b64url(json.dumps({"alg": "HS256", "kid": token_id}, separators=(",", ":")).encode())
    signing_input = f"{header}.{_b64url(content.encode())}".encode()
    return f"{header}..{_b64url(hmac.new(token_secret, signing_input, hashlib.sha256).digest())}"


def signing_token(secret: Obj, now: float) -> tuple[str, bytes] | None:
    """(token id, secret) of the token a Secret lets sign, or None when it may not sign."""
    name = (secret.get("metadata") or {}).get("name", "")
    name_id = token_id_of(name)
    if name_id is None:
        log.debug("secret %s is not named like a bootstrap token", name)
        return None
    token_id = data_value(secret, TOKEN_ID_KEY)
    if not token_id or token_id != name_id.encode():
        log.debug("bootstrap token secret %s: %s is missing or differs from its name", name, TOKEN_ID_KEY)
        return None
    key = data_value(secret, TOKEN_SECRET_KEY)
    if not key:
        log.debug("bootstrap token secret %s has no %s", name, TOKEN_SECRET_KEY)
        return None
    # the token cleaner deletes an expired token, but it may not have got there yet
    if has_expired(secret, now) or data_value(secret, USAGE_SIGNING) != b"true":
        return None
    return name_id, key


def signed_data(data: dict[str, str], tokens: dict[str, bytes]) -> dict[str, str] | None:
    """`cluster-info`'s data with one signature per token (id → key) and none other, or None when the
    data holds exactly those already (or has no `kubeconfig` to sign)."""
    content = data.get(KUBECONFIG_KEY)
    if content is None:
        return None
    kept = {key: value for key, value in data.items() if not key.startswith(SIGNATURE_PREFIX)}
    old = {key: value for key, value in data.items() if key.startswith(SIGNATURE_PREFIX)}
    new = {
        SIGNATURE_PREFIX + token_id: detached_signature(content, token_id, key)
        for token_id, key in tokens.items()
    }
    # sorted, as kube's encoding of a map writes it
    return None if new == old else dict(sorted({**kept, **new}.items()))


class BootstrapSigner:
    """Signs `kube-public/cluster-info` for the valid signing tokens. `secrets` is the bootstrap token
    Secrets' informer it shares with the token cleaner; `clock` gives the time expirations are checked
    against."""

    def __init__(
        self,
        client: KubeClient,
        *,
        secrets: Informer,
        config_maps: Informer | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.secrets = secrets
        # kube's informer sees every ConfigMap and its handler filters this one; here the watch does
        self.config_maps = config_maps or Informer(
            client, "configmaps", PUBLIC_NAMESPACE, field_selector=f"metadata.name={CLUSTER_INFO}"
        )
        self.clock = clock
        # One key: syncs are serialized and collapsed, whichever watch asked for them.
        self.queue: WorkQueue[Key] = WorkQueue("bootstrapsigner", self._sync)

    async def start(self) -> None:
        self.config_maps.add_handler(self._config_map_changed)
        self.secrets.add_handler(self._secret_changed)
        await self.config_maps.start()
        await self.secrets.start()  # shared: starting an informer that runs already is a no-op
        # kube hands a new handler the cached objects as adds: one sync covers them all
        self._poke()
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()
        await self.config_maps.stop()
        await self.secrets.stop()

    def _poke(self) -> None:
        self.queue.add((PUBLIC_NAMESPACE, CLUSTER_INFO))

    def _config_map_changed(self, event: str, obj: Obj, old: Obj | None) -> None:
        # a deleted ConfigMap leaves nothing to sign
        if event != "DELETED" and object_key(obj) == (PUBLIC_NAMESPACE, CLUSTER_INFO):
            self._poke()

    def _secret_changed(self, event: str, obj: Obj, old: Obj | None) -> None:
        if is_token_secret(obj):
            self._poke()

    def tokens(self) -> dict[str, bytes]:
        """The tokens that sign now: id → secret."""
        found: dict[str, bytes] = {}
        now = self.clock()
        for secret in self.secrets.items():
            if not is_token_secret(secret):
                continue
            signing = signing_token(secret, now)
            if signing is not None:
                found.setdefault(*signing)
        return found

    async def _sync(self, key: Key) -> None:
        current = self.config_maps.get(PUBLIC_NAMESPACE, CLUSTER_INFO)
        if current is None:
            return
        data = signed_data(current.get("data") or {}, self.tokens())
        if data is None:
            return
        updated = copy.deepcopy(current)
        updated["data"] = data
        try:
            await self.client.update("configmaps", updated)
        except ApiError as err:
            if err.code not in (404, 409):
                log.debug("bootstrapsigner: updating %s/%s: %s", PUBLIC_NAMESPACE, CLUSTER_INFO, err)
