"""Authentication (client certificates, service-account tokens) and impersonation of one API server;
authorization is `rbac.py`'s."""

from __future__ import annotations

import base64
import hashlib
import json
import ssl
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from tenantgpu.apiserver.hashdir import CADirectory
from tenantgpu.apiserver.pki import load_key

ISSUER = "https://kubernetes.default.svc.cluster.local"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
SERVICE_ACCOUNTS = "system:serviceaccounts"
NODES = "system:nodes"


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        user: dict[str, Any] = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            user["uid"] = self.uid
        if self.extra:
            user["extra"] = self.extra
        return user


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenSigner:
    """Signs and verifies service-account JWTs (ES256) with the server's service-account key."""

    def __init__(self, key_pem: bytes) -> None:
        self._key = load_key(key_pem)
        self._public = self._key.public_key()
        der = self._public.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        digest = hashlib.sha256(der).digest()
        self.key_id = _b64url(digest)
        self._verified: dict[str, tuple[UserInfo, float]] = {}

    def issue(
        self,
        namespace: str,
        name: str,
        uid: str = "",
        *,
        expiration_seconds: int | None = None,
        audiences: Iterable[str] = (ISSUER,),
    ) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": ISSUER,
            "aud": list(audiences),
            "sub": f"system:serviceaccount:{namespace}:{name}",
            "iat": now,
            "nbf": now,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": {
                "namespace": namespace,
                "serviceaccount": {"name": name, "uid": uid or str(uuid.uuid4())},
            },
        }
        if expiration_seconds is not None:
            claims["exp"] = now + expiration_seconds
        header = {"alg": "ES256", "kid": self.key_id, "typ": "JWT"}
        signing_input = (
            _b64url(json.dumps(header, separators=(",", ":")).encode())
            + "."
            + _b64url(json.dumps(claims, separators=(",", ":")).encode())
        )
        der = self._key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return signing_input + "." + _b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))

    def verify(self, token: str) -> UserInfo | None:
        """The service account a token names, or None if this server did not sign it or it expired."""
        cached = self._verified.get(token)
        now = time.time()
        if cached is not None and cached[1] > now:
            return cached[0]
        parts = token.split(".")
        if len(parts) != 3:
            return None
        try:
            header = json.loads(_unb64url(parts[0]))
            claims = json.loads(_unb64url(parts[1]))
            signature = _unb64url(parts[2])
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(header, dict) or header.get("alg") != "ES256" or len(signature) != 64:
            return None
        der = encode_dss_signature(
            int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
        )
        try:
            self._public.verify(der, (parts[0] + "." + parts[1]).encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            return None
        if not isinstance(claims, dict) or claims.get("iss") != ISSUER:
            return None
        expires = claims.get("exp")
        if isinstance(expires, (int, float)) and expires <= now:
            return None
        info = claims.get("kubernetes.io") or {}
        namespace = info.get("namespace", "")
        account = (info.get("serviceaccount") or {}).get("name", "")
        if not namespace or not account:
            return None
        user = UserInfo(
            f"system:serviceaccount:{namespace}:{account}",
            (SERVICE_ACCOUNTS, f"{SERVICE_ACCOUNTS}:{namespace}", AUTHENTICATED),
            (info.get("serviceaccount") or {}).get("uid", ""),
        )
        if len(self._verified) > 4096:
            self._verified.clear()
        self._verified[token] = (
            user,
            min(float(expires), now + 60) if isinstance(expires, (int, float)) else now + 60,
        )
        return user


def subject_parts(subject: Iterable[Iterable[tuple[str, str]]]) -> tuple[str, list[str]]:
    """A verified peer certificate's user (CN) and groups (O entries), from `getpeercert()["subject"]`:
    kube's x509 authenticator, which the kubelet's uses too."""
    common_name = ""
    organizations: list[str] = []
    for rdn in subject:
        for key, value in rdn:
            if key == "commonName":
                common_name = value
            elif key == "organizationName":
                organizations.append(value)
    return common_name, organizations


class SharedClientTrust:
    """The CAs that every API server sharing this object accepts at the TLS layer.

    Without it, a client certificate from another tenant's CA fails the TLS handshake; with it, the
    handshake succeeds and the server answers 401, because users still come only from its own CA.
    The CAs sit in one hashed directory that every server's SSL context looks in when a client names
    an issuer, so a CA added later reaches servers already running, and a new server or CA costs the
    same however many tenants there are.
    """

    def __init__(self, directory: Path | None = None) -> None:
        # The owner's own directory (beside its datastore) is cleared on the next start even after
        # kill -9; without one, a temporary directory is used.
        self._directory = CADirectory(directory)

    def add_ca(self, ca_pem: bytes | str) -> None:
        self._directory.add(ca_pem.encode() if isinstance(ca_pem, str) else ca_pem)

    def attach(self, context: ssl.SSLContext) -> None:
        context.load_verify_locations(capath=str(self._directory.path))


class TokenAuthenticator(Protocol):
    """One more kind of bearer token the server accepts (bootstrap tokens, `bootstraptoken.py`)."""

    def authenticate(self, token: str) -> UserInfo | None: ...


class Authenticator:
    """Maps a request's client certificate or bearer token to a user; None means anonymous."""

    def __init__(
        self,
        ca_pem: bytes,
        signer: TokenSigner,
        *,
        check_issuer: bool,
        tokens: Iterable[TokenAuthenticator] = (),
    ) -> None:
        self._ca = x509.load_pem_x509_certificate(ca_pem)
        self._signer = signer
        # after service-account tokens, in kube's order; each tells its own tokens from the others'
        self._tokens = tuple(tokens)
        # When other tenants' CAs are trusted at the TLS layer (so that their certificates get a clean
        # 401 instead of a handshake failure), each certificate must also be checked against our own CA.
        self._check_issuer = check_issuer
        self._issued_here: dict[bytes, bool] = {}

    def from_certificate(self, peercert: dict[str, Any] | None, der: bytes | None) -> UserInfo | bool | None:
        """The certificate's user; False for a certificate this server's CA did not issue."""
        if not peercert:
            return None
        if self._check_issuer and not self._issued_by_us(der):
            return False
        name, groups = subject_parts(peercert.get("subject", ()))
        if not name:
            return False
        return UserInfo(name, (*groups, AUTHENTICATED))

    def _issued_by_us(self, der: bytes | None) -> bool:
        if der is None:
            return False
        known = self._issued_here.get(der)
        if known is not None:
            return known
        try:
            cert = x509.load_der_x509_certificate(der)
            cert.verify_directly_issued_by(self._ca)
            result = True
        except (ValueError, TypeError, InvalidSignature):
            result = False
        if len(self._issued_here) > 1024:
            self._issued_here.clear()
        self._issued_here[der] = result
        return result

    def from_token(self, token: str) -> UserInfo | None:
        """The token's user, or None when no authenticator accepts it (kube's 401)."""
        user = self._signer.verify(token)
        if user is not None:
            return user
        for other in self._tokens:
            if (user := other.authenticate(token)) is not None:
                return user
        return None


@dataclass(frozen=True)
class Attributes:
    """What a request wants to do, as in kube's `authorizer.Attributes`."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    # A list's, watch's or deletecollection's field selector as (field, "=" or "!=", value) terms: kube's
    # `GetFieldSelector()`, by which the Node authorizer lets a kubelet list its own pods.
    field_selector: tuple[tuple[str, str, str], ...] = ()

    @property
    def is_resource(self) -> bool:
        return bool(self.resource)


SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
# Who a request without any credential is (kube's anonymous authenticator).
ANONYMOUS_USER = UserInfo(ANONYMOUS, (UNAUTHENTICATED,))
_EXTRA_PREFIX = "impersonate-extra-"


@dataclass(frozen=True)
class ImpersonationRequest:
    """What `Impersonate-*` headers (`kubectl --as`, `--as-group`, `--as-uid`) ask for: the user to act
    as, and what the caller must be allowed to `impersonate` for it, as kube's impersonation filter asks
    it: (API group, resource, name) per user or service account, group, extra value and uid."""

    user: UserInfo
    checks: tuple[tuple[str, str, str], ...]


class ImpersonationError(ValueError):
    """Groups or extras asked for without a user: kube's 400."""


def impersonation(headers: Any) -> ImpersonationRequest | None:
    """The user the request acts as, from its headers (a case-insensitive mapping with `getall`), or
    None when it impersonates no one. Groups come from `Impersonate-Group`; a service account's name
    brings its groups, and every impersonated user but the anonymous one is `system:authenticated`."""
    name = headers.get("Impersonate-User")
    groups = list(headers.getall("Impersonate-Group", []))
    uid = headers.get("Impersonate-Uid") or ""
    extra: dict[str, list[str]] = {}
    for key in headers:
        if key.lower().startswith(_EXTRA_PREFIX):
            extra.setdefault(key[len(_EXTRA_PREFIX) :].lower(), []).extend(headers.getall(key, []))
    if name is None:
        if groups or extra or uid:
            asked = ", ".join(
                [
                    *(f"group {g}" for g in groups),
                    *(f"extra {k}" for k in extra),
                    *([f"uid {uid}"] if uid else []),
                ]
            )
            raise ImpersonationError(f"requested [{asked}] without impersonating a user")
        return None
    checks: list[tuple[str, str, str]] = []
    if name.startswith(SERVICE_ACCOUNT_PREFIX) and name.count(":") == 3:
        namespace, account = name[len(SERVICE_ACCOUNT_PREFIX) :].split(":", 1)
        checks.append(("", "serviceaccounts", account))
        if not groups:  # a service account's groups are known, unless groups were asked for
            groups = [SERVICE_ACCOUNTS, f"{SERVICE_ACCOUNTS}:{namespace}"]
    else:
        checks.append(("", "users", name))
    checks += [("", "groups", g) for g in headers.getall("Impersonate-Group", [])]
    checks += [("authentication.k8s.io", f"userextras/{k}", v) for k, values in extra.items() for v in values]
    if uid:
        checks.append(("authentication.k8s.io", "uids", uid))
    if name != ANONYMOUS and AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    return ImpersonationRequest(UserInfo(name, tuple(groups), uid, extra), tuple(checks))
