"""Onboarding a user with a CertificateSigningRequest, as on kind: the user's key and request, `kubectl
apply`, `kubectl certificate approve`, the certificate the controller manager's signer issues, and a
kubeconfig built from it that authenticates as the request's subject, subject to RBAC."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from apiserver_harness import Kubectl, RawClient, RunningAPIServer, wait_for
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tenantgpu.apiserver.pki import render_kubeconfig
from tenantgpu.controlplane import ControlPlaneServices
from tenantgpu.kubeclient import KubeClient
from tenantgpu.node.bootstrap import request_certificate

pytestmark = pytest.mark.slow

CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"


def _key_and_request(common_name: str, organizations: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
    """What `openssl req -new -subj /CN=alice/O=…` gives the user: a key and a PEM request."""
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    names += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    request = (
        x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names)).sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return key_pem, request.public_bytes(serialization.Encoding.PEM)


def _manifest(
    name: str, request_pem: bytes, *, usages: tuple[str, ...] = ("client auth",), **spec: Any
) -> str:
    body = {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {
            "request": base64.b64encode(request_pem).decode(),
            "signerName": CLIENT_SIGNER,
            "usages": list(usages),
            **spec,
        },
    }
    return yaml.safe_dump(body)


def _rows(kubectl: Kubectl, *args: str, **kwargs: Any) -> list[list[str]]:
    return [line.split() for line in kubectl("get", "csr", *args, **kwargs).stdout.splitlines()]


@pytest.fixture(scope="module")
def ready(apiserver: RunningAPIServer, services: ControlPlaneServices) -> RunningAPIServer:
    admin = RawClient(apiserver.kubeconfig)
    wait_for(
        "the condition",
        lambda: admin.request("GET", "/readyz/poststarthook/rbac/bootstrap-roles").body == b"ok",
    )
    return apiserver


def _certificate(kubectl: Kubectl, name: str) -> bytes:
    encoded = wait_for(
        "the condition",
        lambda: kubectl("get", "csr", name, "-o", "jsonpath={.status.certificate}").stdout.strip(),
    )
    return base64.b64decode(encoded)


def _kubeconfig(apiserver: RunningAPIServer, user: str, cert_pem: bytes, key_pem: bytes) -> Path:
    text = render_kubeconfig(
        "tenant-a",
        apiserver.url,
        apiserver.server.ca_pem,
        user,
        client_cert_pem=cert_pem,
        client_key_pem=key_pem,
    )
    return apiserver.write_kubeconfig(f"{user}.kubeconfig", text)


def test_a_user_is_onboarded_through_a_signed_request(ready: RunningAPIServer, kubectl: Kubectl) -> None:
    key_pem, request_pem = _key_and_request("alice", ("dev-team",))
    kubectl("apply", "-f", "-", input=_manifest("alice", request_pem, expirationSeconds=86400))

    header, row = _rows(kubectl)[0], _rows(kubectl, "alice")[1]
    assert header == ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"]
    assert row[0] == "alice" and row[2:] == [CLIENT_SIGNER, "kubernetes-admin", "24h", "Pending"]

    approved = kubectl("certificate", "approve", "alice")
    assert "certificatesigningrequest.certificates.k8s.io/alice approved" in approved.stdout
    cert_pem = _certificate(kubectl, "alice")
    assert _rows(kubectl, "alice")[1][-1] == "Approved,Issued"
    condition = yaml.safe_load(kubectl("get", "csr", "alice", "-o", "yaml").stdout)["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Approved",
        "True",
        "KubectlApprove",
    )
    assert condition["lastUpdateTime"] and condition["lastTransitionTime"]

    certificate = x509.load_pem_x509_certificate(cert_pem)
    assert certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    lifetime = certificate.not_valid_after_utc - certificate.not_valid_before_utc
    assert lifetime.total_seconds() == 86400  # 5 minutes backdated, the same taken off the end
    usages = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]

    alice = _kubeconfig(ready, "alice", cert_pem, key_pem)
    whoami = kubectl("auth", "whoami", "-o", "yaml", kubeconfig=alice)
    info = yaml.safe_load(whoami.stdout)["status"]["userInfo"]
    assert info["username"] == "alice"
    assert info["groups"] == ["dev-team", "system:authenticated"]

    refused = kubectl("create", "deployment", "web", "--image=nginx", kubeconfig=alice, check=False)
    assert refused.returncode != 0
    assert 'User "alice" cannot create resource "deployments"' in refused.stderr

    kubectl("create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice", "-n", "default")
    created = wait_for(
        "the condition",
        lambda: (
            kubectl("create", "deployment", "web", "--image=nginx", kubeconfig=alice, check=False).returncode
            == 0
        ),
    )
    assert created
    assert "web" in kubectl("get", "deployments", kubeconfig=alice).stdout
    # the request spec names who asked, as the server saw it, whatever the manifest said
    spec = yaml.safe_load(kubectl("get", "csr", "alice", "-o", "yaml").stdout)["spec"]
    assert spec["username"] == "kubernetes-admin" and "system:masters" in spec["groups"]


def test_a_request_for_system_masters_is_refused(ready: RunningAPIServer, kubectl: Kubectl) -> None:
    _, request_pem = _key_and_request("mallory", ("system:masters",))
    refused = kubectl("apply", "-f", "-", input=_manifest("mallory", request_pem), check=False)
    assert refused.returncode != 0
    assert (
        'certificatesigningrequests.certificates.k8s.io "mallory" is forbidden: use of '
        "kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
    ) in refused.stderr
    assert kubectl("get", "csr", "mallory", check=False).returncode != 0


def test_a_denied_request_gets_no_certificate(ready: RunningAPIServer, kubectl: Kubectl) -> None:
    _, request_pem = _key_and_request("eve")
    kubectl("apply", "-f", "-", input=_manifest("eve", request_pem))
    kubectl("certificate", "deny", "eve")
    assert _rows(kubectl, "eve")[1][-1] == "Denied"
    time.sleep(0.5)  # the signer has seen the denial by now
    assert kubectl("get", "csr", "eve", "-o", "jsonpath={.status.certificate}").stdout == ""
    again = kubectl("certificate", "approve", "eve", check=False)
    assert 'certificate signing request "eve" is already Denied' in again.stderr


def test_bad_usages_fail_the_request(ready: RunningAPIServer, kubectl: Kubectl) -> None:
    _, request_pem = _key_and_request("server")
    kubectl("apply", "-f", "-", input=_manifest("server", request_pem, usages=("server auth",)))
    kubectl("certificate", "approve", "server")
    wait_for("the condition", lambda: _rows(kubectl, "server")[1][-1] == "Approved,Failed")
    failed = yaml.safe_load(kubectl("get", "csr", "server", "-o", "yaml").stdout)["status"]["conditions"][1]
    assert failed["reason"] == "SignerValidationFailure"
    assert failed["message"] == "invalid usage for client certificate: server auth"


def test_approving_needs_approve_on_the_signer(ready: RunningAPIServer, kubectl: Kubectl) -> None:
    _, request_pem = _key_and_request("carol")
    kubectl("apply", "-f", "-", input=_manifest("carol", request_pem))
    kubectl(
        "create",
        "clusterrole",
        "csr-reviewer",
        "--verb=get,list,update",
        "--resource=certificatesigningrequests",
    )
    kubectl(
        "create",
        "clusterrole",
        "csr-approval",
        "--verb=update",
        "--resource=certificatesigningrequests/approval",
    )
    for role in ("csr-reviewer", "csr-approval"):
        kubectl("create", "clusterrolebinding", f"bob-{role}", f"--clusterrole={role}", "--user=bob")
    bob = ready.write_kubeconfig("bob.kubeconfig", ready.server.user_kubeconfig("bob"))

    refused = wait_for("the condition", lambda: _forbidden_approval(kubectl, bob))
    assert (
        'certificatesigningrequests.certificates.k8s.io "carol" is forbidden: user not permitted to approve '
        'requests with signerName "kubernetes.io/kube-apiserver-client"'
    ) in refused

    # `approve` on every kubernetes.io signer (the `<domain>/*` name) is enough; `signers` is no served
    # resource, so the role is applied, not made with `kubectl create clusterrole`
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "kubernetes-signers-approver"},
        "rules": [
            {
                "apiGroups": ["certificates.k8s.io"],
                "resources": ["signers"],
                "resourceNames": ["kubernetes.io/*"],
                "verbs": ["approve"],
            }
        ],
    }
    kubectl("apply", "-f", "-", input=yaml.safe_dump(role))
    kubectl(
        "create",
        "clusterrolebinding",
        "bob-approver",
        "--clusterrole=kubernetes-signers-approver",
        "--user=bob",
    )
    wait_for(
        "the condition",
        lambda: kubectl("certificate", "approve", "carol", kubeconfig=bob, check=False).returncode == 0,
    )
    _certificate(kubectl, "carol")


def _forbidden_approval(kubectl: Kubectl, bob: Path) -> str:
    result = kubectl("certificate", "approve", "carol", kubeconfig=bob, check=False)
    return result.stderr if "not permitted to approve" in result.stderr else ""


def test_the_python_client_requests_and_approves(ready: RunningAPIServer) -> None:
    api = k8s.CertificatesV1Api(k8s_config.new_client_from_config(str(ready.kubeconfig)))
    _, request_pem = _key_and_request("dave", ("qa",))
    body = k8s.V1CertificateSigningRequest(
        metadata=k8s.V1ObjectMeta(name="dave"),
        spec=k8s.V1CertificateSigningRequestSpec(
            request=base64.b64encode(request_pem).decode(),
            signer_name=CLIENT_SIGNER,
            usages=["digital signature", "client auth"],
            username="someone-else",
            expiration_seconds=3600,
        ),
    )
    created = api.create_certificate_signing_request(body)
    assert created.spec.username == "kubernetes-admin"
    assert created.status.conditions is None
    created.status.conditions = [
        k8s.V1CertificateSigningRequestCondition(type="Approved", status="True", reason="Onboarding")
    ]
    api.replace_certificate_signing_request_approval("dave", created)

    def issued() -> Any:
        found = api.read_certificate_signing_request_status("dave")
        return found if found.status.certificate else None

    signed = wait_for("the condition", issued)
    certificate = x509.load_pem_x509_certificate(base64.b64decode(signed.status.certificate))
    assert [a.value for a in certificate.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["qa"]
    # a request shorter than 8 hours is not shortened by the backdate
    lifetime = certificate.not_valid_after_utc - certificate.not_valid_before_utc
    assert lifetime.total_seconds() == 3600 + 300
    listed = api.list_certificate_signing_request(field_selector=f"spec.signerName={CLIENT_SIGNER}")
    assert "dave" in [item.metadata.name for item in listed.items]


def test_a_kubelets_bootstrap_request_is_auto_approved_and_makes_it_its_node(
    ready: RunningAPIServer, kubectl: Kubectl
) -> None:
    """The kubelet's TLS bootstrap as the lab's workers make it: the controller manager's csrapproving
    controller approves it after a SubjectAccessReview of the requester (here the tenant's admin, where
    kubeadm would send a bootstrap token), the signer issues it, and the certificate is the node's."""

    async def bootstrap() -> bytes:
        admin = KubeClient.from_kubeconfig(ready.kubeconfig)
        try:
            return await request_certificate(admin, "worker-7", timeout=30)
        finally:
            await admin.close()

    pem = ready.loop.run(bootstrap())
    name = next(row[0] for row in _rows(kubectl)[1:] if row[0].startswith("node-csr-"))
    row = _rows(kubectl, name)[1]
    assert row[2:] == [
        "kubernetes.io/kube-apiserver-client-kubelet",
        "kubernetes-admin",
        "<none>",
        "Approved,Issued",
    ]
    condition = yaml.safe_load(kubectl("get", "csr", name, "-o", "yaml").stdout)["status"]["conditions"][0]
    assert (condition["type"], condition["reason"], condition["message"]) == (
        "Approved",
        "AutoApproved",
        "Auto approving kubelet client certificate after SubjectAccessReview.",
    )
    node = _kubeconfig(ready, "worker-7", pem, pem)
    info = yaml.safe_load(kubectl("auth", "whoami", "-o", "yaml", kubeconfig=node).stdout)["status"][
        "userInfo"
    ]
    assert info["username"] == "system:node:worker-7"
    assert info["groups"] == ["system:nodes", "system:authenticated"]


def test_a_kubelet_request_from_one_who_may_not_ask_waits_until_rbac_allows_it(
    ready: RunningAPIServer, kubectl: Kubectl
) -> None:
    """The approver approves for requesters allowed `create` on `certificatesigningrequests/nodeclient`
    (kubeadm binds its bootstrap tokens' group to that role); others' requests stay Pending, and are
    looked at again, so a binding made later lets them through."""
    kubectl(
        "create",
        "clusterrole",
        "csr-creator",
        "--verb=create,get,list,watch",
        "--resource=certificatesigningrequests.certificates.k8s.io",
    )
    kubectl("create", "clusterrolebinding", "bob-csr", "--clusterrole=csr-creator", "--user=bob")
    key_pem, request_pem = _key_and_request("bob", ())
    bob = _kubeconfig(ready, "bob", _issue_client(kubectl, "bob-own", request_pem), key_pem)

    _, kubelet_request = _key_and_request("system:node:worker-8", ("system:nodes",))
    kubectl(
        "apply",
        "-f",
        "-",
        kubeconfig=bob,
        input=_manifest(
            "node-csr-bob",
            kubelet_request,
            usages=("digital signature", "client auth"),
            signerName="kubernetes.io/kube-apiserver-client-kubelet",
        ),
    )
    time.sleep(1.0)
    assert _rows(kubectl, "node-csr-bob")[1][-1] == "Pending"
    kubectl(
        "create",
        "clusterrolebinding",
        "bob-nodeclient",
        "--clusterrole=system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        "--user=bob",
    )
    wait_for("the condition", lambda: _rows(kubectl, "node-csr-bob")[1][-1] == "Approved,Issued", 15)


def _issue_client(kubectl: Kubectl, name: str, request_pem: bytes) -> bytes:
    """A certificate for a plain user, approved by the admin."""
    kubectl("apply", "-f", "-", input=_manifest(name, request_pem))
    kubectl("certificate", "approve", name)
    return _certificate(kubectl, name)
