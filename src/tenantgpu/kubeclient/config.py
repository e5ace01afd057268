"""Load a kubeconfig (client certificate or bearer token, cluster CA) into what an HTTPS session needs."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import ssl
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class KubeConfig:
    """One context of a kubeconfig, resolved: the server URL and the credentials to present."""

    server: str
    ca_data: bytes | None = None
    client_cert_data: bytes | None = None
    client_key_data: bytes | None = None
    token: str | None = None
    insecure_skip_tls_verify: bool = False
    namespace: str = "default"

    def with_credentials(self, *, token: str | None = None, client_pem: bytes | None = None) -> KubeConfig:
        """The same cluster with only these credentials: a bearer token, or a PEM holding a client
        certificate and its key; neither is an anonymous client."""
        return dataclasses.replace(self, token=token, client_cert_data=client_pem, client_key_data=client_pem)

    def ssl_context(self) -> ssl.SSLContext | bool:
        """An SSL context verifying the cluster CA and presenting the client certificate, if any."""
        if not self.server.startswith("https"):
            return False
        if self.ca_data:
            # Only the cluster CA: loading the system trust store costs ~60 ms per context.
            ctx = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations(cadata=self.ca_data.decode())
        else:
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if self.insecure_skip_tls_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.client_cert_data and self.client_key_data:
            load_cert_chain(ctx, self.client_cert_data, self.client_key_data)
        return ctx


class ResumingContext(ssl.SSLContext):
    """A client context that resumes its last TLS session with the server.

    A controller opens one connection per watch, a dozen or more per API server; each full handshake
    verifies the server's certificate chain and signs with the client key on both ends, about 0.8 ms
    of CPU each. A resumed one skips both (the server keeps the client certificate in the session, so it
    still knows the caller). Sessions come from the connections this context made, so a session is
    only ever offered to the server that issued it (one context per kubeconfig cluster); a server that
    no longer accepts it (restarted) just does the full handshake.
    """

    def wrap_bio(  # type: ignore[override]
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        state = self.__dict__.setdefault("_resumption", {"session": None, "last": None})
        last = state["last"]
        # A session exists only once its handshake is done (TLS 1.3 sends the ticket just after): take
        # one from the last connection when there is none yet, or when that connection could not resume
        # (the server restarted). Reading a session costs about 0.3 ms (OpenSSL serializes it), so it
        # is read only then.
        if (
            last is not None
            and last.version() is not None
            and (state["session"] is None or not last.session_reused)
        ):
            offered = _session_of(last)
            if offered is not None and offered.has_ticket:
                state["session"] = offered
        if session is None and not server_side:
            session = state["session"]
        made = super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)
        state["last"] = made
        return made


def _session_of(made: ssl.SSLObject) -> ssl.SSLSession | None:
    try:
        return made.session
    except (ValueError, ssl.SSLError):
        return None  # OpenSSL has no session to give for a connection whose handshake failed


def load_cert_chain(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """Load a PEM certificate and key given as bytes into `ctx`."""
    # ssl only loads a certificate chain from files; keep them private and short-lived.
    with tempfile.TemporaryDirectory(prefix="tenantgpu-kc-") as tmp:
        cert_path, key_path = Path(tmp) / "c.pem", Path(tmp) / "k.pem"
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        ctx.load_cert_chain(str(cert_path), str(key_path))


def _data_or_file(entry: dict[str, Any], key: str, base: Path) -> bytes | None:
    if entry.get(f"{key}-data"):
        return base64.b64decode(entry[f"{key}-data"])
    if entry.get(key):
        path = Path(entry[key])
        if not path.is_absolute():
            path = base / path
        return path.read_bytes()
    return None


def _named(items: list[dict[str, Any]] | None, name: str, what: str) -> dict[str, Any]:
    for item in items or []:
        if item.get("name") == name:
            return item.get(what) or {}
    raise ValueError(f"kubeconfig has no {what} named {name!r}")


def _exec_credential(spec: dict[str, Any]) -> tuple[str | None, bytes | None, bytes | None]:
    """Run a client-go credential plugin (`users[].user.exec`) once and read its ExecCredential.

    Tokens are not refreshed when they expire; restart the component (enough for a lab session).
    """
    env = dict(os.environ)
    for item in spec.get("env") or []:
        env[item["name"]] = item["value"]
    request = {"apiVersion": spec.get("apiVersion", "client.authentication.k8s.io/v1"), "kind": "ExecCredential",
               "spec": {"interactive": False}}  # fmt: skip
    env["KUBERNETES_EXEC_INFO"] = json.dumps(request)
    try:
        done = subprocess.run(
            [spec["command"], *(spec.get("args") or [])], env=env, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ValueError(f"credential plugin {spec.get('command')}: {err}") from None
    if done.returncode != 0:
        raise ValueError(f"credential plugin {spec.get('command')} failed: {done.stderr.strip()[:200]}")
    status = (json.loads(done.stdout or "{}").get("status")) or {}
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    return status.get("token"), cert.encode() if cert else None, key.encode() if key else None


def load_kubeconfig(path: str | os.PathLike[str], context: str | None = None) -> KubeConfig:
    """Read a kubeconfig file; `context` defaults to its current-context."""
    path = Path(path)
    doc = yaml.safe_load(path.read_text()) or {}
    base = path.parent
    context_name = context or doc.get("current-context")
    if not context_name:
        contexts = doc.get("contexts") or []
        if not contexts:
            raise ValueError(f"{path}: kubeconfig has no contexts")
        context_name = contexts[0]["name"]
    ctx = _named(doc.get("contexts"), context_name, "context")
    cluster = _named(doc.get("clusters"), ctx.get("cluster", ""), "cluster")
    user = _named(doc.get("users"), ctx["user"], "user") if ctx.get("user") else {}
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = Path(user["tokenFile"]).read_text().strip()
    cert = _data_or_file(user, "client-certificate", base)
    key = _data_or_file(user, "client-key", base)
    if not token and not cert and user.get("exec"):
        token, cert, key = _exec_credential(user["exec"])
    return KubeConfig(
        server=str(cluster.get("server", "")).rstrip("/"),
        ca_data=_data_or_file(cluster, "certificate-authority", base),
        client_cert_data=cert,
        client_key_data=key,
        token=token,
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify", False)),
        namespace=ctx.get("namespace") or "default",
    )
