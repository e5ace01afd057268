"""The release that first has each field of a built-in kind, for the fields newer than Kubernetes 1.27.

The lab serves one field set, its `kubernetes` client's (a newer release); a tenant of an older
version treats the fields its release does not have as kube-apiserver of that release does, as unknown
(`strict decoding error: unknown field "spec.resources"` on 1.31 for pod-level resources, new in 1.32;
`spec.initContainers[0].restartPolicy`, a sidecar, on 1.27). Read from the struct tags of k8s.io/api at
its tags v0.27.0 … v0.36.0 and its `HEAD` of 2026-07-24 (1.37), embedded structs inlined, keyed by the
OpenAPI component of the struct. Left out: `VolumeResourceRequirements`, new in 1.29 only as a name (a
PVC's `spec.resources` had the same fields under `ResourceRequirements` before). The table knows when a
field came; a field that came behind a gate off by default (1.28's sidecar `restartPolicy`) is known
to the release and cleared from its writes by `disabledfields.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

__all__ = ["FIRST_MINOR", "LATEST", "OLDEST_MINOR", "trim_to"]

OLDEST_MINOR = 27
"""The oldest minor release whose field set the lab tells apart."""

LATEST = 1_000
"""The minor release of a caller that knows every field the lab does."""

FIRST_MINOR: Mapping[str, Mapping[str, int]] = {
    "io.k8s.api.admissionregistration.v1.ApplyConfiguration": {"expression": 36},
    "io.k8s.api.admissionregistration.v1.AuditAnnotation": {"key": 30, "valueExpression": 30},
    "io.k8s.api.admissionregistration.v1.ExpressionWarning": {"fieldRef": 30, "warning": 30},
    "io.k8s.api.admissionregistration.v1.JSONPatch": {"expression": 36},
    "io.k8s.api.admissionregistration.v1.MatchResources": {
        "excludeResourceRules": 30,
        "matchPolicy": 30,
        "namespaceSelector": 30,
        "objectSelector": 30,
        "resourceRules": 30,
    },
    "io.k8s.api.admissionregistration.v1.MutatingAdmissionPolicy": {"spec": 36},
    "io.k8s.api.admissionregistration.v1.MutatingAdmissionPolicyBinding": {"spec": 36},
    "io.k8s.api.admissionregistration.v1.MutatingAdmissionPolicyBindingList": {"items": 36},
    "io.k8s.api.admissionregistration.v1.MutatingAdmissionPolicyBindingSpec": {
        "matchResources": 36,
        "paramRef": 36,
        "policyName": 36,
    },
    "io.k8s.api.admissionregistration.v1.MutatingAdmissionPolicyList": {"items": 36},
    "io.k8s.api.admissionregistration.v1.MutatingAdmissionPolicySpec": {
        "failurePolicy": 36,
        "matchConditions": 36,
        "matchConstraints": 36,
        "mutations": 36,
        "paramKind": 36,
        "reinvocationPolicy": 36,
        "variables": 36,
    },
    "io.k8s.api.admissionregistration.v1.Mutation": {
        "applyConfiguration": 36,
        "jsonPatch": 36,
        "patchType": 36,
    },
    "io.k8s.api.admissionregistration.v1.NamedRuleWithOperations": {
        "apiGroups": 30,
        "apiVersions": 30,
        "operations": 30,
        "resourceNames": 30,
        "resources": 30,
        "scope": 30,
    },
    "io.k8s.api.admissionregistration.v1.ParamKind": {"apiVersion": 30, "kind": 30},
    "io.k8s.api.admissionregistration.v1.ParamRef": {
        "name": 30,
        "namespace": 30,
        "parameterNotFoundAction": 30,
        "selector": 30,
    },
    "io.k8s.api.admissionregistration.v1.TypeChecking": {"expressionWarnings": 30},
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicy": {"spec": 30, "status": 30},
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding": {"spec": 30},
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingList": {"items": 30},
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec": {
        "matchResources": 30,
        "paramRef": 30,
        "policyName": 30,
        "validationActions": 30,
    },
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyList": {"items": 30},
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicySpec": {
        "auditAnnotations": 30,
        "failurePolicy": 30,
        "matchConditions": 30,
        "matchConstraints": 30,
        "paramKind": 30,
        "validations": 30,
        "variables": 30,
    },
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyStatus": {
        "conditions": 30,
        "observedGeneration": 30,
        "typeChecking": 30,
    },
    "io.k8s.api.admissionregistration.v1.Validation": {
        "expression": 30,
        "message": 30,
        "messageExpression": 30,
        "reason": 30,
    },
    "io.k8s.api.admissionregistration.v1.Variable": {"expression": 30, "name": 30},
    "io.k8s.api.apps.v1.DeploymentStatus": {"terminatingReplicas": 33},
    "io.k8s.api.apps.v1.ReplicaSetStatus": {"terminatingReplicas": 33},
    "io.k8s.api.batch.v1.JobSchedulingConfiguration": {
        "disruptionMode": 37,
        "resourceClaims": 37,
        "schedulingConstraints": 37,
        "schedulingPolicy": 37,
    },
    "io.k8s.api.batch.v1.JobSpec": {
        "backoffLimitPerIndex": 28,
        "managedBy": 30,
        "maxFailedIndexes": 28,
        "podReplacementPolicy": 28,
        "scheduling": 37,
        "successPolicy": 30,
    },
    "io.k8s.api.batch.v1.JobStatus": {"failedIndexes": 28, "terminating": 28},
    "io.k8s.api.batch.v1.SuccessPolicy": {"rules": 30},
    "io.k8s.api.batch.v1.SuccessPolicyRule": {"succeededCount": 30, "succeededIndexes": 30},
    "io.k8s.api.coordination.v1.LeaseSpec": {"preferredHolder": 31, "strategy": 31},
    "io.k8s.api.core.v1.AppArmorProfile": {"localhostProfile": 30, "type": 30},
    "io.k8s.api.core.v1.ClusterTrustBundleProjection": {
        "labelSelector": 29,
        "name": 29,
        "optional": 29,
        "path": 29,
        "signerName": 29,
        "user": 37,
    },
    "io.k8s.api.core.v1.ConfigMapVolumeSource": {"defaultUser": 37},
    "io.k8s.api.core.v1.Container": {"restartPolicy": 28, "restartPolicyRules": 34},
    "io.k8s.api.core.v1.ContainerExtendedResourceRequest": {
        "containerName": 34,
        "requestName": 34,
        "resourceName": 34,
    },
    "io.k8s.api.core.v1.ContainerRestartRule": {"action": 34, "exitCodes": 34},
    "io.k8s.api.core.v1.ContainerRestartRuleOnExitCodes": {"operator": 34, "values": 34},
    "io.k8s.api.core.v1.ContainerStatus": {
        "allocatedResourcesStatus": 31,
        "stopSignal": 33,
        "user": 31,
        "volumeMounts": 30,
    },
    "io.k8s.api.core.v1.ContainerUser": {"linux": 31},
    "io.k8s.api.core.v1.DownwardAPIVolumeFile": {"user": 37},
    "io.k8s.api.core.v1.DownwardAPIVolumeSource": {"defaultUser": 37},
    "io.k8s.api.core.v1.EmptyDirVolumeSource": {"mode": 37},
    "io.k8s.api.core.v1.EnvVarSource": {"fileKeyRef": 34},
    "io.k8s.api.core.v1.EphemeralContainer": {"restartPolicy": 28, "restartPolicyRules": 34},
    "io.k8s.api.core.v1.EphemeralContainerCommon": {"restartPolicy": 28, "restartPolicyRules": 34},
    "io.k8s.api.core.v1.EvictionResponder": {"name": 37, "priority": 37},
    "io.k8s.api.core.v1.FileKeySelector": {"key": 34, "optional": 34, "path": 34, "volumeName": 34},
    "io.k8s.api.core.v1.GRPCAction": {"mode": 37},
    "io.k8s.api.core.v1.HTTPGetAction": {"protocol": 37},
    "io.k8s.api.core.v1.HostIP": {"ip": 28},
    "io.k8s.api.core.v1.ImageVolumeSource": {"pullPolicy": 31, "reference": 31},
    "io.k8s.api.core.v1.ImageVolumeStatus": {"imageRef": 36},
    "io.k8s.api.core.v1.KeyToPath": {"user": 37},
    "io.k8s.api.core.v1.Lifecycle": {"stopSignal": 33},
    "io.k8s.api.core.v1.LifecycleHandler": {"sleep": 29},
    "io.k8s.api.core.v1.LinuxContainerUser": {"gid": 31, "supplementalGroups": 31, "uid": 31},
    "io.k8s.api.core.v1.LoadBalancerIngress": {"ipMode": 29},
    "io.k8s.api.core.v1.ModifyVolumeStatus": {"status": 29, "targetVolumeAttributesClassName": 29},
    "io.k8s.api.core.v1.NodeAllocatableMappedResources": {"name": 37, "quantity": 37},
    "io.k8s.api.core.v1.NodeAllocatableOverheadResources": {"name": 37, "perContainer": 37, "perPod": 37},
    "io.k8s.api.core.v1.NodeAllocatableResourceClaimStatus": {
        "containers": 36,
        "mapping": 37,
        "overhead": 37,
        "resourceClaimName": 36,
        "resources": 36,
    },
    "io.k8s.api.core.v1.NodeFeatures": {"supplementalGroupsPolicy": 31},
    "io.k8s.api.core.v1.NodePodPreemptionPolicy": {"disableResizePreemption": 37},
    "io.k8s.api.core.v1.NodeRuntimeHandler": {"features": 30, "name": 30},
    "io.k8s.api.core.v1.NodeRuntimeHandlerFeatures": {"recursiveReadOnlyMounts": 30, "userNamespaces": 31},
    "io.k8s.api.core.v1.NodeSpec": {"podPreemptionPolicy": 37},
    "io.k8s.api.core.v1.NodeStatus": {"declaredFeatures": 35, "features": 31, "runtimeHandlers": 30},
    "io.k8s.api.core.v1.NodeSwapStatus": {"capacity": 33},
    "io.k8s.api.core.v1.NodeSystemInfo": {"swap": 33},
    "io.k8s.api.core.v1.PersistentVolumeClaimSpec": {"volumeAttributesClassName": 29},
    "io.k8s.api.core.v1.PersistentVolumeClaimStatus": {
        "allocatedResourceStatuses": 28,
        "currentVolumeAttributesClassName": 29,
        "healthStatus": 37,
        "modifyVolumeStatus": 29,
    },
    "io.k8s.api.core.v1.PersistentVolumeSpec": {"volumeAttributesClassName": 29},
    "io.k8s.api.core.v1.PersistentVolumeStatus": {"lastPhaseTransitionTime": 28},
    "io.k8s.api.core.v1.PodAffinityTerm": {"matchLabelKeys": 29, "mismatchLabelKeys": 29},
    "io.k8s.api.core.v1.PodCertificateProjection": {
        "certificateChainPath": 34,
        "credentialBundlePath": 34,
        "keyPath": 34,
        "keyType": 34,
        "maxExpirationSeconds": 34,
        "signerName": 34,
        "user": 37,
        "userAnnotations": 35,
    },
    "io.k8s.api.core.v1.PodCondition": {"observedGeneration": 33},
    "io.k8s.api.core.v1.PodExtendedResourceClaimStatus": {"requestMappings": 34, "resourceClaimName": 34},
    "io.k8s.api.core.v1.PodLogOptions": {"stream": 32},
    "io.k8s.api.core.v1.PodResourceClaim": {"resourceClaimName": 31, "resourceClaimTemplateName": 31},
    "io.k8s.api.core.v1.PodResourceClaimStatus": {"name": 28, "resourceClaimName": 28},
    "io.k8s.api.core.v1.PodSchedulingGroup": {"podGroupName": 36},
    "io.k8s.api.core.v1.PodSecurityContext": {
        "appArmorProfile": 30,
        "seLinuxChangePolicy": 32,
        "supplementalGroupsPolicy": 31,
    },
    "io.k8s.api.core.v1.PodSpec": {
        "evictionResponders": 37,
        "hostnameOverride": 34,
        "resources": 32,
        "schedulingGroup": 36,
        "workloadRef": 35,
    },
    "io.k8s.api.core.v1.PodStatus": {
        "allocatedResources": 35,
        "extendedResourceClaimStatus": 34,
        "hostIPs": 28,
        "nodeAllocatableResourceClaimStatuses": 36,
        "observedGeneration": 33,
        "resourceClaimStatuses": 28,
        "resources": 35,
        "volumeHealth": 37,
    },
    "io.k8s.api.core.v1.PodVolumeHealth": {"healthConditions": 37, "lastTransitionTime": 37, "name": 37},
    "io.k8s.api.core.v1.ProjectedVolumeSource": {"defaultUser": 37},
    "io.k8s.api.core.v1.ResourceClaim": {"request": 31},
    "io.k8s.api.core.v1.ResourceHealth": {"health": 31, "message": 36, "resourceID": 31},
    "io.k8s.api.core.v1.ResourceStatus": {"name": 31, "resources": 31},
    "io.k8s.api.core.v1.SecretVolumeSource": {"defaultUser": 37},
    "io.k8s.api.core.v1.SecurityContext": {"appArmorProfile": 30},
    "io.k8s.api.core.v1.ServiceAccountTokenProjection": {"user": 37},
    "io.k8s.api.core.v1.ServiceSpec": {"trafficDistribution": 30},
    "io.k8s.api.core.v1.SleepAction": {"seconds": 29},
    "io.k8s.api.core.v1.Volume": {"image": 31},
    "io.k8s.api.core.v1.VolumeHealthCondition": {"message": 37, "reason": 37, "status": 37},
    "io.k8s.api.core.v1.VolumeHealthStatus": {"healthConditions": 37, "lastTransitionTime": 37},
    "io.k8s.api.core.v1.VolumeMount": {"bindMountOptions": 37, "recursiveReadOnly": 30},
    "io.k8s.api.core.v1.VolumeMountStatus": {
        "mountPath": 30,
        "name": 30,
        "readOnly": 30,
        "recursiveReadOnly": 30,
        "volumeStatus": 36,
    },
    "io.k8s.api.core.v1.VolumeProjection": {"clusterTrustBundle": 29, "podCertificate": 34},
    "io.k8s.api.core.v1.VolumeSource": {"image": 31},
    "io.k8s.api.core.v1.VolumeStatus": {"image": 36},
    "io.k8s.api.core.v1.WorkloadReference": {"name": 35, "podGroup": 35, "podGroupReplicaKey": 35},
    "io.k8s.api.discovery.v1.EndpointHints": {"forNodes": 33},
    "io.k8s.api.discovery.v1.ForNode": {"name": 33},
    "io.k8s.api.networking.v1.IPAddress": {"spec": 33},
    "io.k8s.api.networking.v1.IPAddressList": {"items": 33},
    "io.k8s.api.networking.v1.IPAddressSpec": {"parentRef": 33},
    "io.k8s.api.networking.v1.ParentReference": {"group": 33, "name": 33, "namespace": 33, "resource": 33},
    "io.k8s.api.networking.v1.ServiceCIDR": {"spec": 33, "status": 33},
    "io.k8s.api.networking.v1.ServiceCIDRList": {"items": 33},
    "io.k8s.api.networking.v1.ServiceCIDRSpec": {"cidrs": 33},
    "io.k8s.api.networking.v1.ServiceCIDRStatus": {"conditions": 33},
}


def trim_to(components: MutableMapping[str, Mapping[str, Any]], minor: int) -> None:
    """Leave out of `components` (OpenAPI schemas by name) the properties Kubernetes 1.`minor` does not
    have yet. Components are shared, so a trimmed one is a copy."""
    for name, component in components.items():
        newer = FIRST_MINOR.get(name)
        properties = component.get("properties") if newer else None
        if newer and properties and any(newer.get(field, 0) > minor for field in properties):
            kept = {field: value for field, value in properties.items() if newer.get(field, 0) <= minor}
            components[name] = {**component, "properties": kept}
