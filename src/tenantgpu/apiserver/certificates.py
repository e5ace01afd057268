"""certificates.k8s.io/v1 CertificateSigningRequests as kube-apiserver serves them: validation, the
strategies of the resource and its `status` and `approval` subresources, and the three admission plugins
(CertificateApproval, CertificateSigning, CertificateSubjectRestriction).

Facts from Kubernetes 1.33: pkg/apis/certificates/validation/validation.go, pkg/apis/core/validation/
names.go (ValidateSignerName), pkg/registry/certificates/certificates/strategy.go and
plugin/pkg/admission/certificates/{approval,signing,subjectrestriction}/admission.go. The signer and the
cleaner, kube-controller-manager's, are `controlplane/csrsigning.py`.
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from cryptography import x509

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.dnsnames import dns_label_errors, dns_subdomain_errors
from tenantgpu.apiserver.fielderrors import (
    Cause,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
    too_long,
)

Obj = dict[str, Any]

GROUP = "certificates.k8s.io"
PLURAL = "certificatesigningrequests"

KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
KUBE_APISERVER_CLIENT_KUBELET = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
LEGACY_UNKNOWN = "kubernetes.io/legacy-unknown"

APPROVED, DENIED, FAILED = "Approved", "Denied", "Failed"

# The key usages a request may ask for (KeyUsage's constants), in the order kube lists them when one is
# not supported (its sets.String sorts them).
USAGES = tuple(
    sorted(
        {
            "signing",
            "digital signature",
            "content commitment",
            "key encipherment",
            "key agreement",
            "data encipherment",
            "cert sign",
            "crl sign",
            "encipher only",
            "decipher only",
            "any",
            "server auth",
            "client auth",
            "code signing",
            "email protection",
            "s/mime",
            "ipsec end system",
            "ipsec tunnel",
            "ipsec user",
            "timestamping",
            "ocsp signing",
            "microsoft sgc",
            "netscape sgc",
        }
    )
)
_TRUE_ONLY = frozenset({APPROVED, DENIED, FAILED})

# --- bytes and PEM ---------------------------------------------------------------------------------


def decode_bytes(value: Any) -> bytes | None:
    """A []byte field as JSON carries it (standard base64); None when absent or not base64."""
    if value is None or value == "":
        return b""
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def go_bytes(data: bytes) -> str:
    """A []byte as Go's %#v shows it in a field error: `[]byte{0x2d, 0x2d}`."""
    return "[]byte{" + ", ".join(f"0x{b:x}" for b in data) + "}"


_PEM = re.compile(rb"-----BEGIN ([^-\r\n]*)-----\r?\n(.*?)-----END \1-----", re.S)


def pem_blocks(data: bytes) -> list[tuple[str, bool, bytes | None]]:
    """The PEM blocks of `data` in order: (type, whether it has headers, DER or None if not base64)."""
    blocks = []
    for match in _PEM.finditer(data):
        body = match.group(2)
        lines = body.splitlines()
        headers = bool(lines) and b":" in lines[0]
        if headers:
            while lines and lines[0].strip():
                lines.pop(0)
        try:
            der = base64.b64decode(b"".join(line.strip() for line in lines), validate=True)
        except (binascii.Error, ValueError):
            der = None
        blocks.append((match.group(1).decode("latin-1"), headers, der))
    return blocks


def parse_request(pem: bytes) -> x509.CertificateSigningRequest:
    """kube's ParseCSR: the first PEM block, which must be a CERTIFICATE REQUEST that parses."""
    blocks = pem_blocks(pem)
    if not blocks or blocks[0][0] != "CERTIFICATE REQUEST" or blocks[0][2] is None:
        raise ValueError("PEM block type must be CERTIFICATE REQUEST")
    try:
        return x509.load_der_x509_csr(blocks[0][2])
    except ValueError as exc:
        raise ValueError(f"x509: malformed certificate request: {exc}") from exc


def _request_error(pem: bytes) -> str | None:
    """Why the request is refused (it does not parse, or its signature does not verify), if it is."""
    try:
        request = parse_request(pem)
    except ValueError as exc:
        return str(exc)
    try:
        if not request.is_signature_valid:
            return "x509: signature verification failure"
    except Exception:  # an algorithm cryptography cannot check
        return "x509: cannot verify signature: algorithm unimplemented"
    return None


def _certificate_error(pem: bytes) -> str | None:
    """kube's validateCertificate of `status.certificate`: empty, or CERTIFICATE blocks without headers."""
    if not pem:
        return None
    blocks = pem_blocks(pem)
    for block_type, headers, der in blocks:
        if block_type != "CERTIFICATE":
            return f'only CERTIFICATE PEM blocks are allowed, found "{block_type}"'
        if headers:
            return "no PEM block headers are permitted"
        try:
            x509.load_der_x509_certificate(der or b"")
        except ValueError:
            return "x509: malformed certificate"
    if not blocks:
        return "must contain at least one CERTIFICATE PEM block"
    return None


# --- validation ------------------------------------------------------------------------------------


def signer_name_causes(path: str, signer: str) -> list[Cause]:
    """kube's ValidateSignerName: `<domain with a dot>/<path of subdomains>`, at most 571 characters."""
    if not signer:
        return [required(path)]
    segments = signer.split("/")
    if len(segments) != 2:
        return [
            invalid(
                path,
                signer,
                "must be a fully qualified domain and path of the form 'example.com/signer-name'",
            )
        ]
    domain, rest = segments
    causes: list[Cause] = []
    if len(domain) > 253:
        causes.append(too_long(path, 253))
    labels = domain.split(".")
    for label in labels:
        found = dns_label_errors(label)
        if found:
            causes.extend(invalid(path, domain, f'validating label "{label}": {e}') for e in found)
            break
    if len(labels) < 2:
        causes.append(
            invalid(path, domain, "should be a domain with at least two segments separated by dots")
        )
    for label in rest.split("."):
        found = dns_subdomain_errors(label)
        if found:
            causes.extend(invalid(path, rest, f'validating label "{label}": {e}') for e in found)
            break
    if len(signer) > 253 + 253 + 63 + 1 + 1:
        causes.append(too_long(path, 571))
    return causes


def conditions(csr: Mapping[str, Any]) -> list[Obj]:
    value = (csr.get("status") or {}).get("conditions")
    return [c for c in value if isinstance(c, dict)] if isinstance(value, list) else []


def _of_type(csr: Mapping[str, Any], kind: str) -> list[Obj]:
    return [c for c in conditions(csr) if c.get("type") == kind]


def has_condition(csr: Mapping[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions(csr))


def _usages(csr: Mapping[str, Any]) -> list[Any]:
    value = (csr.get("spec") or {}).get("usages")
    return value if isinstance(value, list) else []


def _has_duplicates(values: list[Any]) -> bool:
    seen: list[Any] = []
    for value in values:
        if value in seen:
            return True
        seen.append(value)
    return False


def validate_csr(obj: Mapping[str, Any], old: Mapping[str, Any] | None, subresource: str = "") -> list[Cause]:
    """The spec, status and update rules of kube's validation (metadata is the caller's; kube checks no
    name). On an update, what the stored object already breaks is tolerated, as kube tolerates it."""
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    raw = spec.get("request")
    request = decode_bytes(raw)
    if request is None:
        causes.append(invalid("spec.request", raw, "illegal base64 data"))
    else:
        why = _request_error(request)
        if why is not None:
            causes.append(
                Cause("FieldValueInvalid", f"Invalid value: {go_bytes(request)}: {why}", "spec.request")
            )
    usages = _usages(obj)
    if not usages:
        causes.append(required("spec.usages"))
    old_usages = _usages(old) if old is not None else []
    if not any(u not in USAGES for u in old_usages):
        causes.extend(
            not_supported(f"spec.usages[{i}]", u, list(USAGES))
            for i, u in enumerate(usages)
            if u not in USAGES
        )
    if not _has_duplicates(old_usages):
        seen: list[Any] = []
        for i, usage in enumerate(usages):
            if usage in seen:
                causes.append(duplicate(f"spec.usages[{i}]", usage))
            seen.append(usage)
    signer = spec.get("signerName") or ""
    old_signer = ((old or {}).get("spec") or {}).get("signerName")
    if signer == LEGACY_UNKNOWN and old_signer != LEGACY_UNKNOWN:
        causes.append(
            invalid("spec.signerName", signer, "the legacy signerName is not allowed via this API version")
        )
    elif signer != LEGACY_UNKNOWN:
        causes.extend(signer_name_causes("spec.signerName", str(signer)))
    seconds = spec.get("expirationSeconds")
    if isinstance(seconds, int) and seconds < 600:
        causes.append(
            invalid(
                "spec.expirationSeconds",
                seconds,
                "may not specify a duration less than 600 seconds (10 minutes)",
            )
        )
    causes.extend(_condition_causes(obj, old))
    certificate = decode_bytes((obj.get("status") or {}).get("certificate"))
    old_certificate = (
        decode_bytes(((old or {}).get("status") or {}).get("certificate")) if old is not None else None
    )
    arbitrary = old is not None and (
        certificate == old_certificate
        or (old_certificate is not None and _certificate_error(old_certificate))
    )
    if not arbitrary:
        why = "illegal base64 data" if certificate is None else _certificate_error(certificate)
        if why is not None:
            causes.append(invalid("status.certificate", "<certificate data>", why))
    if old is not None:
        causes.extend(_update_causes(obj, old, subresource, certificate, old_certificate))
    return causes


def _condition_causes(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    old_types = [c.get("type") for c in conditions(old)] if old is not None else []
    both_allowed = APPROVED in old_types and DENIED in old_types
    duplicates_allowed = _has_duplicates(old_types)
    empty_allowed = "" in old_types or None in old_types
    causes: list[Cause] = []
    seen: list[Any] = []
    approved = denied = False
    for i, condition in enumerate(conditions(obj)):
        path = f"status.conditions[{i}]"
        kind = condition.get("type") or ""
        if not kind and not empty_allowed:
            causes.append(required(f"{path}.type"))
        allowed = ["True"] if kind in _TRUE_ONLY else ["False", "True", "Unknown"]
        status = condition.get("status") or ""
        if not status:
            causes.append(required(f"{path}.status"))
        elif status not in allowed:
            causes.append(not_supported(f"{path}.status", status, allowed))
        if not both_allowed:
            if kind == APPROVED:
                approved = True
                if denied:
                    causes.append(
                        invalid(f"{path}.type", kind, "Approved and Denied conditions are mutually exclusive")
                    )
            elif kind == DENIED:
                denied = True
                if approved:
                    causes.append(
                        invalid(f"{path}.type", kind, "Approved and Denied conditions are mutually exclusive")
                    )
        if not duplicates_allowed:
            if kind in seen:
                causes.append(duplicate(f"{path}.type", kind))
            seen.append(kind)
    return causes


def _update_causes(
    obj: Mapping[str, Any],
    old: Mapping[str, Any],
    subresource: str,
    certificate: bytes | None,
    old_certificate: bytes | None,
) -> list[Cause]:
    causes: list[Cause] = []
    for kind in (APPROVED, DENIED, FAILED):
        if len(_of_type(obj, kind)) < len(_of_type(old, kind)):
            causes.append(
                forbidden("status.conditions", f'updates may not remove a condition of type "{kind}"')
            )
    if subresource != "approval":
        for kind in (APPROVED, DENIED):
            new_list, old_list = _of_type(obj, kind), _of_type(old, kind)
            if len(new_list) > len(old_list):
                causes.append(
                    forbidden("status.conditions", f'updates may not add a condition of type "{kind}"')
                )
            elif len(new_list) == len(old_list) and new_list != old_list:
                # kube appends a go-cmp diff of the conditions; the lab names the type only
                causes.append(
                    forbidden("status.conditions", f'updates may not modify a condition of type "{kind}"')
                )
    if certificate != old_certificate:
        if subresource != "status":
            causes.append(forbidden("status.certificate", "updates may not set certificate content"))
        elif old_certificate:
            causes.append(
                forbidden("status.certificate", "updates may not modify existing certificate content")
            )
    return causes


# --- the strategies --------------------------------------------------------------------------------


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def prepare_create(csr: Obj, user: Any) -> None:
    """PrepareForCreate: the requester as the server knows it, whatever the request said; no status."""
    spec = csr.setdefault("spec", {})
    for field in ("username", "uid", "groups", "extra"):
        spec.pop(field, None)
    if user is not None:
        if user.name:
            spec["username"] = user.name
        if user.uid:
            spec["uid"] = user.uid
        if user.groups:
            spec["groups"] = list(user.groups)
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
    csr["status"] = {}


def _timestamps(new: Obj, old: Obj) -> None:
    """populateConditionTimestamps: a condition without times gets now, or the transition time of the
    stored condition of its type and status."""
    now = _now()
    old_conditions = conditions(old)
    for condition in conditions(new):
        if not condition.get("lastUpdateTime"):
            condition["lastUpdateTime"] = now
        if not condition.get("lastTransitionTime"):
            condition["lastTransitionTime"] = next(
                (
                    c["lastTransitionTime"]
                    for c in old_conditions
                    if c.get("type") == condition.get("type")
                    and c.get("status") == condition.get("status")
                    and c.get("lastTransitionTime")
                ),
                now,
            )


def _own_conditions(new: Obj) -> list[Obj]:
    """The new object's conditions as its own copies (it may share them with the stored object)."""
    status = new.get("status")
    listed = status.get("conditions") if isinstance(status, dict) else None
    return copy.deepcopy(listed) if isinstance(listed, list) else []


def prepare_update(new: Obj, old: Obj, subresource: str) -> None:
    """PrepareForUpdate of the resource (spec and status as stored), of `status` (spec as stored, the
    Approved and Denied conditions kept as they were where their count did not change) and of `approval`
    (only the conditions change)."""
    spec = copy.deepcopy(old.get("spec") or {})
    if subresource == "status":
        status = new.get("status")
        status = copy.deepcopy(status) if isinstance(status, dict) else {}
        listed = status.get("conditions") if isinstance(status.get("conditions"), list) else []
        for kind in (APPROVED, DENIED):
            old_at = [i for i, c in enumerate(conditions(old)) if c.get("type") == kind]
            new_at = [i for i, c in enumerate(listed) if isinstance(c, dict) and c.get("type") == kind]
            if len(old_at) == len(new_at):
                for i, j in zip(old_at, new_at, strict=True):
                    listed[j] = copy.deepcopy(conditions(old)[i])
        new["status"] = status
        _timestamps(new, old)
    elif subresource == "approval":
        kept = _own_conditions(new)
        new["status"] = {"conditions": kept}
        _timestamps(new, old)
        status = copy.deepcopy(old.get("status") or {})
        status.pop("conditions", None)
        if kept:
            status["conditions"] = kept
        new["status"] = status
    else:
        new["status"] = copy.deepcopy(old.get("status") or {})
    new["spec"] = spec
    if not new["status"].get("conditions"):
        new["status"].pop("conditions", None)


# --- admission -------------------------------------------------------------------------------------

Allowed = Callable[[Any, str, str], bool]


def authorized_for_signer(
    allowed: Callable[[Any, str, str], bool], user: Any, verb: str, signer: str
) -> bool:
    """kube's IsAuthorizedForSignerName: `verb` on `signers` named the signer, or `<domain>/*`."""
    return allowed(user, verb, signer) or allowed(user, verb, signer.split("/")[0] + "/*")


def _is_csr(kind: Any) -> bool:
    return bool(kind.group == GROUP and kind.plural == PLURAL)


def _refuse(attributes: Any, why: str) -> errors.APIError:
    return errors.forbidden(PLURAL, attributes.forbidden_name(), GROUP, why)


class CertificateApproval:
    """An update of `approval` needs `approve` on the request's signer (as stored)."""

    name = "CertificateApproval"
    mutating = False

    def __init__(self, allowed: Allowed) -> None:
        self._allowed = allowed

    @staticmethod
    def handles(operation: str, kind: Any, subresource: str) -> bool:
        return operation == "UPDATE" and subresource == "approval" and _is_csr(kind)

    async def admit(self, attributes: Any) -> None:
        if not self.handles(attributes.operation, attributes.kind, attributes.subresource):
            return
        signer = str(((attributes.old or {}).get("spec") or {}).get("signerName") or "")
        if not authorized_for_signer(self._allowed, attributes.user, "approve", signer):
            raise _refuse(attributes, f'user not permitted to approve requests with signerName "{signer}"')


class CertificateSigning:
    """An update of `status` that changes the certificate or the conditions needs `sign` on the signer."""

    name = "CertificateSigning"
    mutating = False

    def __init__(self, allowed: Allowed) -> None:
        self._allowed = allowed

    @staticmethod
    def handles(operation: str, kind: Any, subresource: str) -> bool:
        return operation == "UPDATE" and subresource == "status" and _is_csr(kind)

    async def admit(self, attributes: Any) -> None:
        if not self.handles(attributes.operation, attributes.kind, attributes.subresource):
            return
        old, new = attributes.old or {}, attributes.obj or {}
        old_status, new_status = old.get("status") or {}, new.get("status") or {}
        if old_status.get("certificate") == new_status.get("certificate") and conditions(old) == conditions(
            new
        ):
            return
        signer = str((old.get("spec") or {}).get("signerName") or "")
        if not authorized_for_signer(self._allowed, attributes.user, "sign", signer):
            raise _refuse(attributes, f'user not permitted to sign requests with signerName "{signer}"')


class CertificateSubjectRestriction:
    """A request to kube-apiserver-client may not name the organization system:masters."""

    name = "CertificateSubjectRestriction"
    mutating = False

    @staticmethod
    def handles(operation: str, kind: Any, subresource: str) -> bool:
        return operation == "CREATE" and not subresource and _is_csr(kind)

    async def admit(self, attributes: Any) -> None:
        if not self.handles(attributes.operation, attributes.kind, attributes.subresource):
            return
        spec = (attributes.obj or {}).get("spec") or {}
        if spec.get("signerName") != KUBE_APISERVER_CLIENT:
            return
        try:
            request = parse_request(decode_bytes(spec.get("request")) or b"")
        except ValueError as exc:
            raise _refuse(attributes, f"failed to parse CSR: {exc}") from exc
        organizations = request.subject.get_attributes_for_oid(x509.NameOID.ORGANIZATION_NAME)
        if any(o.value == "system:masters" for o in organizations):
            raise _refuse(
                attributes, f"use of {KUBE_APISERVER_CLIENT} signer with system:masters group is not allowed"
            )


# --- printing --------------------------------------------------------------------------------------


def condition_summary(csr: Mapping[str, Any]) -> str:
    """The CONDITION column: Denied, else Approved, else Pending; then `,Failed` and `,Issued`."""
    types = {c.get("type") for c in conditions(csr)}
    text = DENIED if DENIED in types else APPROVED if APPROVED in types else "Pending"
    if FAILED in types:
        text += ",Failed"
    if (csr.get("status") or {}).get("certificate"):
        text += ",Issued"
    return text
