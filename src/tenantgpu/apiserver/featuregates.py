"""The default of each feature gate that guards an API field, per Kubernetes minor release.

A kube-apiserver of a release runs with its gates' defaults (Kamaji's tenant API servers are started
without `--feature-gates`), and a field whose gate is off is cleared from what a write stores
(`disabledfields.py`). Each gate's stages are read from its page in kubernetes/website
(`content/en/docs/reference/command-line-tools-reference/feature-gates/<Gate>.md`, the front matter's
`stages`: stage, `defaultValue`, `fromVersion`), checked where a page disagreed with kube's
`pkg/features/kube_features.go` (its versioned specs: ProcMountType on from 1.33, SELinuxChangePolicy
beta and on in 1.33). A gate that went GA stays on; a release before the first stage has the field
unknown anyway (`fieldversions.py`).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["GATES", "enabled"]

# (first minor release of a stage, its default), oldest first.
GATES: Mapping[str, tuple[tuple[int, bool], ...]] = {
    # Pods
    "InPlacePodVerticalScaling": ((27, False), (33, True)),
    "SidecarContainers": ((28, False), (29, True)),
    "PodHostIPs": ((28, False), (29, True)),
    # 1.27 named it UserNamespacesStatelessPodsSupport, off as well.
    "UserNamespacesSupport": ((25, False), (33, True)),
    "DynamicResourceAllocation": ((26, False), (34, True)),
    "PodLevelResources": ((32, False), (34, True)),
    "PodLifecycleSleepAction": ((29, False), (30, True)),
    "MatchLabelKeysInPodAffinity": ((29, False), (31, True)),
    "ProcMountType": ((12, False), (33, True)),
    "SupplementalGroupsPolicy": ((31, False), (33, True)),
    "RecursiveReadOnlyMounts": ((30, False), (31, True)),
    "ImageVolume": ((31, False), (33, True)),
    "SELinuxChangePolicy": ((32, False), (33, True)),
    "ContainerStopSignals": ((33, False),),
    "PodObservedGenerationTracking": ((33, False), (34, True)),
    "ResourceHealthStatus": ((31, False), (36, True)),
    "HostnameOverride": ((34, False), (35, True)),
    "EnvFiles": ((34, False), (35, True)),
    # Env var names of any printable ASCII but '=' (pkg/features/kube_features.go: GA in 1.34).
    "RelaxedEnvironmentVariableValidation": ((30, False), (32, True)),
    # Jobs
    "JobPodReplacementPolicy": ((28, False), (29, True)),
    "JobBackoffLimitPerIndex": ((28, False), (29, True)),
    "JobSuccessPolicy": ((30, False), (31, True)),
    "JobManagedBy": ((30, False), (32, True)),
    # StatefulSets: on in 1.35.0 to 1.35.3 (the 1.35 Kamaji serves, v1.35.0), off again from 1.35.4.
    "MaxUnavailableStatefulSet": ((24, False), (35, True)),
    # Services
    "ServiceTrafficDistribution": ((30, False), (31, True)),
    # Storage (pkg/features/kube_features.go of 1.28, 1.29 and 1.33's versioned specs)
    "PersistentVolumeLastPhaseTransitionTime": ((28, False), (29, True)),
    "VolumeAttributesClass": ((29, False), (34, True)),
    "RecoverVolumeExpansionFailure": ((23, False), (32, True)),
    # Not a field's: `kubectl port-forward` over a WebSocket tunnelling SPDY (`apiserver/portforward.py`).
    "PortForwardWebsockets": ((30, False), (31, True)),
}


def enabled(gate: str, minor: int) -> bool:
    """Whether `gate` is on by default in Kubernetes 1.`minor` (off before the gate existed)."""
    on = False
    for first, default in GATES[gate]:
        if minor < first:
            break
        on = default
    return on
