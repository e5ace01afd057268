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
# VolumeBinding's node verdicts (a bound volume's node affinity, a volume that is gone) are too.
VOLUME_NODE_CONFLICT = "node(s) had volume node affinity conflict"
VOLUME_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
_UNRESOLVABLE = (
    NODE_UNSCHEDULABLE,
    NODE_SELECTOR_MISMATCH,
    UNTOLERATED_TAINT,
    VOLUME_NODE_CONFLICT,
    VOLUME_NOT_EXIST,
)
NO_VICTIMS = "No preemption victims found for incoming pod"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."


def _histogram(total: int, reasons: Mapping[str, int]) -> str:
    # FitError.Error(): "0/<n> nodes are available:" then " <histogram>." (SeparatorFormat " %v.")
    listed = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items() if count))
    return f"0/{total} nodes are available: {listed}."


def is_unresolvable(reason: str) -> bool:
    """A node kube-scheduler's own filters refused for a reason no eviction changes
    (UnschedulableAndUnresolvable): unschedulable, a selector or affinity, an untolerated taint."""
    return reason.startswith(_UNRESOLVABLE)


def fit_error(
    total: int,
    node_reasons: Mapping[str, str],
    *,
    preemption_policy: str = "",
    preemption: Mapping[str, str] | str | None = None,
) -> str:
    """kube-scheduler's message for a pod no node fits (the FailedScheduling event, PodScheduled=False):
    a histogram of the nodes' reasons, each reason text whole (an extender's `"1/2 CardInsufficientMemory"`
    counts as one), then what DefaultPreemption found, after the same separator:

    `0/1 nodes are available: 1 1/1 CardTypeMismatch. preemption: 0/1 nodes are available: 1 No
    preemption victims found for incoming pod..`

    `preemption` is the default scheduler's dry run: each node's verdict, a reason the pod may not
    preempt at all, or "" when it preempted (then the message ends after the histogram). Without it,
    every pod is taken to have no lower-priority pod to evict: HAMi's scheduler runs no preemption. Its
    extender has no preempt verb, and preemption of vGPU pods is an open feature request (HAMi issues
    #1494 and #1878)."""
    message = _histogram(total, Counter(node_reasons.values()))
    if preemption_policy == "Never":
        return f"{message} preemption: {NOT_ELIGIBLE_NEVER}."
    if preemption == "":
        return message
    if isinstance(preemption, str):
        return f"{message} preemption: {preemption}."
    if preemption is None:
        helpless = sum(1 for reason in node_reasons.values() if is_unresolvable(reason))
        helpless += max(0, total - len(node_reasons))
        verdicts = Counter({NO_VICTIMS: total - helpless, PREEMPTION_NOT_HELPFUL: helpless})
    else:
        verdicts = Counter(preemption.values())
        verdicts[PREEMPTION_NOT_HELPFUL] += max(0, total - len(preemption))
    return f"{message} preemption: {_histogram(total, verdicts)}."


def prefilter_error(total: int, refusal: str, *, preemption_policy: str = "") -> str:
    """kube-scheduler's message when a PreFilter plugin refuses the pod before any node is looked at
    (VolumeBinding's `persistentvolumeclaim "data" not found`): the refusal in place of the histogram,
    then DefaultPreemption, for which every node is then unresolvable."""
    message = f"0/{total} nodes are available: {refusal}."
    if preemption_policy == "Never":
        return f"{message} preemption: {NOT_ELIGIBLE_NEVER}."
    return f"{message} preemption: {_histogram(total, {PREEMPTION_NOT_HELPFUL: total})}."
