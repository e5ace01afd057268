"""The kubelet's TLS bootstrap: the request it makes and when a kept certificate still serves
(pkg/kubelet/certificate/bootstrap, kube 1.33)."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from tenantgpu.apiserver.pki import CertificateAuthority
from tenantgpu.controlplane.csrsigning import sign_request
from tenantgpu.node.bootstrap import certificate_request, digested_name, usable_certificate

CA = CertificateAuthority.create("tenant-a")


def test_the_request_is_a_kubelet_client_request_named_by_its_key_and_subject() -> None:
    key_pem, body = certificate_request("worker-a1")
    spec = body["spec"]
    assert spec["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"  # type: ignore[index]
    assert spec["usages"] == ["digital signature", "client auth"]  # type: ignore[index]
    request = x509.load_pem_x509_csr(base64.b64decode(spec["request"]))  # type: ignore[index]
    assert request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:worker-a1"
    assert [a.value for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:nodes"
    ]
    name = body["metadata"]["name"]  # type: ignore[index]
    # SHA-512/256 is 32 bytes: 43 characters of unpadded base64url
    assert re.fullmatch(r"node-csr-[A-Za-z0-9_-]{43}", name)
    key = serialization.load_pem_private_key(key_pem, password=None)
    assert name == digested_name(key.public_key(), "system:node:worker-a1", ["system:nodes"])  # type: ignore[arg-type]
    # another subject, or another key, is another request
    assert name != digested_name(key.public_key(), "system:node:worker-a2", ["system:nodes"])  # type: ignore[arg-type]
    assert certificate_request("worker-a1")[1]["metadata"]["name"] != name  # type: ignore[index]


def _issued(node: str, ca: CertificateAuthority = CA, seconds: int | None = None) -> bytes:
    key_pem, body = certificate_request(node)
    request = x509.load_pem_x509_csr(base64.b64decode(body["spec"]["request"]))  # type: ignore[index]
    cert = sign_request(request, ["digital signature", "client auth"], seconds, ca.cert_pem, ca.key_pem)
    return cert + key_pem


def test_a_kept_certificate_serves_only_its_node_under_its_cluster_until_near_its_end(tmp_path: Path) -> None:
    pem = _issued("worker-a1")
    assert usable_certificate(pem, "worker-a1", CA.cert_pem)
    assert not usable_certificate(pem, "worker-a2", CA.cert_pem)
    assert not usable_certificate(pem, "worker-a1", CertificateAuthority.create("other").cert_pem)
    assert not usable_certificate(pem, "worker-a1", CA.cert_pem, now=datetime.now(UTC) + timedelta(days=366))
    assert not usable_certificate(b"garbage", "worker-a1", CA.cert_pem)
    short = _issued("worker-a1", seconds=1800)  # half an hour: inside the renewal margin
    assert not usable_certificate(short, "worker-a1", CA.cert_pem)
