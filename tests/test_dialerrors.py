"""Failed dials read as Go's dialer words them (`dial tcp …: connect: connection refused`), which is what
kube-apiserver and the konnectivity agent pass on."""

from __future__ import annotations

import errno

from tenantgpu.dialerrors import go_dial_error
from tenantgpu.konnectivity.backends import DialError


def test_a_refused_or_unreachable_socket_is_named_by_its_cause() -> None:
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed ('10.244.1.5', 80)")
    assert go_dial_error("10.244.1.5:80", refused) == "dial tcp 10.244.1.5:80: connect: connection refused"
    unreachable = OSError(errno.ENETUNREACH, "Connect call failed")
    assert (
        go_dial_error("10.0.0.9:443", unreachable) == "dial tcp 10.0.0.9:443: connect: network is unreachable"
    )
    assert go_dial_error("10.0.0.9:443", TimeoutError()) == "dial tcp 10.0.0.9:443: i/o timeout"


def test_the_tunnels_own_errors_keep_their_words() -> None:
    assert go_dial_error("10.0.0.9:443", DialError("No agent available")) == "No agent available"
