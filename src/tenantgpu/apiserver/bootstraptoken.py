"""Bootstrap tokens: their form, the Secrets that hold them, and kube-apiserver's authenticator for them
(`--enable-bootstrap-token-auth=true`, which Kamaji passes to every tenant's API server).

Facts from Kubernetes 1.33 (`plugin/pkg/auth/authenticator/token/bootstrap/bootstrap.go` and
`k8s.io/cluster-bootstrap`'s `token/api`, `token/util`, `util/secrets`, `util/tokens`):
- a token is `<id>.<secret>`, six then sixteen characters of `[a-z0-9]`; anything else is not a
  bootstrap token and is left to the other authenticators;
- it lives in Secret `kube-system/bootstrap-token-<id>` of type `bootstrap.kubernetes.io/token`, whose
  data `token-id` and `token-secret` hold its two halves;
- `expiration` (RFC 3339) ends it; a value that cannot be read counts as expired;
- `usage-bootstrap-authentication: "true"` lets it authenticate, `usage-bootstrap-signing: "true"` lets
  the bootstrapsigner sign `kube-public/cluster-info` with it;
- it authenticates as `system:bootstrap:<id>` in `system:bootstrappers` and the groups its
  `auth-extra-groups` lists (comma-separated, each `system:bootstrappers:…`), sorted and without
  duplicates; one invalid group refuses the token.

A token that matches a Secret but fails a check is refused as an unknown token is: 401, with the reason
logged only at debug level (kube's verbosity 3). kube-apiserver remembers a token's success for 10 s;
this server reads the Secret at each request, so a token is refused as soon as its Secret goes.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from tenantgpu.apiserver.auth import AUTHENTICATED, UserInfo

log = logging.getLogger(__name__)

Obj = dict[str, Any]

SECRET_TYPE = "bootstrap.kubernetes.io/token"
SECRET_NAMESPACE = "kube-system"
SECRET_PREFIX = "bootstrap-token-"
TOKEN_ID_KEY = "token-id"
TOKEN_SECRET_KEY = "token-secret"
EXPIRATION_KEY = "expiration"
EXTRA_GROUPS_KEY = "auth-extra-groups"
USAGE_AUTHENTICATION = "usage-bootstrap-authentication"
USAGE_SIGNING = "usage-bootstrap-signing"
USER_PREFIX = "system:bootstrap:"
DEFAULT_GROUP = "system:bootstrappers"

_TOKEN = re.compile(r"([a-z0-9]{6})\.([a-z0-9]{16})")
_SECRET_NAME = re.compile(re.escape(SECRET_PREFIX) + r"([a-z0-9]{6})")
_EXTRA_GROUP = re.compile(r"system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]")
# Go's time.Parse with RFC 3339: upper-case T and Z, optional fractional seconds (after `.` or `,`),
# a ±hh:mm offset.
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(?:(Z)|([+-])(\d{2}):(\d{2}))", re.ASCII
)


@dataclass(frozen=True)
class BootstrapToken:
    """A token's two halves: the public id and the secret."""

    id: str
    secret: str

    @property
    def secret_name(self) -> str:
        return SECRET_PREFIX + self.id


def parse_token(text: str) -> BootstrapToken | None:
    """The token `text` is, or None when it is not of a bootstrap token's form."""
    found = _TOKEN.fullmatch(text)
    return None if found is None else BootstrapToken(found[1], found[2])


def token_id_of(secret_name: str) -> str | None:
    """The token id a Secret's name carries (`bootstrap-token-<id>`), or None for another name."""
    found = _SECRET_NAME.fullmatch(secret_name)
    return None if found is None else found[1]


def is_token_secret(secret: Obj) -> bool:
    """A Secret of the bootstrap token type in kube-system: what the signer and the cleaner watch."""
    meta = secret.get("metadata") or {}
    return secret.get("type") == SECRET_TYPE and meta.get("namespace") == SECRET_NAMESPACE


def data_value(secret: Obj, key: str) -> bytes:
    """One key of the Secret's data, decoded (the API carries it base64); empty when it is absent."""
    value = (secret.get("data") or {}).get(key)
    if not isinstance(value, str):
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return b""


def _parse_rfc3339(text: str) -> datetime | None:
    found = _RFC3339.fullmatch(text)
    if found is None:
        return None
    year, month, day, hour, minute, second, fraction, zulu, sign, off_hours, off_minutes = found.groups()
    try:
        if zulu:
            zone = UTC
        else:
            offset = timedelta(hours=int(off_hours), minutes=int(off_minutes))
            zone = timezone(-offset if sign == "-" else offset)
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=zone)
    except ValueError:  # a day, hour or offset out of range
        return None
    return moment + timedelta(seconds=float(f"0.{fraction}")) if fraction else moment


def expiration(secret: Obj, now: float) -> tuple[float, bool]:
    """(seconds left, expired) of a token Secret at `now`: (0, False) when it has no expiration, and
    (0, True) when it is past or its expiration cannot be read."""
    raw = data_value(secret, EXPIRATION_KEY)
    if not raw:
        return 0.0, False
    moment = _parse_rfc3339(raw.decode("ascii", "replace"))
    if moment is None:
        log.debug(
            "bootstrap token secret %s: expiration %r cannot be read; taken as expired", _name(secret), raw
        )
        return 0.0, True
    remaining = moment.timestamp() - now
    if remaining <= 0:
        log.debug("bootstrap token secret %s expired at %s", _name(secret), raw.decode())
        return 0.0, True
    return remaining, False


def has_expired(secret: Obj, now: float) -> bool:
    return expiration(secret, now)[1]


def groups(secret: Obj) -> tuple[str, ...]:
    """`system:bootstrappers` and the Secret's extra groups, sorted and without duplicates; ValueError
    names the first extra group that is not `system:bootstrappers:…`."""
    found = {DEFAULT_GROUP}
    extra = data_value(secret, EXTRA_GROUPS_KEY).decode("utf-8", "replace")
    if extra:
        for group in extra.split(","):
            if _EXTRA_GROUP.fullmatch(group) is None:
                raise ValueError(f"group {group!r} is not of the form {_EXTRA_GROUP.pattern}")
            found.add(group)
    return tuple(sorted(found))


def _name(secret: Obj) -> str:
    meta = secret.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class BootstrapTokenAuthenticator:
    """Authenticates a bearer token that names a valid bootstrap token Secret. `secret(name)` reads a
    Secret of kube-system from the server's own store (kube's reads its informer's cache); `clock`
    gives the time expirations are checked against."""

    def __init__(self, secret: Callable[[str], Obj | None], clock: Callable[[], float] = time.time) -> None:
        self._secret = secret
        self._clock = clock

    def authenticate(self, text: str) -> UserInfo | None:
        token = parse_token(text)
        if token is None:
            return None
        secret = self._secret(token.secret_name)
        if secret is None:
            log.debug("no secret %s/%s for a bootstrap token", SECRET_NAMESPACE, token.secret_name)
            return None
        refused = self._refusal(secret, token)
        if refused:
            log.debug("bootstrap token secret %s matches the bearer token but %s", _name(secret), refused)
            return None
        try:
            found = groups(secret)
        except ValueError as err:
            log.debug("bootstrap token secret %s: invalid %s: %s", _name(secret), EXTRA_GROUPS_KEY, err)
            return None
        return UserInfo(USER_PREFIX + token.id, (*found, AUTHENTICATED))

    def _refusal(self, secret: Obj, token: BootstrapToken) -> str:
        """Why the Secret does not let the token in, in kube's order of checks; empty when it does."""
        if (secret.get("metadata") or {}).get("deletionTimestamp"):
            return "is being deleted"
        if secret.get("type") != SECRET_TYPE or secret.get("data") is None:
            return f"is not of type {SECRET_TYPE}"
        # constant time: the comparison must not tell how much of a guessed secret was right
        if not hmac.compare_digest(data_value(secret, TOKEN_SECRET_KEY), token.secret.encode()):
            return f"its {TOKEN_SECRET_KEY} differs"
        if data_value(secret, TOKEN_ID_KEY) != token.id.encode():
            return f"its {TOKEN_ID_KEY} differs"
        if has_expired(secret, self._clock()):
            return "has expired"
        if data_value(secret, USAGE_AUTHENTICATION) != b"true":
            return f"is not marked {USAGE_AUTHENTICATION}=true"
        return ""
