"""Every check of the suite, in the order they run (lab-wide first, then per tenant, disruptive last)."""

from __future__ import annotations

from tenantgpu.validate.checks import admission, isolation, nodes, planes, quota, recovery, scheduling
from tenantgpu.validate.checks.base import Check, Need

ALL_CHECKS: tuple[Check, ...] = (
    *planes.CHECKS,
    *nodes.CHECKS,
    admission.CHECKS[0],  # webhook-through-tunnel
    *scheduling.CHECKS[:2],  # fractional-scheduling, no-lock-contention (the original eight first)
    *isolation.CHECKS,
    *scheduling.CHECKS[2:],
    *quota.CHECKS,
    *recovery.CHECKS,
    admission.CHECKS[1],  # webhook-unreachable-behaviour
)


def check_names() -> list[str]:
    return [check.name for check in ALL_CHECKS]


def select(names: list[str] | tuple[str, ...] | None) -> tuple[Check, ...]:
    """The checks named (in suite order); KeyError naming the unknown one."""
    if not names:
        return ALL_CHECKS
    known = {check.name for check in ALL_CHECKS}
    for name in names:
        if name not in known:
            raise KeyError(name)
    return tuple(check for check in ALL_CHECKS if check.name in set(names))


__all__ = ["ALL_CHECKS", "Check", "Need", "check_names", "select"]
