"""Where each resource lives on the REST path: group, version, plural, and whether it is namespaced."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceKind:
    """One REST resource (`pods`, `leases.coordination.k8s.io`, ...)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path; `namespace=None` on a namespaced kind means across all namespaces."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


_KNOWN = [
    ResourceKind("", "v1", "pods", "Pod", True),
    ResourceKind("", "v1", "nodes", "Node", False),
    ResourceKind("", "v1", "namespaces", "Namespace", False),
    ResourceKind("", "v1", "events", "Event", True),
    ResourceKind("", "v1", "services", "Service", True),
    ResourceKind("", "v1", "endpoints", "Endpoints", True),
    ResourceKind("", "v1", "configmaps", "ConfigMap", True),
    ResourceKind("", "v1", "secrets", "Secret", True),
    ResourceKind("", "v1", "resourcequotas", "ResourceQuota", True),
    ResourceKind("", "v1", "limitranges", "LimitRange", True),
    ResourceKind("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    ResourceKind("", "v1", "persistentvolumes", "PersistentVolume", False),
    ResourceKind("storage.k8s.io", "v1", "storageclasses", "StorageClass", False),
    ResourceKind("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False),
    ResourceKind(
        "certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", False
    ),
    ResourceKind("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
    ResourceKind("", "v1", "serviceaccounts", "ServiceAccount", True),
    ResourceKind("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceKind(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
    ),
    ResourceKind(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
    ),
    ResourceKind("apps", "v1", "deployments", "Deployment", True),
    ResourceKind("apps", "v1", "replicasets", "ReplicaSet", True),
    ResourceKind("apps", "v1", "daemonsets", "DaemonSet", True),
    ResourceKind("apps", "v1", "statefulsets", "StatefulSet", True),
    ResourceKind("apps", "v1", "controllerrevisions", "ControllerRevision", True),
    ResourceKind("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    ResourceKind("batch", "v1", "jobs", "Job", True),
    ResourceKind("batch", "v1", "cronjobs", "CronJob", True),
    ResourceKind("events.k8s.io", "v1", "events", "Event", True),
    ResourceKind("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    ResourceKind("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    ResourceKind("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    ResourceKind("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
]
_BY_NAME: dict[str, ResourceKind] = {}
for _r in _KNOWN:
    _BY_NAME.setdefault(_r.plural, _r)
    _BY_NAME[f"{_r.plural}.{_r.group}" if _r.group else _r.plural] = _r
    _BY_NAME.setdefault(_r.kind, _r)
del _r


def resource_kind(name: str | ResourceKind) -> ResourceKind:
    """Resolve `pods`, `Pod`, or `leases.coordination.k8s.io`; core plurals win over grouped ones."""
    if isinstance(name, ResourceKind):
        return name
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown resource {name!r}; pass a ResourceKind for it") from None
