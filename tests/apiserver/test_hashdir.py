"""The hashed CA directory: OpenSSL's own subject hash, and a TLS server that finds CAs filed after it started."""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tenantgpu.apiserver.auth import SharedClientTrust
from tenantgpu.apiserver.hashdir import CADirectory, subject_hash
from tenantgpu.apiserver.pki import CertificateAuthority, ServerPKI
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore


def _self_signed(name: x509.Name) -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    builder = x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
    builder = builder.serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
    return builder.sign(key, hashes.SHA256())


def _attr(oid: x509.ObjectIdentifier, value: str) -> x509.NameAttribute:
    return x509.NameAttribute(oid, value)


# What `openssl x509 -hash -noout` (OpenSSL 3.0.19) printed for certificates with these subjects. The
# hash covers only the subject, canonicalised: case, surrounding and repeated whitespace do not count.
OPENSSL_HASHES = [
    (x509.Name([_attr(NameOID.COMMON_NAME, "tenant-a-ca")]), "c69bb517"),
    (x509.Name([_attr(NameOID.COMMON_NAME, "tenant-b-ca")]), "9b3eb15b"),
    (x509.Name([_attr(NameOID.COMMON_NAME, "  Mixed  Case\tName ")]), "f7ef3b8c"),
    (
        x509.Name(
            [
                _attr(NameOID.COUNTRY_NAME, "DE"),
                _attr(NameOID.ORGANIZATION_NAME, "Clastix"),
                _attr(NameOID.COMMON_NAME, "kubernetes"),
            ]
        ),
        "0b1edfa0",
    ),
    (
        x509.Name(
            [
                x509.RelativeDistinguishedName(
                    [_attr(NameOID.COMMON_NAME, "b"), _attr(NameOID.ORGANIZATION_NAME, "a")]
                )
            ]
        ),
        "40a68d2b",
    ),
    (
        x509.Name([_attr(NameOID.COMMON_NAME, "Ünïcode Näme"), _attr(NameOID.EMAIL_ADDRESS, "X@Y.org")]),
        "cd2a572b",
    ),
    (
        x509.Name(
            [
                _attr(NameOID.COMMON_NAME, "x" * 64),
                _attr(NameOID.ORGANIZATION_NAME, "y" * 64),
                _attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "z" * 64),
            ]
        ),
        "b6b4e14e",
    ),
]


@pytest.mark.parametrize(("name", "expected"), OPENSSL_HASHES, ids=[h for _, h in OPENSSL_HASHES])
def test_subject_hash_is_the_one_openssl_prints(name: x509.Name, expected: str) -> None:
    assert subject_hash(_self_signed(name)) == expected


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> None:
    """A TLS handshake over memory buffers; raises ssl.SSLError when either side refuses."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    client_side = client.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    done = {"server": False, "client": False}
    for _ in range(20):
        for side, obj in (("client", client_side), ("server", server_side)):
            if done[side]:
                continue
            try:
                obj.do_handshake()
                done[side] = True
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            # TLS 1.3 sends the server's verdict on the client certificate after the client's Finished.
            client_side.write(b"x")
            s_in.write(c_out.read())
            server_side.read(1)
            return
    raise AssertionError("the handshake did not finish")


def _server_context(tmp_path: Path, trust: SharedClientTrust) -> ssl.SSLContext:
    ca = CertificateAuthority.create("server-ca")
    cert, key = ca.issue_serving()
    (tmp_path / "s.crt").write_bytes(cert)
    (tmp_path / "s.key").write_bytes(key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "s.crt", tmp_path / "s.key")
    context.verify_mode = ssl.CERT_OPTIONAL
    trust.attach(context)
    context.load_verify_locations(cadata=ca.cert_pem.decode())
    return context


def _client_context(tmp_path: Path, ca: CertificateAuthority) -> ssl.SSLContext:
    cert, key = ca.issue_client("someone", ["system:masters"])
    (tmp_path / "c.crt").write_bytes(cert)
    (tmp_path / "c.key").write_bytes(key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(tmp_path / "c.crt", tmp_path / "c.key")
    return context


def test_a_server_accepts_certificates_of_a_ca_filed_after_it_started(tmp_path: Path) -> None:
    trust = SharedClientTrust()
    server = _server_context(tmp_path, trust)
    later = CertificateAuthority.create("tenant-later-ca")
    stranger = CertificateAuthority.create("tenant-stranger-ca")
    trust.add_ca(later.cert_pem)

    _handshake(server, _client_context(tmp_path, later))
    with pytest.raises(ssl.SSLError):
        _handshake(server, _client_context(tmp_path, stranger))


def test_cas_with_one_subject_are_all_filed_and_all_accepted(tmp_path: Path) -> None:
    # Two TenantControlPlanes of one name in two namespaces have CAs of one subject.
    first, second = CertificateAuthority.create("tenant-a-ca"), CertificateAuthority.create("tenant-a-ca")
    trust = SharedClientTrust()
    trust.add_ca(first.cert_pem)
    trust.add_ca(second.cert_pem)
    trust.add_ca(first.cert_pem)  # once is enough

    server = _server_context(tmp_path, trust)
    _handshake(server, _client_context(tmp_path, first))
    _handshake(server, _client_context(tmp_path, second))


def test_the_directory_holds_each_ca_once_under_its_hash() -> None:
    directory = CADirectory()
    ca = CertificateAuthority.create("tenant-c-ca")
    directory.add(ca.cert_pem)
    directory.add(ca.cert_pem)
    assert sorted(p.name for p in directory.path.iterdir()) == [f"{subject_hash(ca.certificate)}.0"]


def test_tenants_whose_cas_share_a_name_pass_the_handshake_of_each_others_servers(tmp_path: Path) -> None:
    """Two TenantControlPlanes named tenant-a in two namespaces: both CAs are `CN=tenant-a-ca`. Each
    server must still let the other's certificate through TLS (to answer 401), and its own."""
    trust = SharedClientTrust()
    store = SQLiteDatastore(tmp_path / "s.db")
    try:
        servers = []
        for namespace in ("team-1", "team-2"):
            pki = ServerPKI.create("tenant-a")
            config = APIServerConfig(name=namespace, datastore=store, pki=pki, client_trust=trust)
            servers.append((pki, APIServer(config)._ssl_context()))
        for _, context in servers:
            for pki, _ in servers:
                _handshake(context, _client_context(tmp_path, pki.ca))
    finally:
        store.close()


def test_a_directory_of_its_own_is_emptied_at_start_and_kept(tmp_path: Path) -> None:
    # What a process killed with kill -9 left behind is stale; the next process starts from nothing.
    (tmp_path / "cas").mkdir()
    (tmp_path / "cas" / "00000000.0").write_text("stale")
    directory = CADirectory(tmp_path / "cas")
    ca = CertificateAuthority.create("tenant-d-ca")
    directory.add(ca.cert_pem)
    del directory
    assert sorted(p.name for p in (tmp_path / "cas").iterdir()) == [f"{subject_hash(ca.certificate)}.0"]
