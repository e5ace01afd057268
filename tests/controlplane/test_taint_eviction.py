"""How long a pod tolerates its node's `unreachable:NoExecute` taint: kube's Toleration.ToleratesTaint and
the taint eviction controller's getMinTolerationTime."""

from __future__ import annotations

from typing import Any

import pytest

from tenantgpu.controlplane.nodelifecycle import UNREACHABLE_TAINT_KEY, toleration_seconds


def _pod(*tolerations: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"tolerations": list(tolerations)}}


UNREACHABLE = {"key": UNREACHABLE_TAINT_KEY, "operator": "Exists", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("pod", "seconds"),
    [
        (_pod(), 0.0),  # no toleration: evicted at once
        (_pod({**UNREACHABLE, "tolerationSeconds": 300}), 300.0),  # DefaultTolerationSeconds
        (_pod({**UNREACHABLE, "tolerationSeconds": 300}, {**UNREACHABLE, "tolerationSeconds": 30}), 30.0),
        (_pod(UNREACHABLE), None),  # no seconds: for ever (a DaemonSet's)
        (_pod(UNREACHABLE, {**UNREACHABLE, "tolerationSeconds": 60}), 60.0),  # the shortest one counts
        (_pod({"operator": "Exists"}), None),  # tolerates every taint
        (_pod({"key": "other", "operator": "Exists"}), 0.0),
        (_pod({**UNREACHABLE, "effect": "NoSchedule"}), 0.0),
        (
            _pod({"key": UNREACHABLE_TAINT_KEY, "tolerationSeconds": 5}),
            5.0,
        ),  # Equal with no value, any effect
        (_pod({**UNREACHABLE, "tolerationSeconds": -1}), 0.0),
    ],
)
def test_toleration_of_the_unreachable_taint(pod: dict[str, Any], seconds: float | None) -> None:
    assert toleration_seconds(pod, UNREACHABLE_TAINT_KEY) == seconds
