"""A failed dial in Go's words, as kube-apiserver and the konnectivity agent report it."""

from __future__ import annotations

import os


def go_dial_error(address: str, err: OSError) -> str:
    """`dial tcp 10.0.0.5:10250: connect: connection refused` for a socket's own failure (asyncio's text
    names the call, not the cause); errors of the tunnel are subclasses with words of their own."""
    if isinstance(err, TimeoutError):
        return f"dial tcp {address}: i/o timeout"
    if err.errno and (isinstance(err, ConnectionRefusedError) or type(err) is OSError):
        return f"dial tcp {address}: connect: {os.strerror(err.errno).lower()}"
    return str(err) or f"dial tcp {address}: {type(err).__name__}"
