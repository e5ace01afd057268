"""HAMi's filter failure reasons (pkg/device/common/common.go) and its "<k>/<n> Reason" strings."""

from __future__ import annotations

import re
from collections import Counter
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


# kube-scheduler's own filter failures that preemption cannot help (UnschedulableAndUnresolvable); every
# other failure, the extender's (HAMi's) among them, is Unschedulable and worth a preemption dry run.
_UNRESOLVABLE = (NODE_UNSCHEDULABLE, NODE_SELECTOR_MISMATCH, UNTOLERATED_TAINT)
NO_VICTIMS = "No preemption victims found for incoming pod"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."


def _histogram(total: int, reasons: Mapping[str, int]) -> str:
    # FitError.Error(): "0/<n> nodes are available:" then " <histogram>." (SeparatorFormat " %v.")
    listed = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items() if count))
    return f"0/{total} nodes are available: {listed}."


def fit_error(total: int, node_reasons: Mapping[str, str], *, preemption_policy: str = "") -> str:
    """kube-scheduler's message for a pod no node fits (the FailedScheduling event, PodScheduled=False):
    a histogram of the nodes' reasons, each reason text whole (an extender's `"1/2 CardInsufficientMemory"`
    counts as one), then what DefaultPreemption found, after the same separator:

    `0/1 nodes are available: 1 1/1 CardTypeMismatch. preemption: 0/1 nodes are available: 1 No
    preemption victims found for incoming pod..`

    The lab runs no preemption: every pod is taken to have no lower-priority pod to evict, which is
    the case while pods carry the default priority. For GPU pods it is HAMi's behaviour too: its scheduler
    extender has no preempt verb, and preemption of vGPU pods is an open feature request (HAMi issues
    #1494 and #1878)."""
    message = _histogram(total, Counter(node_reasons.values()))
    if preemption_policy == "Never":
        return f"{message} preemption: {NOT_ELIGIBLE_NEVER}."
    helpless = sum(1 for reason in node_reasons.values() if reason.startswith(_UNRESOLVABLE))
    helpless += max(0, total - len(node_reasons))
    dry_run = _histogram(total, {NO_VICTIMS: total - helpless, PREEMPTION_NOT_HELPFUL: helpless})
    return f"{message} preemption: {dry_run}."
