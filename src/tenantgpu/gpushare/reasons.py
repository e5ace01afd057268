"""HAMi's filter failure reasons (pkg/device/common/common.go) and its "<k>/<n> Reason" strings."""

from __future__ import annotations

import re
from collections.abc import Mapping

CARD_TYPE_MISMATCH = "CardTypeMismatch"
CARD_UUID_MISMATCH = "CardUuidMismatch"
CARD_TIME_SLICING_EXHAUSTED = "CardTimeSlicingExhausted"
CARD_COMPUTE_UNITS_EXHAUSTED = "CardComputeUnitsExhausted"
CARD_INSUFFICIENT_MEMORY = "CardInsufficientMemory"
CARD_INSUFFICIENT_CORE = "CardInsufficientCore"
CARD_NOT_HEALTH = "CardNotHealth"
CARD_CORDONED = "CardCordoned"
NUMA_NOT_FIT = "NumaNotFit"
EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT = "ExclusiveDeviceAllocateConflict"
CARD_NOT_FOUND_CUSTOM_FILTER_RULE = "CardNotFoundCustomFilterRule"
CARD_MIG_TOPOLOGY_INFEASIBLE = "CardMigTopologyInfeasible"
NODE_INSUFFICIENT_DEVICE = "NodeInsufficientDevice"
ALLOCATED_CARDS_INSUFFICIENT_REQUEST = "AllocatedCardsInsufficientRequest"
RESOURCE_QUOTA_NOT_FIT = "ResourceQuotaNotFit"

# Not HAMi constants but HAMi's literal failedNodes texts.
NODE_UNREGISTERED = "node unregistered"

# kube-scheduler's messages for the checks that run before the extender.
INSUFFICIENT_CPU = "Insufficient cpu"
INSUFFICIENT_MEMORY = "Insufficient memory"
TOO_MANY_PODS = "Too many pods"
NODE_UNSCHEDULABLE = "node(s) were unschedulable"
NODE_SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
UNTOLERATED_TAINT = "node(s) had untolerated taint"

_ENTRY = re.compile(r"^(\d+)/(\d+) (\S+)$")


def gen_reason(counts: Mapping[str, int], cards: int) -> str:
    """HAMi's GenReason: `"<count>/<cards> <Reason>"` entries, sorted as strings, joined by ", "."""
    return ", ".join(sorted(f"{count}/{cards} {reason}" for reason, count in counts.items()))


def parse_reason(text: str) -> dict[str, int]:
    """HAMi's ParseReason: the reason constants in a GenReason string with their device counts."""
    found: dict[str, int] = {}
    for part in text.split(", "):
        match = _ENTRY.match(part)
        if match:
            found[match.group(3)] = int(match.group(1))
    return found
