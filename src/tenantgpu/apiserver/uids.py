"""Randomness for new objects: UIDs, AdmissionReview UIDs and the tails of generated names."""

from __future__ import annotations

import os


class UidSource:
    """Random (version 4) UUID strings for new objects, as kube-apiserver gives them, and name tails.

    The randomness is read from the OS 256 UIDs at a time: every create needs one, and a system call
    per UID was a twentieth of an Event's create (a generated name took five more, one per character).
    Building a `uuid.UUID` is skipped for the same reason.
    """

    _BATCH = 256

    def __init__(self) -> None:
        self._pool = b""
        self._at = 0

    def _take(self, count: int) -> bytes:
        if self._at + count > len(self._pool):
            self._pool, self._at = os.urandom(16 * self._BATCH), 0
        taken = self._pool[self._at : self._at + count]
        self._at += count
        return taken

    def next(self) -> str:
        raw = bytearray(self._take(16))
        raw[6] = raw[6] & 0x0F | 0x40
        raw[8] = raw[8] & 0x3F | 0x80
        h = raw.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def suffix(self, alphabet: str, length: int = 5) -> str:
        """`length` characters drawn evenly from `alphabet` (a generateName's random tail)."""
        whole = 256 - 256 % len(alphabet)  # bytes past the last whole round of the alphabet are skipped
        chosen: list[str] = []
        while len(chosen) < length:
            chosen += [alphabet[b % len(alphabet)] for b in self._take(length) if b < whole]
        return "".join(chosen[:length])
