"""UIDs for new objects and AdmissionReview requests."""

from __future__ import annotations

import os


class UidSource:
    """Random (version 4) UUID strings for new objects, as kube-apiserver gives them.

    The randomness is read from the OS 256 UIDs at a time: every create needs one, and a system call
    per UID was a twentieth of an Event's create. Building a `uuid.UUID` is skipped for the same reason.
    """

    _BATCH = 256

    def __init__(self) -> None:
        self._pool = b""
        self._at = 0

    def next(self) -> str:
        if self._at >= len(self._pool):
            self._pool, self._at = os.urandom(16 * self._BATCH), 0
        raw = bytearray(self._pool[self._at : self._at + 16])
        self._at += 16
        raw[6] = raw[6] & 0x0F | 0x40
        raw[8] = raw[8] & 0x3F | 0x80
        h = raw.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
