"""A tenant's PKI: certificates chain to the tenant's own CA and carry what kubectl checks."""

import ssl

from cryptography import x509

from tenantgpu.kamaji import pki


def test_serving_certificate_chains_to_its_ca_and_covers_loopback() -> None:
    ca = pki.generate_ca("tenant-a-ca")
    serving = pki.issue_serving_certificate(ca, "kube-apiserver", ips=["127.0.0.1"], dns_names=["localhost"])
    assert pki.is_signed_by(serving.cert_pem, ca)
    cert = x509.load_pem_x509_certificate(serving.cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_certificates_of_another_tenant_do_not_verify() -> None:
    ca_a, ca_b = pki.generate_ca("a"), pki.generate_ca("b")
    admin_b = pki.issue_client_certificate(ca_b, pki.ADMIN_USER, (pki.ADMIN_GROUP,))
    assert not pki.is_signed_by(admin_b.cert_pem, ca_a)
    assert pki.is_signed_by(admin_b.cert_pem, ca_b)


def test_admin_client_certificate_names_user_and_group() -> None:
    ca = pki.generate_ca()
    admin = pki.issue_client_certificate(ca, pki.ADMIN_USER, (pki.ADMIN_GROUP,))
    assert pki.certificate_subject(admin.cert_pem) == ("kubernetes-admin", ("system:masters",))


def test_python_ssl_loads_the_serving_pair(tmp_path) -> None:
    ca = pki.generate_ca()
    serving = pki.issue_serving_certificate(ca, "kube-apiserver", ips=["127.0.0.1"], dns_names=[])
    (tmp_path / "c.pem").write_bytes(serving.cert_pem)
    (tmp_path / "k.pem").write_bytes(serving.key_pem)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
    ctx.load_verify_locations(cadata=ca.cert_pem.decode())


def test_secret_encoding_round_trips() -> None:
    assert pki.unb64(pki.b64(b"\x00pem\xff")) == b"\x00pem\xff"
