"""kubectl 1.32+ posts `auth can-i` as a protobuf SelfSubjectAccessReview; it is read as kubectl meant it."""

import pytest

from tenantgpu.apiserver.ssar_protobuf import (
    ProtobufError,
    decode_self_subject_access_review,
    decode_unknown,
    encode_self_subject_access_review_response,
)

# Recorded on the wire from kubectl 1.33 against a probe server (`auth can-i create pods` / `get /healthz`).
KUBECTL_133_CREATE_PODS = bytes.fromhex(
    "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a6563744163636573"
    "73526576696577123f0a100a0012001a0022002a0032003800420012210a1f0a0764656661756c7412066372656174651a"
    "0022002a04706f647332003a001a08080012001a0020001a002200"
)
KUBECTL_133_GET_HEALTHZ = bytes.fromhex(
    "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a6563744163636573"
    "73526576696577122f0a100a0012001a0022002a003200380042001211120f0a082f6865616c74687a12036765741a0808"
    "0012001a0020001a002200"
)


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def text(number: int, value: str) -> bytes:
    return field(number, value.encode())


def envelope(raw: bytes, kind: str = "SelfSubjectAccessReview") -> bytes:
    type_meta = text(1, "authorization.k8s.io/v1") + text(2, kind)
    return b"k8s\x00" + field(1, type_meta) + field(2, raw) + text(3, "") + text(4, "")


def test_hand_built_resource_review() -> None:
    attributes = (
        text(1, "team-a")
        + text(2, "get")
        + text(3, "kamaji.clastix.io")
        + text(4, "v1alpha1")
        + text(5, "tenantcontrolplanes")
        + text(6, "status")
        + text(7, "tenant-a")
    )
    raw = field(1, text(1, "")) + field(2, field(1, attributes))
    review = decode_self_subject_access_review(envelope(raw))
    assert review["kind"] == "SelfSubjectAccessReview"
    assert review["apiVersion"] == "authorization.k8s.io/v1"
    assert review["spec"] == {
        "resourceAttributes": {
            "namespace": "team-a",
            "verb": "get",
            "group": "kamaji.clastix.io",
            "version": "v1alpha1",
            "resource": "tenantcontrolplanes",
            "subresource": "status",
            "name": "tenant-a",
        }
    }
    assert "status" not in review


def test_field_and_label_selector_attributes() -> None:
    requirement = text(1, "spec.nodeName") + text(2, "In") + text(3, "w1") + text(3, "w2")
    selector = text(1, "spec.nodeName=w1") + field(2, requirement)
    attributes = text(2, "list") + text(5, "pods") + field(8, selector) + field(9, text(1, "app=web"))
    review = decode_self_subject_access_review(envelope(field(2, field(1, attributes))))
    resource = review["spec"]["resourceAttributes"]
    assert resource["fieldSelector"] == {
        "rawSelector": "spec.nodeName=w1",
        "requirements": [{"key": "spec.nodeName", "operator": "In", "values": ["w1", "w2"]}],
    }
    assert resource["labelSelector"] == {"rawSelector": "app=web"}


def test_recorded_kubectl_can_i_create_pods() -> None:
    review = decode_self_subject_access_review(KUBECTL_133_CREATE_PODS)
    assert review == {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": {"resourceAttributes": {"namespace": "default", "verb": "create", "resource": "pods"}},
        "status": {"allowed": False},
    }


def test_recorded_kubectl_can_i_get_healthz() -> None:
    review = decode_self_subject_access_review(KUBECTL_133_GET_HEALTHZ)
    assert review["spec"] == {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}


def test_response_round_trips() -> None:
    review = decode_self_subject_access_review(KUBECTL_133_CREATE_PODS)
    review["status"] = {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "admin"'}
    body = encode_self_subject_access_review_response(review)
    api_version, kind, _ = decode_unknown(body)
    assert (api_version, kind) == ("authorization.k8s.io/v1", "SelfSubjectAccessReview")
    again = decode_self_subject_access_review(body)
    assert again["spec"] == review["spec"]
    assert again["status"] == review["status"]
    denied = {**review, "status": {"allowed": False, "denied": True, "evaluationError": "no RBAC"}}
    assert (
        decode_self_subject_access_review(encode_self_subject_access_review_response(denied))["status"]
        == denied["status"]
    )


def test_non_ascii_and_long_strings_survive() -> None:
    review = {"spec": {"resourceAttributes": {"name": "ü" * 200, "verb": "get", "resource": "configmaps"}}}
    again = decode_self_subject_access_review(encode_self_subject_access_review_response(review))
    assert again["spec"]["resourceAttributes"]["name"] == "ü" * 200


@pytest.mark.parametrize(
    "body",
    [
        b'{"kind":"SelfSubjectAccessReview"}',
        b"k8s\x00\x0a\x05abc",
        b"k8s\x00\x0a",
        envelope(b"", kind="SubjectAccessReview"),
        b"k8s\x00"
        + field(1, text(1, "authorization.k8s.io/v1") + text(2, "SelfSubjectAccessReview"))
        + text(3, "gzip"),
        envelope(field(2, field(1, b"\x0a\x02\xff\xfe"))),
    ],
)
def test_bad_bodies_raise(body: bytes) -> None:
    with pytest.raises(ProtobufError):
        decode_self_subject_access_review(body)
