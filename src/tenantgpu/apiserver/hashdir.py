"""A directory of CA certificates named the way OpenSSL looks them up (`<subject hash>.<n>`).

An SSL context pointed at such a directory (`load_verify_locations(capath=...)`) reads a CA only when a
peer's certificate names it as issuer. Loading each CA into each context instead costs OpenSSL 3 about
0.3 ms per certificate and context, which with every tenant's CA in every tenant's server grows with
the square of the tenants.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import weakref
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

_SET, _SEQUENCE, _OID, _UTF8STRING = 0x31, 0x30, 0x06, 0x0C
_WHITESPACE = " \t\n\v\f\r"


def _der(tag: int, body: bytes) -> bytes:
    size = len(body)
    if size < 0x80:
        return bytes([tag, size]) + body
    raw = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(raw)]) + raw + body


def _base128(value: int) -> bytes:
    groups = [value & 0x7F]
    value >>= 7
    while value:
        groups.append(0x80 | (value & 0x7F))
        value >>= 7
    return bytes(reversed(groups))


def _oid(dotted: str) -> bytes:
    arcs = [int(arc) for arc in dotted.split(".")]
    body = _base128(40 * arcs[0] + arcs[1]) + b"".join(_base128(arc) for arc in arcs[2:])
    return _der(_OID, body)


def _canonical_value(value: str) -> bytes:
    """OpenSSL's canonical form of a name's string value: trimmed, inner whitespace runs made one space,
    ASCII letters lower-cased, encoded as a UTF8String."""
    words = "".join(" " if ch in _WHITESPACE else ch for ch in value).split(" ")
    text = " ".join(word for word in words if word)
    lowered = "".join(ch.lower() if ch.isascii() else ch for ch in text)
    return _der(_UTF8STRING, lowered.encode())


def subject_hash(certificate: x509.Certificate) -> str:
    """The subject hash `openssl x509 -hash` prints (X509_NAME_hash_ex): the first four bytes, little
    endian, of the SHA-1 of the name's canonical encoding (its RDN sets without the outer SEQUENCE)."""
    encoded = b""
    for rdn in certificate.subject.rdns:
        members = []
        for attribute in rdn:
            value = attribute.value
            text = value if isinstance(value, str) else bytes(value).decode("latin-1")
            members.append(_der(_SEQUENCE, _oid(attribute.oid.dotted_string) + _canonical_value(text)))
        encoded += _der(_SET, b"".join(sorted(members)))
    digest = hashlib.sha1(encoded).digest()  # the name OpenSSL looks up, not a security hash
    return f"{int.from_bytes(digest[:4], 'little'):08x}"


class CADirectory:
    """A directory of CA certificates in OpenSSL's hashed layout, owned by one process.

    `path` is emptied first (what a process killed before left there is stale) and kept afterwards; a
    process that owns no directory of its own gets a temporary one, removed when it exits in order.
    CAs with one subject (two tenants of one name in different namespaces) get files `.0`, `.1`, …;
    OpenSSL reads all of them the first time a peer names that subject, and after that only the ones it
    has in memory, so a CA added later under a subject already looked up is not seen by that context.
    """

    def __init__(self, path: Path | None = None) -> None:
        if path is None:
            self.path = Path(tempfile.mkdtemp(prefix="tenantgpu-cas-"))
            weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)
        else:
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
            self.path = path
        self._known: set[bytes] = set()

    def add(self, ca_pem: bytes) -> None:
        """File the CA under its subject hash, once."""
        certificate = x509.load_pem_x509_certificate(ca_pem)
        der = certificate.public_bytes(serialization.Encoding.DER)
        if der in self._known:
            return
        self._known.add(der)
        index = 0
        prefix = subject_hash(certificate)
        while (self.path / f"{prefix}.{index}").exists():
            index += 1
        (self.path / f"{prefix}.{index}").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
