"""The fields Go's JSON encoder leaves out of a built-in object when they hold their zero value.

kube-apiserver decodes a write into Go structs and encodes what it stores and returns from them. A field
tagged `omitempty` whose type is a string, a number, a bool, a list or a map (not a pointer, not a struct)
is left out when it is `""`, `0`, `false` or empty, so `hostNetwork: false`, `env[].value: ""` or
`args: []` in a manifest is not in the object kubectl reads back, and absent and zero are one value. The
names below are the struct fields of k8s.io/api (read at kubernetes/api `HEAD` of 2026-07-24, the groups
the lab serves) with such a tag, embedded structs inlined, keyed by the OpenAPI component of the struct.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["OMIT_EMPTY"]

# A Container's, which an EphemeralContainer has too (its common part is embedded).
_CONTAINER = frozenset(
    {
        "args",
        "command",
        "env",
        "envFrom",
        "image",
        "imagePullPolicy",
        "ports",
        "resizePolicy",
        "restartPolicyRules",
        "stdin",
        "stdinOnce",
        "terminationMessagePath",
        "terminationMessagePolicy",
        "tty",
        "volumeDevices",
        "volumeMounts",
        "workingDir",
    }
)

OMIT_EMPTY: Mapping[str, frozenset[str]] = {
    "io.k8s.api.admissionregistration.v1.ApplyConfiguration": frozenset({"expression"}),
    "io.k8s.api.admissionregistration.v1.JSONPatch": frozenset({"expression"}),
    "io.k8s.api.admissionregistration.v1.MatchResources": frozenset(
        {"excludeResourceRules", "resourceRules"}
    ),
    "io.k8s.api.admissionregistration.v1.MutatingAdmissionPolicyBindingSpec": frozenset({"policyName"}),
    "io.k8s.api.admissionregistration.v1.MutatingAdmissionPolicySpec": frozenset(
        {"matchConditions", "mutations", "reinvocationPolicy", "variables"}
    ),
    "io.k8s.api.admissionregistration.v1.MutatingWebhook": frozenset({"matchConditions", "rules"}),
    "io.k8s.api.admissionregistration.v1.MutatingWebhookConfiguration": frozenset({"webhooks"}),
    "io.k8s.api.admissionregistration.v1.NamedRuleWithOperations": frozenset(
        {"apiGroups", "apiVersions", "operations", "resourceNames", "resources"}
    ),
    "io.k8s.api.admissionregistration.v1.ParamKind": frozenset({"apiVersion", "kind"}),
    "io.k8s.api.admissionregistration.v1.ParamRef": frozenset({"name", "namespace"}),
    "io.k8s.api.admissionregistration.v1.Rule": frozenset({"apiGroups", "apiVersions", "resources"}),
    "io.k8s.api.admissionregistration.v1.RuleWithOperations": frozenset(
        {"apiGroups", "apiVersions", "operations", "resources"}
    ),
    "io.k8s.api.admissionregistration.v1.TypeChecking": frozenset({"expressionWarnings"}),
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec": frozenset(
        {"policyName", "validationActions"}
    ),
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicySpec": frozenset(
        {"auditAnnotations", "matchConditions", "validations", "variables"}
    ),
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyStatus": frozenset(
        {"conditions", "observedGeneration"}
    ),
    "io.k8s.api.admissionregistration.v1.ValidatingWebhook": frozenset({"matchConditions", "rules"}),
    "io.k8s.api.admissionregistration.v1.ValidatingWebhookConfiguration": frozenset({"webhooks"}),
    "io.k8s.api.admissionregistration.v1.Validation": frozenset({"message", "messageExpression"}),
    "io.k8s.api.admissionregistration.v1.WebhookClientConfig": frozenset({"caBundle"}),
    "io.k8s.api.apps.v1.DaemonSetCondition": frozenset({"message", "reason"}),
    "io.k8s.api.apps.v1.DaemonSetSpec": frozenset({"minReadySeconds"}),
    "io.k8s.api.apps.v1.DaemonSetStatus": frozenset(
        {"conditions", "numberAvailable", "numberUnavailable", "observedGeneration", "updatedNumberScheduled"}
    ),
    "io.k8s.api.apps.v1.DaemonSetUpdateStrategy": frozenset({"type"}),
    "io.k8s.api.apps.v1.DeploymentCondition": frozenset({"message", "reason"}),
    "io.k8s.api.apps.v1.DeploymentSpec": frozenset({"minReadySeconds", "paused"}),
    "io.k8s.api.apps.v1.DeploymentStatus": frozenset(
        {
            "availableReplicas",
            "conditions",
            "observedGeneration",
            "readyReplicas",
            "replicas",
            "unavailableReplicas",
            "updatedReplicas",
        }
    ),
    "io.k8s.api.apps.v1.DeploymentStrategy": frozenset({"type"}),
    "io.k8s.api.apps.v1.ReplicaSetCondition": frozenset({"message", "reason"}),
    "io.k8s.api.apps.v1.ReplicaSetSpec": frozenset({"minReadySeconds"}),
    "io.k8s.api.apps.v1.ReplicaSetStatus": frozenset(
        {"availableReplicas", "conditions", "fullyLabeledReplicas", "observedGeneration", "readyReplicas"}
    ),
    "io.k8s.api.apps.v1.StatefulSetCondition": frozenset({"message", "reason"}),
    "io.k8s.api.apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy": frozenset(
        {"whenDeleted", "whenScaled"}
    ),
    "io.k8s.api.apps.v1.StatefulSetSpec": frozenset(
        {"minReadySeconds", "podManagementPolicy", "volumeClaimTemplates"}
    ),
    "io.k8s.api.apps.v1.StatefulSetStatus": frozenset(
        {
            "conditions",
            "currentReplicas",
            "currentRevision",
            "observedGeneration",
            "readyReplicas",
            "updateRevision",
            "updatedReplicas",
        }
    ),
    "io.k8s.api.apps.v1.StatefulSetUpdateStrategy": frozenset({"type"}),
    "io.k8s.api.batch.v1.CronJobSpec": frozenset({"concurrencyPolicy"}),
    "io.k8s.api.batch.v1.CronJobStatus": frozenset({"active"}),
    "io.k8s.api.batch.v1.JobCondition": frozenset({"message", "reason"}),
    "io.k8s.api.batch.v1.JobSchedulingConfiguration": frozenset({"resourceClaims"}),
    "io.k8s.api.batch.v1.JobStatus": frozenset(
        {"active", "completedIndexes", "conditions", "failed", "succeeded"}
    ),
    "io.k8s.api.batch.v1.PodFailurePolicyRule": frozenset({"onPodConditions"}),
    "io.k8s.api.batch.v1.UncountedTerminatedPods": frozenset({"failed", "succeeded"}),
    "io.k8s.api.core.v1.AWSElasticBlockStoreVolumeSource": frozenset({"fsType", "partition", "readOnly"}),
    "io.k8s.api.core.v1.AvoidPods": frozenset({"preferAvoidPods"}),
    "io.k8s.api.core.v1.AzureFilePersistentVolumeSource": frozenset({"readOnly"}),
    "io.k8s.api.core.v1.AzureFileVolumeSource": frozenset({"readOnly"}),
    "io.k8s.api.core.v1.CSIPersistentVolumeSource": frozenset({"fsType", "readOnly", "volumeAttributes"}),
    "io.k8s.api.core.v1.CSIVolumeSource": frozenset({"volumeAttributes"}),
    "io.k8s.api.core.v1.Capabilities": frozenset({"add", "drop"}),
    "io.k8s.api.core.v1.CephFSPersistentVolumeSource": frozenset({"path", "readOnly", "secretFile", "user"}),
    "io.k8s.api.core.v1.CephFSVolumeSource": frozenset({"path", "readOnly", "secretFile", "user"}),
    "io.k8s.api.core.v1.CinderPersistentVolumeSource": frozenset({"fsType", "readOnly"}),
    "io.k8s.api.core.v1.CinderVolumeSource": frozenset({"fsType", "readOnly"}),
    "io.k8s.api.core.v1.ComponentCondition": frozenset({"error", "message"}),
    "io.k8s.api.core.v1.ComponentStatus": frozenset({"conditions"}),
    "io.k8s.api.core.v1.ConfigMap": frozenset({"binaryData", "data"}),
    "io.k8s.api.core.v1.ConfigMapEnvSource": frozenset({"name"}),
    "io.k8s.api.core.v1.ConfigMapKeySelector": frozenset({"name"}),
    "io.k8s.api.core.v1.ConfigMapNodeConfigSource": frozenset({"resourceVersion", "uid"}),
    "io.k8s.api.core.v1.ConfigMapProjection": frozenset({"items", "name"}),
    "io.k8s.api.core.v1.ConfigMapVolumeSource": frozenset({"items", "name"}),
    "io.k8s.api.core.v1.Container": _CONTAINER,
    "io.k8s.api.core.v1.ContainerImage": frozenset({"sizeBytes"}),
    "io.k8s.api.core.v1.ContainerPort": frozenset({"hostIP", "hostPort", "name", "protocol"}),
    "io.k8s.api.core.v1.ContainerRestartRule": frozenset({"action"}),
    "io.k8s.api.core.v1.ContainerRestartRuleOnExitCodes": frozenset({"operator", "values"}),
    "io.k8s.api.core.v1.ContainerStateTerminated": frozenset({"containerID", "message", "reason", "signal"}),
    "io.k8s.api.core.v1.ContainerStateWaiting": frozenset({"message", "reason"}),
    "io.k8s.api.core.v1.ContainerStatus": frozenset(
        {"allocatedResources", "allocatedResourcesStatus", "containerID", "volumeMounts"}
    ),
    "io.k8s.api.core.v1.DownwardAPIProjection": frozenset({"items"}),
    "io.k8s.api.core.v1.DownwardAPIVolumeSource": frozenset({"items"}),
    "io.k8s.api.core.v1.EmptyDirVolumeSource": frozenset({"medium"}),
    "io.k8s.api.core.v1.EndpointAddress": frozenset({"hostname"}),
    "io.k8s.api.core.v1.EndpointPort": frozenset({"name", "protocol"}),
    "io.k8s.api.core.v1.EndpointSubset": frozenset({"addresses", "notReadyAddresses", "ports"}),
    "io.k8s.api.core.v1.Endpoints": frozenset({"subsets"}),
    "io.k8s.api.core.v1.EnvFromSource": frozenset({"prefix"}),
    "io.k8s.api.core.v1.EnvVar": frozenset({"value"}),
    "io.k8s.api.core.v1.EphemeralContainer": _CONTAINER | {"targetContainerName"},
    "io.k8s.api.core.v1.EphemeralContainerCommon": _CONTAINER,
    "io.k8s.api.core.v1.Event": frozenset({"action", "count", "message", "reason", "type"}),
    "io.k8s.api.core.v1.EventSeries": frozenset({"count"}),
    "io.k8s.api.core.v1.EventSource": frozenset({"component", "host"}),
    "io.k8s.api.core.v1.ExecAction": frozenset({"command"}),
    "io.k8s.api.core.v1.FCVolumeSource": frozenset({"fsType", "readOnly", "targetWWNs", "wwids"}),
    "io.k8s.api.core.v1.FlexPersistentVolumeSource": frozenset({"fsType", "options", "readOnly"}),
    "io.k8s.api.core.v1.FlexVolumeSource": frozenset({"fsType", "options", "readOnly"}),
    "io.k8s.api.core.v1.FlockerVolumeSource": frozenset({"datasetName", "datasetUUID"}),
    "io.k8s.api.core.v1.GCEPersistentDiskVolumeSource": frozenset({"fsType", "partition", "readOnly"}),
    "io.k8s.api.core.v1.GitRepoVolumeSource": frozenset({"directory", "revision"}),
    "io.k8s.api.core.v1.GlusterfsPersistentVolumeSource": frozenset({"readOnly"}),
    "io.k8s.api.core.v1.GlusterfsVolumeSource": frozenset({"readOnly"}),
    "io.k8s.api.core.v1.HTTPGetAction": frozenset({"host", "httpHeaders", "path", "scheme"}),
    "io.k8s.api.core.v1.HostAlias": frozenset({"hostnames"}),
    "io.k8s.api.core.v1.ISCSIPersistentVolumeSource": frozenset(
        {"chapAuthDiscovery", "chapAuthSession", "fsType", "iscsiInterface", "portals", "readOnly"}
    ),
    "io.k8s.api.core.v1.ISCSIVolumeSource": frozenset(
        {"chapAuthDiscovery", "chapAuthSession", "fsType", "iscsiInterface", "portals", "readOnly"}
    ),
    "io.k8s.api.core.v1.ImageVolumeSource": frozenset({"pullPolicy", "reference"}),
    "io.k8s.api.core.v1.ImageVolumeStatus": frozenset({"imageRef"}),
    "io.k8s.api.core.v1.LimitRangeItem": frozenset(
        {"default", "defaultRequest", "max", "maxLimitRequestRatio", "min"}
    ),
    "io.k8s.api.core.v1.LinuxContainerUser": frozenset({"supplementalGroups"}),
    "io.k8s.api.core.v1.LoadBalancerIngress": frozenset({"hostname", "ip", "ports"}),
    "io.k8s.api.core.v1.LoadBalancerStatus": frozenset({"ingress"}),
    "io.k8s.api.core.v1.LocalObjectReference": frozenset({"name"}),
    "io.k8s.api.core.v1.ModifyVolumeStatus": frozenset({"targetVolumeAttributesClassName"}),
    "io.k8s.api.core.v1.NFSVolumeSource": frozenset({"readOnly"}),
    "io.k8s.api.core.v1.NamespaceCondition": frozenset({"message", "reason"}),
    "io.k8s.api.core.v1.NamespaceSpec": frozenset({"finalizers"}),
    "io.k8s.api.core.v1.NamespaceStatus": frozenset({"conditions", "phase"}),
    "io.k8s.api.core.v1.NodeAffinity": frozenset({"preferredDuringSchedulingIgnoredDuringExecution"}),
    "io.k8s.api.core.v1.NodeAllocatableResourceClaimStatus": frozenset({"containers", "mapping", "overhead"}),
    "io.k8s.api.core.v1.NodeCondition": frozenset({"message", "reason"}),
    "io.k8s.api.core.v1.NodeConfigStatus": frozenset({"error"}),
    "io.k8s.api.core.v1.NodePodPreemptionPolicy": frozenset({"disableResizePreemption"}),
    "io.k8s.api.core.v1.NodeProxyOptions": frozenset({"path"}),
    "io.k8s.api.core.v1.NodeSelectorRequirement": frozenset({"values"}),
    "io.k8s.api.core.v1.NodeSelectorTerm": frozenset({"matchExpressions", "matchFields"}),
    "io.k8s.api.core.v1.NodeSpec": frozenset(
        {"externalID", "podCIDR", "podCIDRs", "providerID", "taints", "unschedulable"}
    ),
    "io.k8s.api.core.v1.NodeStatus": frozenset(
        {
            "addresses",
            "allocatable",
            "capacity",
            "conditions",
            "declaredFeatures",
            "images",
            "phase",
            "runtimeHandlers",
            "volumesAttached",
            "volumesInUse",
        }
    ),
    "io.k8s.api.core.v1.ObjectFieldSelector": frozenset({"apiVersion"}),
    "io.k8s.api.core.v1.ObjectReference": frozenset(
        {"apiVersion", "fieldPath", "kind", "name", "namespace", "resourceVersion", "uid"}
    ),
    "io.k8s.api.core.v1.PersistentVolumeClaimCondition": frozenset({"message", "reason"}),
    "io.k8s.api.core.v1.PersistentVolumeClaimSpec": frozenset({"accessModes", "volumeName"}),
    "io.k8s.api.core.v1.PersistentVolumeClaimStatus": frozenset(
        {"accessModes", "allocatedResourceStatuses", "allocatedResources", "capacity", "conditions", "phase"}
    ),
    "io.k8s.api.core.v1.PersistentVolumeClaimVolumeSource": frozenset({"readOnly"}),
    "io.k8s.api.core.v1.PersistentVolumeSpec": frozenset(
        {"accessModes", "capacity", "mountOptions", "persistentVolumeReclaimPolicy", "storageClassName"}
    ),
    "io.k8s.api.core.v1.PersistentVolumeStatus": frozenset({"message", "phase", "reason"}),
    "io.k8s.api.core.v1.PhotonPersistentDiskVolumeSource": frozenset({"fsType"}),
    "io.k8s.api.core.v1.PodAffinity": frozenset(
        {"preferredDuringSchedulingIgnoredDuringExecution", "requiredDuringSchedulingIgnoredDuringExecution"}
    ),
    "io.k8s.api.core.v1.PodAffinityTerm": frozenset({"matchLabelKeys", "mismatchLabelKeys", "namespaces"}),
    "io.k8s.api.core.v1.PodAntiAffinity": frozenset(
        {"preferredDuringSchedulingIgnoredDuringExecution", "requiredDuringSchedulingIgnoredDuringExecution"}
    ),
    "io.k8s.api.core.v1.PodAttachOptions": frozenset({"container", "stderr", "stdin", "stdout", "tty"}),
    "io.k8s.api.core.v1.PodCertificateProjection": frozenset(
        {
            "certificateChainPath",
            "credentialBundlePath",
            "keyPath",
            "keyType",
            "signerName",
            "userAnnotations",
        }
    ),
    "io.k8s.api.core.v1.PodCondition": frozenset({"message", "observedGeneration", "reason"}),
    "io.k8s.api.core.v1.PodDNSConfig": frozenset({"nameservers", "options", "searches"}),
    "io.k8s.api.core.v1.PodDNSConfigOption": frozenset({"name"}),
    "io.k8s.api.core.v1.PodExecOptions": frozenset({"container", "stderr", "stdin", "stdout", "tty"}),
    "io.k8s.api.core.v1.PodLogOptions": frozenset(
        {"container", "follow", "insecureSkipTLSVerifyBackend", "previous", "timestamps"}
    ),
    "io.k8s.api.core.v1.PodPortForwardOptions": frozenset({"ports"}),
    "io.k8s.api.core.v1.PodProxyOptions": frozenset({"path"}),
    "io.k8s.api.core.v1.PodSecurityContext": frozenset({"supplementalGroups", "sysctls"}),
    "io.k8s.api.core.v1.PodSpec": frozenset(
        {
            "dnsPolicy",
            "ephemeralContainers",
            "evictionResponders",
            "hostAliases",
            "hostIPC",
            "hostNetwork",
            "hostPID",
            "hostname",
            "imagePullSecrets",
            "initContainers",
            "nodeName",
            "nodeSelector",
            "overhead",
            "priorityClassName",
            "readinessGates",
            "resourceClaims",
            "restartPolicy",
            "schedulerName",
            "schedulingGates",
            "serviceAccount",
            "serviceAccountName",
            "subdomain",
            "tolerations",
            "topologySpreadConstraints",
            "volumes",
        }
    ),
    "io.k8s.api.core.v1.PodStatus": frozenset(
        {
            "allocatedResources",
            "conditions",
            "containerStatuses",
            "ephemeralContainerStatuses",
            "hostIP",
            "hostIPs",
            "initContainerStatuses",
            "message",
            "nodeAllocatableResourceClaimStatuses",
            "nominatedNodeName",
            "observedGeneration",
            "phase",
            "podIP",
            "podIPs",
            "qosClass",
            "reason",
            "resize",
            "resourceClaimStatuses",
            "volumeHealth",
        }
    ),
    "io.k8s.api.core.v1.PodVolumeHealth": frozenset({"healthConditions"}),
    "io.k8s.api.core.v1.PortworxVolumeSource": frozenset({"fsType", "readOnly"}),
    "io.k8s.api.core.v1.PreferAvoidPodsEntry": frozenset({"message", "reason"}),
    "io.k8s.api.core.v1.Probe": frozenset(
        {"failureThreshold", "initialDelaySeconds", "periodSeconds", "successThreshold", "timeoutSeconds"}
    ),
    "io.k8s.api.core.v1.QuobyteVolumeSource": frozenset({"group", "readOnly", "tenant", "user"}),
    "io.k8s.api.core.v1.RBDPersistentVolumeSource": frozenset(
        {"fsType", "keyring", "pool", "readOnly", "user"}
    ),
    "io.k8s.api.core.v1.RBDVolumeSource": frozenset({"fsType", "keyring", "pool", "readOnly", "user"}),
    "io.k8s.api.core.v1.ReplicationControllerCondition": frozenset({"message", "reason"}),
    "io.k8s.api.core.v1.ReplicationControllerSpec": frozenset({"minReadySeconds", "selector"}),
    "io.k8s.api.core.v1.ReplicationControllerStatus": frozenset(
        {"availableReplicas", "conditions", "fullyLabeledReplicas", "observedGeneration", "readyReplicas"}
    ),
    "io.k8s.api.core.v1.ResourceClaim": frozenset({"request"}),
    "io.k8s.api.core.v1.ResourceFieldSelector": frozenset({"containerName"}),
    "io.k8s.api.core.v1.ResourceHealth": frozenset({"health"}),
    "io.k8s.api.core.v1.ResourceQuotaSpec": frozenset({"hard", "scopes"}),
    "io.k8s.api.core.v1.ResourceQuotaStatus": frozenset({"hard", "used"}),
    "io.k8s.api.core.v1.ResourceRequirements": frozenset({"claims", "limits", "requests"}),
    "io.k8s.api.core.v1.ResourceStatus": frozenset({"resources"}),
    "io.k8s.api.core.v1.SELinuxOptions": frozenset({"level", "role", "type", "user"}),
    "io.k8s.api.core.v1.ScaleIOPersistentVolumeSource": frozenset(
        {"fsType", "protectionDomain", "readOnly", "sslEnabled", "storageMode", "storagePool", "volumeName"}
    ),
    "io.k8s.api.core.v1.ScaleIOVolumeSource": frozenset(
        {"fsType", "protectionDomain", "readOnly", "sslEnabled", "storageMode", "storagePool", "volumeName"}
    ),
    "io.k8s.api.core.v1.ScopeSelector": frozenset({"matchExpressions"}),
    "io.k8s.api.core.v1.ScopedResourceSelectorRequirement": frozenset({"values"}),
    "io.k8s.api.core.v1.Secret": frozenset({"data", "stringData", "type"}),
    "io.k8s.api.core.v1.SecretEnvSource": frozenset({"name"}),
    "io.k8s.api.core.v1.SecretKeySelector": frozenset({"name"}),
    "io.k8s.api.core.v1.SecretProjection": frozenset({"items", "name"}),
    "io.k8s.api.core.v1.SecretReference": frozenset({"name", "namespace"}),
    "io.k8s.api.core.v1.SecretVolumeSource": frozenset({"items", "secretName"}),
    "io.k8s.api.core.v1.ServiceAccount": frozenset({"imagePullSecrets", "secrets"}),
    "io.k8s.api.core.v1.ServiceAccountTokenProjection": frozenset({"audience"}),
    "io.k8s.api.core.v1.ServicePort": frozenset({"name", "nodePort", "protocol"}),
    "io.k8s.api.core.v1.ServiceProxyOptions": frozenset({"path"}),
    "io.k8s.api.core.v1.ServiceSpec": frozenset(
        {
            "clusterIP",
            "clusterIPs",
            "externalIPs",
            "externalName",
            "externalTrafficPolicy",
            "healthCheckNodePort",
            "ipFamilies",
            "loadBalancerIP",
            "loadBalancerSourceRanges",
            "ports",
            "publishNotReadyAddresses",
            "selector",
            "sessionAffinity",
            "type",
        }
    ),
    "io.k8s.api.core.v1.ServiceStatus": frozenset({"conditions"}),
    "io.k8s.api.core.v1.StorageOSPersistentVolumeSource": frozenset(
        {"fsType", "readOnly", "volumeName", "volumeNamespace"}
    ),
    "io.k8s.api.core.v1.StorageOSVolumeSource": frozenset(
        {"fsType", "readOnly", "volumeName", "volumeNamespace"}
    ),
    "io.k8s.api.core.v1.TCPSocketAction": frozenset({"host"}),
    "io.k8s.api.core.v1.Taint": frozenset({"value"}),
    "io.k8s.api.core.v1.Toleration": frozenset({"effect", "key", "operator", "value"}),
    "io.k8s.api.core.v1.TopologySelectorTerm": frozenset({"matchLabelExpressions"}),
    "io.k8s.api.core.v1.TopologySpreadConstraint": frozenset({"matchLabelKeys"}),
    "io.k8s.api.core.v1.VolumeHealthCondition": frozenset({"message"}),
    "io.k8s.api.core.v1.VolumeHealthStatus": frozenset({"healthConditions"}),
    "io.k8s.api.core.v1.VolumeMount": frozenset({"bindMountOptions", "readOnly", "subPath", "subPathExpr"}),
    "io.k8s.api.core.v1.VolumeMountStatus": frozenset({"readOnly"}),
    "io.k8s.api.core.v1.VolumeResourceRequirements": frozenset({"limits", "requests"}),
    "io.k8s.api.core.v1.VsphereVirtualDiskVolumeSource": frozenset(
        {"fsType", "storagePolicyID", "storagePolicyName"}
    ),
    "io.k8s.api.discovery.v1.Endpoint": frozenset({"deprecatedTopology"}),
    "io.k8s.api.discovery.v1.EndpointHints": frozenset({"forNodes", "forZones"}),
    "io.k8s.api.networking.v1.HTTPIngressPath": frozenset({"path"}),
    "io.k8s.api.networking.v1.IPBlock": frozenset({"except"}),
    "io.k8s.api.networking.v1.IngressClassSpec": frozenset({"controller"}),
    "io.k8s.api.networking.v1.IngressLoadBalancerIngress": frozenset({"hostname", "ip", "ports"}),
    "io.k8s.api.networking.v1.IngressLoadBalancerStatus": frozenset({"ingress"}),
    "io.k8s.api.networking.v1.IngressRule": frozenset({"host"}),
    "io.k8s.api.networking.v1.IngressSpec": frozenset({"rules", "tls"}),
    "io.k8s.api.networking.v1.IngressTLS": frozenset({"hosts", "secretName"}),
    "io.k8s.api.networking.v1.NetworkPolicyEgressRule": frozenset({"ports", "to"}),
    "io.k8s.api.networking.v1.NetworkPolicyIngressRule": frozenset({"from", "ports"}),
    "io.k8s.api.networking.v1.NetworkPolicySpec": frozenset({"egress", "ingress", "policyTypes"}),
    "io.k8s.api.networking.v1.ParentReference": frozenset({"group", "name", "namespace", "resource"}),
    "io.k8s.api.networking.v1.ServiceBackendPort": frozenset({"name", "number"}),
    "io.k8s.api.networking.v1.ServiceCIDRSpec": frozenset({"cidrs"}),
    "io.k8s.api.networking.v1.ServiceCIDRStatus": frozenset({"conditions"}),
    "io.k8s.api.policy.v1.PodDisruptionBudgetStatus": frozenset(
        {"conditions", "disruptedPods", "observedGeneration"}
    ),
    # RuntimeClass's `overhead` and `scheduling` are pointers (kept when `{}`); `handler` has no omitempty.
    "io.k8s.api.node.v1.Overhead": frozenset({"podFixed"}),
    "io.k8s.api.certificates.v1.CertificateSigningRequestSpec": frozenset(
        {"expirationSeconds", "extra", "groups", "uid", "usages", "username"}
    ),
    "io.k8s.api.certificates.v1.CertificateSigningRequestStatus": frozenset({"certificate", "conditions"}),
    "io.k8s.api.certificates.v1.CertificateSigningRequestCondition": frozenset({"message", "reason"}),
    "io.k8s.api.node.v1.Scheduling": frozenset({"nodeSelector", "tolerations"}),
    "io.k8s.api.rbac.v1.AggregationRule": frozenset({"clusterRoleSelectors"}),
    "io.k8s.api.rbac.v1.ClusterRoleBinding": frozenset({"subjects"}),
    "io.k8s.api.rbac.v1.PolicyRule": frozenset(
        {"apiGroups", "nonResourceURLs", "resourceNames", "resources"}
    ),
    "io.k8s.api.rbac.v1.RoleBinding": frozenset({"subjects"}),
    "io.k8s.api.rbac.v1.Subject": frozenset({"apiGroup", "namespace"}),
    "io.k8s.api.scheduling.v1.PriorityClass": frozenset({"description", "globalDefault"}),
    "io.k8s.api.storage.v1.StorageClass": frozenset({"allowedTopologies", "mountOptions", "parameters"}),
}
