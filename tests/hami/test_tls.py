"""The webhook's and the kubelet's serving certificates pass a strict verifier.

Python 3.13's default client context sets VERIFY_X509_STRICT, and Go's crypto/x509 (the real
kube-apiserver calling a webhook) is strict too: a leaf must name its issuer by key identifier.
"""

from __future__ import annotations

import ssl

import pytest

from tenantgpu.hami.tls import ServingCert, service_hosts


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str) -> None:
    """A whole TLS handshake in memory, raising what the client's verification raises."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(c_in, c_out, server_hostname=hostname)
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for name, side, outgoing, incoming in (
            ("client", client_side, c_out, s_in),
            ("server", server_side, s_out, c_in),
        ):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            incoming.write(outgoing.read())
        if all(done.values()):
            return
    raise AssertionError("the handshake did not finish")


def _strict_client(ca_pem: bytes) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    return ctx


@pytest.mark.parametrize(
    "host", ["hami-scheduler.kube-system.svc", "hami-scheduler.kube-system.svc.cluster.local", "127.0.0.1"]
)
def test_the_webhook_certificate_verifies_strictly_for_each_name_the_service_is_dialled_by(host: str) -> None:
    cert = ServingCert.issue(service_hosts("hami-scheduler", "kube-system", ["127.0.0.1"]))
    _handshake(cert.server_context(), _strict_client(cert.ca_pem), host)


def test_a_strict_verifier_still_refuses_a_name_the_certificate_does_not_carry() -> None:
    cert = ServingCert.issue(service_hosts("hami-scheduler", "kube-system"))
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        _handshake(cert.server_context(), _strict_client(cert.ca_pem), "other.kube-system.svc")


def test_a_certificate_from_another_ca_is_refused() -> None:
    cert = ServingCert.issue(["worker-0"], common_name="worker-0@tenantgpu-kubelet")
    other = ServingCert.issue(["worker-0"], common_name="worker-0@tenantgpu-kubelet")
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(cert.server_context(), _strict_client(other.ca_pem), "worker-0")
