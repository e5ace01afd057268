"""kube-controller-manager's csrapproving controller: which requests it recognises as a kubelet's client
certificate request, and the SubjectAccessReview it asks for each (sarapprove.go, kube 1.33)."""

from __future__ import annotations

import base64
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tenantgpu.controlplane.csrapproving import NODE_CLIENT, SELF_NODE_CLIENT, access_review, approval_kinds

KUBELET_CLIENT = "kubernetes.io/kube-apiserver-client-kubelet"


def _csr(
    common_name: str = "system:node:w1",
    organizations: tuple[str, ...] = ("system:nodes",),
    *,
    signer: str = KUBELET_CLIENT,
    usages: tuple[str, ...] = ("digital signature", "client auth"),
    username: str = "system:bootstrap:abcdef",
    conditions: tuple[str, ...] = (),
    certificate: str = "",
) -> dict[str, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    names.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    request = (
        x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names)).sign(key, hashes.SHA256())
    )
    pem = request.public_bytes(serialization.Encoding.PEM)
    return {
        "metadata": {"name": "node-csr-x"},
        "spec": {
            "request": base64.b64encode(pem).decode(),
            "signerName": signer,
            "usages": list(usages),
            "username": username,
            "uid": "u-1",
            "groups": ["system:bootstrappers", "system:authenticated"],
            "extra": {"scopes": ["a"]},
        },
        "status": {
            "conditions": [{"type": c, "status": "True"} for c in conditions],
            **({"certificate": certificate} if certificate else {}),
        },
    }


def test_a_first_kubelet_request_is_a_nodeclient_request() -> None:
    assert approval_kinds(_csr()) == [NODE_CLIENT]
    assert NODE_CLIENT[1] == "Auto approving kubelet client certificate after SubjectAccessReview."


def test_a_renewal_by_the_node_itself_is_tried_as_selfnodeclient_first() -> None:
    kinds = approval_kinds(_csr(username="system:node:w1"))
    assert kinds == [SELF_NODE_CLIENT, NODE_CLIENT]
    assert SELF_NODE_CLIENT[1] == "Auto approving self kubelet client certificate after SubjectAccessReview."


def test_key_encipherment_is_allowed_but_nothing_else() -> None:
    assert approval_kinds(_csr(usages=("digital signature", "key encipherment", "client auth"))) == [
        NODE_CLIENT
    ]
    assert approval_kinds(_csr(usages=("digital signature", "server auth"))) == []
    assert approval_kinds(_csr(usages=("client auth",))) == [], "digital signature is required"


def test_requests_the_approver_leaves_alone() -> None:
    assert approval_kinds(_csr(signer="kubernetes.io/kube-apiserver-client")) == []
    assert approval_kinds(_csr(organizations=("system:masters",))) == []
    assert approval_kinds(_csr(common_name="alice")) == []
    assert approval_kinds(_csr(conditions=("Approved",))) == []
    assert approval_kinds(_csr(conditions=("Denied",))) == []
    assert approval_kinds(_csr(certificate="Y2VydA==")) == []
    broken = _csr()
    broken["spec"]["request"] = base64.b64encode(b"not a request").decode()
    assert approval_kinds(broken) == []


def test_the_review_asks_for_the_requester_as_the_request_names_it() -> None:
    review = access_review(_csr(), "nodeclient")
    assert review["kind"] == "SubjectAccessReview"
    assert review["spec"] == {
        "resourceAttributes": {
            "group": "certificates.k8s.io",
            "resource": "certificatesigningrequests",
            "verb": "create",
            "subresource": "nodeclient",
            "version": "*",
        },
        "user": "system:bootstrap:abcdef",
        "uid": "u-1",
        "groups": ["system:bootstrappers", "system:authenticated"],
        "extra": {"scopes": ["a"]},
    }
