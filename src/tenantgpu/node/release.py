"""The kubelet release a simulated worker runs, and what that release writes differently."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

_GIT_VERSION = re.compile(r"^v?1\.(\d+)\.(\d+)")

# Used when the API server does not tell its version; it is the release the lab's default tenant runs.
FALLBACK_VERSION = "v1.31.4"


@dataclass(frozen=True)
class KubeletRelease:
    """A kubelet's version and the feature-gate defaults of its release that shape what it writes.

    A worker joins with the kubelet of its control plane's release, as `kubeadm join` does with
    matching packages; the version-skew policy never lets a kubelet be newer than its API server.
    """

    version: str
    minor: int
    patch: int

    @classmethod
    def parse(cls, git_version: str) -> KubeletRelease:
        """From a `gitVersion` such as `v1.31.4` (build suffixes such as `+k3s1` are kept in `version`)."""
        match = _GIT_VERSION.match(git_version)
        if not match:
            raise ValueError(f"{git_version!r} is not a Kubernetes version like v1.31.4")
        version = git_version if git_version.startswith("v") else "v" + git_version
        return cls(version, int(match.group(1)), int(match.group(2)))

    @property
    def kube_proxy_version(self) -> str:
        """`nodeInfo.kubeProxyVersion`: the kubelet's own version, or empty where DisableNodeKubeProxyVersion is on.

        The gate (KEP-4004) was on by default in 1.31.0, switched off again in 1.31.1
        (kubernetes/kubernetes#126721, a full year after the 1.29 deprecation), and on for good from 1.33.
        """
        if self.minor >= 33 or (self.minor, self.patch) == (31, 0):
            return ""
        return self.version

    @property
    def node_features(self) -> dict[str, Any] | None:
        """`status.features` of the Node: SupplementalGroupsPolicy is reported where its gate is on (1.33+)."""
        return {"supplementalGroupsPolicy": True} if self.minor >= 33 else None

    def runtime_handlers(self, handlers: Iterable[str]) -> list[dict[str, Any]] | None:
        """`status.runtimeHandlers` of the Node: the runtime's handlers and what each supports, reported
        where RecursiveReadOnlyMounts (beta, on, from 1.31) or UserNamespacesSupport (on from 1.33) is on;
        1.30 has neither on. The simulated runtime answers as containerd 2 on a recent kernel does: its
        default handler (named "") and each configured one (`handlers`, e.g. `nvidia` where the NVIDIA
        container toolkit configured it), all supporting recursive read-only mounts and user namespaces
        (the field `userNamespaces` is new in 1.31). containerd lists them in its config map's order,
        which Go leaves random; the simulation sorts them so the Node does not change between reports."""
        if self.minor < 31:
            return None
        features = {"recursiveReadOnlyMounts": True, "userNamespaces": True}
        return [{"name": name, "features": dict(features)} for name in ("", *sorted(set(handlers)))]

    @property
    def reports_container_runtime(self) -> bool:
        """Whether container statuses carry what the runtime reports (`node/runtimestatus.py`): their
        `resources` (InPlacePodVerticalScaling) and `user` (SupplementalGroupsPolicy), both beta and on
        from 1.33 (alpha and off before)."""
        return self.minor >= 33

    @property
    def lists_kubelet_authz_attributes(self) -> bool:
        """Whether the kubelet's API authorises a request as a list of attributes (from 1.32, where
        KubeletFineGrainedAuthz came in as alpha), which its 403 text shows as `subresource(s)=[…]`."""
        return self.minor >= 32

    @property
    def fine_grained_kubelet_authz(self) -> bool:
        """KubeletFineGrainedAuthz: alpha and off in 1.32, beta and on from 1.33."""
        return self.minor >= 33

    def pod_status(self, status: dict[str, Any]) -> dict[str, Any]:
        """A pod status as this release's kubelet writes it (the builders write the newest shape).

        Container statuses list the container's mounts from 1.31, where RecursiveReadOnlyMounts is beta
        and on (alpha, off, in 1.30). Before 1.29 there is no `PodReadyToStartContainers` condition (its
        gate was alpha, off, in 1.28, and in 1.25–1.27 named `PodHasNetworkCondition`) and no `hostIPs`
        (PodHostIPs: alpha in 1.28, beta and on from 1.29). The builders' dicts are left as they are.
        """
        if self.minor >= 31:
            return status
        status = dict(status)
        for key in _CONTAINER_STATUSES:
            if key in status:
                status[key] = [_without(entry, "volumeMounts") for entry in status[key]]
        if self.minor >= 29:
            return status
        status.pop("hostIPs", None)
        if "conditions" in status:
            status["conditions"] = [
                c for c in status["conditions"] if c.get("type") != "PodReadyToStartContainers"
            ]
        return status


_CONTAINER_STATUSES = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")


def _without(entry: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != key} if key in entry else entry
