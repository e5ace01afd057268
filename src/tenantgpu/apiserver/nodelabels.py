"""Node labels kube-apiserver warns about, and the warnings a RuntimeClass write gets for them.

kube 1.33's `pkg/api/node/util.go` keeps a table of deprecated node labels, each with what to use
instead; a RuntimeClass whose `scheduling.nodeSelector` names one gets a `Warning` header per such key
on create and on update (GetWarningsForRuntimeClass). The warning names the field, not the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DEPRECATED_NODE_LABELS", "runtime_class_warnings"]

# Label key -> why it is deprecated, in kube's words (what follows `<field>: ` in the warning).
DEPRECATED_NODE_LABELS: Mapping[str, str] = {
    "beta.kubernetes.io/arch": 'deprecated since v1.14; use "kubernetes.io/arch" instead',
    "beta.kubernetes.io/os": 'deprecated since v1.14; use "kubernetes.io/os" instead',
    "failure-domain.beta.kubernetes.io/region": (
        'deprecated since v1.17; use "topology.kubernetes.io/region" instead'
    ),
    "failure-domain.beta.kubernetes.io/zone": 'deprecated since v1.17; use "topology.kubernetes.io/zone" instead',
    "beta.kubernetes.io/instance-type": 'deprecated since v1.17; use "node.kubernetes.io/instance-type" instead',
    "app.kubernetes.io/created-by": "deprecated since v1.9",
    "scheduler.alpha.kubernetes.io/preferAvoidPods": "deprecated since v1.22; use Taints and Tolerations instead",
    "node-role.kubernetes.io/master": 'use "node-role.kubernetes.io/control-plane" instead',
}


def runtime_class_warnings(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[str]:
    """GetWarningsForRuntimeClass, for create and update alike: `scheduling.nodeSelector: <why>` per
    deprecated key (kube walks a Go map, in no set order; here the keys go in the order written)."""
    scheduling = obj.get("scheduling")
    selector = scheduling.get("nodeSelector") if isinstance(scheduling, Mapping) else None
    if not isinstance(selector, Mapping):
        return []
    return [
        f"scheduling.nodeSelector: {DEPRECATED_NODE_LABELS[key]}"
        for key in selector
        if key in DEPRECATED_NODE_LABELS
    ]
