"""Test helpers for the tunnel: a tenant CA, tenant-signed tokens, an echo server on the 'worker'."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import hashlib
import hmac
import ipaddress
import json
import ssl
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tenantgpu.konnectivity.agent import Backoff, ProxyAgent
from tenantgpu.konnectivity.server import service_account_username

AGENT_SA = service_account_username("kube-system", "konnectivity-agent")
FAST_BACKOFF = Backoff(initial=0.05, cap=0.4, factor=2.0, jitter=0.2)


@dataclass(frozen=True)
class TenantCA:
    """A tenant's certificate authority, able to issue serving certificates."""

    cert_pem: bytes
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls, name: str) -> TenantCA:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert.public_bytes(serialization.Encoding.PEM), key, cert)

    def issue(self, *names: str) -> tuple[bytes, bytes]:
        """A serving certificate for DNS names / IP addresses; returns (cert PEM, key PEM)."""
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = []
        for name in names:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                sans.append(x509.DNSName(name))
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return cert.public_bytes(serialization.Encoding.PEM), key_pem


@dataclass(frozen=True)
class TokenIssuer:
    """Stands in for one tenant's service-account token signer and its TokenReview."""

    secret: bytes

    def token(self, username: str) -> str:
        body = base64.urlsafe_b64encode(json.dumps({"sub": username}).encode()).decode()
        signature = hmac.new(self.secret, body.encode(), hashlib.sha256).hexdigest()
        return f"{body}.{signature}"

    async def verify(self, token: str) -> str | None:
        body, _, signature = token.partition(".")
        expected = hmac.new(self.secret, body.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(signature, expected):
            return None
        return str(json.loads(base64.urlsafe_b64decode(body))["sub"])


AgentFactory = Callable[..., Awaitable[ProxyAgent]]


@dataclass
class EchoServer:
    """A TCP server on the 'worker' that echoes with a prefix naming itself, and counts connections."""

    name: bytes
    port: int = 0
    accepted: int = 0
    closed_by_peer: int = 0
    server: asyncio.Server | None = None
    writers: list[asyncio.StreamWriter] | None = None

    async def start(self) -> None:
        self.writers = []
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None and self.writers is not None
        for writer in self.writers:
            writer.close()
        self.server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self.writers is not None
        self.accepted += 1
        self.writers.append(writer)
        try:
            while chunk := await reader.read(65536):
                if chunk.startswith(b"QUIT"):
                    writer.close()
                    return
                writer.write(self.name + b":" + chunk if chunk.startswith(b"WHO") else chunk)
                await writer.drain()
            self.closed_by_peer += 1
        except ConnectionError:
            self.closed_by_peer += 1
        finally:
            writer.close()


def client_ssl_context(ca_pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    return context


WEBHOOK_HOST = "hami-scheduler.kube-system.svc"


class Webhook:
    """A mutating webhook on the worker that answers AdmissionReviews and counts TCP connections."""

    def __init__(self) -> None:
        self.connections: set[int] = set()
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self, ca: TenantCA) -> None:
        cert_pem, key_pem = ca.issue(WEBHOOK_HOST, "hami-scheduler.kube-system")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with _pem_files(cert_pem, key_pem) as (cert_file, key_file):
            context.load_cert_chain(cert_file, key_file)
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.router.add_post("/webhook", self._review)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def policy(self, host: str, port: int) -> tuple[str, int]:
        if (host, port) != (WEBHOOK_HOST, 443):
            raise LookupError(f"no service {host}:{port}")
        return "127.0.0.1", self.port

    async def _review(self, request: web.Request) -> web.Response:
        self.connections.add(id(request.transport))
        review = await request.json()
        uid = review["request"]["uid"]
        return web.json_response(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": uid, "allowed": True, "patchType": "JSONPatch", "patch": ""},
                "echoBytes": len(review["request"].get("object", {}).get("blob", "")),
            }
        )


class _pem_files:
    """Temporary PEM files, since ssl.SSLContext.load_cert_chain reads only from paths."""

    def __init__(self, cert_pem: bytes, key_pem: bytes) -> None:
        self._dir = tempfile.TemporaryDirectory()
        self.cert = f"{self._dir.name}/tls.crt"
        self.key = f"{self._dir.name}/tls.key"
        with open(self.cert, "wb") as f:
            f.write(cert_pem)
        with open(self.key, "wb") as f:
            f.write(key_pem)

    def __enter__(self) -> tuple[str, str]:
        return self.cert, self.key

    def __exit__(self, *exc: object) -> None:
        self._dir.cleanup()
