"""How server-side apply treats the lists and objects of the built-in kinds: the facts kube's published
OpenAPI document states with `x-kubernetes-list-type`, `x-kubernetes-list-map-keys` and
`x-kubernetes-map-type` (read off Kubernetes 1.33's `api/openapi-spec/swagger.json`).

A list not named here is atomic (applied and owned as a whole), as kube treats a list with no list type;
an object is granular unless it is atomic here. Components are named as in kube's document, without
its `io.k8s.api.` or `io.k8s.apimachinery.pkg.apis.` prefix (`core.v1.PodSpec`, `meta.v1.ObjectMeta`).
"""

from __future__ import annotations

__all__ = ["ATOMIC_MAP_FIELDS", "ATOMIC_STRUCTS", "LIST_MAPS", "LIST_SETS", "short_component"]

_PREFIXES = (
    "io.k8s.api.",
    "io.k8s.apimachinery.pkg.apis.",
    "io.k8s.kube-aggregator.pkg.apis.",
    "io.k8s.apiextensions-apiserver.pkg.apis.",
)


def short_component(name: str) -> str:
    """`io.k8s.api.core.v1.PodSpec` → `core.v1.PodSpec`, the names the tables below use."""
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


# Associative lists: component → field → the fields that identify an item.
LIST_MAPS: dict[str, dict[str, tuple[str, ...]]] = {
    "admissionregistration.v1.MutatingAdmissionPolicySpec": {"matchConditions": ("name",)},
    "admissionregistration.v1.MutatingWebhook": {"matchConditions": ("name",)},
    "admissionregistration.v1.MutatingWebhookConfiguration": {"webhooks": ("name",)},
    "admissionregistration.v1.ValidatingAdmissionPolicySpec": {
        "matchConditions": ("name",),
        "variables": ("name",),
    },
    "admissionregistration.v1.ValidatingAdmissionPolicyStatus": {"conditions": ("type",)},
    "admissionregistration.v1.ValidatingWebhook": {"matchConditions": ("name",)},
    "admissionregistration.v1.ValidatingWebhookConfiguration": {"webhooks": ("name",)},
    "admissionregistration.v1alpha1.MutatingAdmissionPolicySpec": {"matchConditions": ("name",)},
    "admissionregistration.v1beta1.MutatingAdmissionPolicySpec": {"matchConditions": ("name",)},
    "apiextensions.v1.CustomResourceDefinitionStatus": {"conditions": ("type",)},
    "apiextensions.v1.JSONSchemaProps": {"x-kubernetes-validations": ("rule",)},
    "apiregistration.v1.APIServiceStatus": {"conditions": ("type",)},
    "apiserverinternal.v1alpha1.StorageVersionStatus": {
        "conditions": ("type",),
        "storageVersions": ("apiServerID",),
    },
    "apps.v1.DaemonSetStatus": {"conditions": ("type",)},
    "apps.v1.DeploymentStatus": {"conditions": ("type",)},
    "apps.v1.ReplicaSetStatus": {"conditions": ("type",)},
    "apps.v1.StatefulSetStatus": {"conditions": ("type",)},
    "autoscaling.v2.HorizontalPodAutoscalerStatus": {"conditions": ("type",)},
    "certificates.v1.CertificateSigningRequestStatus": {"conditions": ("type",)},
    "certificates.v1beta1.PodCertificateRequestStatus": {"conditions": ("type",)},
    "core.v1.ComponentStatus": {"conditions": ("type",)},
    "core.v1.Container": {
        "env": ("name",),
        "ports": ("containerPort", "protocol"),
        "volumeDevices": ("devicePath",),
        "volumeMounts": ("mountPath",),
    },
    "core.v1.ContainerStatus": {"allocatedResourcesStatus": ("name",), "volumeMounts": ("mountPath",)},
    "core.v1.EphemeralContainer": {
        "env": ("name",),
        "ports": ("containerPort", "protocol"),
        "volumeDevices": ("devicePath",),
        "volumeMounts": ("mountPath",),
    },
    "core.v1.NamespaceStatus": {"conditions": ("type",)},
    "core.v1.NodeStatus": {"addresses": ("type",), "conditions": ("type",)},
    "core.v1.PersistentVolumeClaimStatus": {"conditions": ("type",)},
    "core.v1.PodSpec": {
        "containers": ("name",),
        "ephemeralContainers": ("name",),
        "hostAliases": ("ip",),
        "imagePullSecrets": ("name",),
        "initContainers": ("name",),
        "resourceClaims": ("name",),
        "schedulingGates": ("name",),
        "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"),
        "volumes": ("name",),
    },
    "core.v1.PodStatus": {"conditions": ("type",), "podIPs": ("ip",), "resourceClaimStatuses": ("name",)},
    "core.v1.ReplicationControllerStatus": {"conditions": ("type",)},
    "core.v1.ResourceRequirements": {"claims": ("name",)},
    "core.v1.ResourceStatus": {"resources": ("resourceID",)},
    "core.v1.ServiceAccount": {"secrets": ("name",)},
    "core.v1.ServiceSpec": {"ports": ("port", "protocol")},
    "core.v1.ServiceStatus": {"conditions": ("type",)},
    "flowcontrol.v1.FlowSchemaStatus": {"conditions": ("type",)},
    "flowcontrol.v1.PriorityLevelConfigurationStatus": {"conditions": ("type",)},
    "meta.v1.ObjectMeta": {"ownerReferences": ("uid",)},
    "networking.v1.ServiceCIDRStatus": {"conditions": ("type",)},
    "networking.v1beta1.ServiceCIDRStatus": {"conditions": ("type",)},
    "policy.v1.PodDisruptionBudgetStatus": {"conditions": ("type",)},
    "resource.v1.AllocatedDeviceStatus": {"conditions": ("type",)},
    "resource.v1.ResourceClaimStatus": {
        "devices": ('driver", "device", "pool", "shareID'),
        "reservedFor": ("uid",),
    },
    "resource.v1alpha3.DeviceTaintRuleStatus": {"conditions": ("type",)},
    "resource.v1alpha3.ResourcePoolStatusRequestStatus": {"conditions": ("type",)},
    "resource.v1beta1.AllocatedDeviceStatus": {"conditions": ("type",)},
    "resource.v1beta1.ResourceClaimStatus": {
        "devices": ('driver", "device", "pool", "shareID'),
        "reservedFor": ("uid",),
    },
    "resource.v1beta2.AllocatedDeviceStatus": {"conditions": ("type",)},
    "resource.v1beta2.DeviceTaintRuleStatus": {"conditions": ("type",)},
    "resource.v1beta2.ResourceClaimStatus": {
        "devices": ('driver", "device", "pool", "shareID'),
        "reservedFor": ("uid",),
    },
    "scheduling.v1alpha2.PodGroupSpec": {"resourceClaims": ("name",)},
    "scheduling.v1alpha2.PodGroupStatus": {"conditions": ("type",), "resourceClaimStatuses": ("name",)},
    "scheduling.v1alpha2.PodGroupTemplate": {"resourceClaims": ("name",)},
    "scheduling.v1alpha2.WorkloadSpec": {"podGroupTemplates": ("name",)},
    "storage.v1.CSINodeSpec": {"drivers": ("name",)},
    "storagemigration.v1beta1.StorageVersionMigrationStatus": {"conditions": ("type",)},
}

# Lists of unique scalars: component → fields.
LIST_SETS: dict[str, frozenset[str]] = {
    "admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec": frozenset(["validationActions"]),
    "apiserverinternal.v1alpha1.ServerStorageVersion": frozenset(["decodableVersions", "servedVersions"]),
    "batch.v1.PodFailurePolicyOnExitCodesRequirement": frozenset(["values"]),
    "batch.v1.UncountedTerminatedPods": frozenset(["failed", "succeeded"]),
    "core.v1.ContainerRestartRuleOnExitCodes": frozenset(["values"]),
    "core.v1.NodeAllocatableResourceClaimStatus": frozenset(["containers"]),
    "core.v1.NodeSpec": frozenset(["podCIDRs"]),
    "discovery.v1.Endpoint": frozenset(["addresses"]),
    "flowcontrol.v1.NonResourcePolicyRule": frozenset(["nonResourceURLs", "verbs"]),
    "flowcontrol.v1.ResourcePolicyRule": frozenset(["apiGroups", "namespaces", "resources", "verbs"]),
    "meta.v1.ObjectMeta": frozenset(["finalizers"]),
    "storage.v1.CSIDriverSpec": frozenset(["volumeLifecycleModes"]),
}

# Maps that are replaced as a whole: component → fields.
ATOMIC_MAP_FIELDS: dict[str, frozenset[str]] = {
    "core.v1.PodSpec": frozenset(["nodeSelector"]),
    "core.v1.ReplicationControllerSpec": frozenset(["selector"]),
    "core.v1.ServiceSpec": frozenset(["selector"]),
    "node.v1.Scheduling": frozenset(["nodeSelector"]),
}

# Objects replaced and owned as a whole (`x-kubernetes-map-type: atomic`).
ATOMIC_STRUCTS = frozenset(
    {
        "admissionregistration.v1.MatchResources",
        "admissionregistration.v1.NamedRuleWithOperations",
        "admissionregistration.v1.ParamKind",
        "admissionregistration.v1.ParamRef",
        "admissionregistration.v1.Variable",
        "admissionregistration.v1alpha1.MatchResources",
        "admissionregistration.v1alpha1.NamedRuleWithOperations",
        "admissionregistration.v1alpha1.ParamKind",
        "admissionregistration.v1alpha1.ParamRef",
        "admissionregistration.v1beta1.MatchResources",
        "admissionregistration.v1beta1.NamedRuleWithOperations",
        "admissionregistration.v1beta1.ParamKind",
        "admissionregistration.v1beta1.ParamRef",
        "admissionregistration.v1beta1.Variable",
        "autoscaling.v1.CrossVersionObjectReference",
        "core.v1.ConfigMapKeySelector",
        "core.v1.EndpointAddress",
        "core.v1.EndpointPort",
        "core.v1.FileKeySelector",
        "core.v1.LocalObjectReference",
        "core.v1.NodeSelector",
        "core.v1.NodeSelectorTerm",
        "core.v1.ObjectFieldSelector",
        "core.v1.ObjectReference",
        "core.v1.ResourceFieldSelector",
        "core.v1.ScopeSelector",
        "core.v1.SecretKeySelector",
        "core.v1.SecretReference",
        "core.v1.TopologySelectorTerm",
        "core.v1.TypedLocalObjectReference",
        "discovery.v1.EndpointPort",
        "networking.v1.ServiceBackendPort",
        "rbac.v1.RoleRef",
        "rbac.v1.Subject",
        "meta.v1.LabelSelector",
        "meta.v1.OwnerReference",
    }
)
