"""Defaulting as kube-apiserver does it on the way in: the fields a stored object gains that nobody sent."""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from tenantgpu.apiserver.fieldversions import LATEST
from tenantgpu.apiserver.jsoncodec import clone
from tenantgpu.apiserver.quantity import QuantityError, canonical_or_same, canonicalize_list, parse_quantity

__all__ = ["default", "pod_qos_class"]

_NOT_READY_TOLERATIONS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _image_pull_policy(image: str) -> str:
    """`Always` for `:latest` or untagged images, else `IfNotPresent` (digests count as tagged)."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _default_container(ctr: dict[str, Any], *, requests_from_limits: bool) -> None:
    ctr.setdefault("terminationMessagePath", "/dev/termination-log")
    ctr.setdefault("terminationMessagePolicy", "File")
    if "imagePullPolicy" not in ctr:
        ctr["imagePullPolicy"] = _image_pull_policy(str(ctr.get("image") or ""))
    resources = ctr.setdefault("resources", {})
    limits = resources.get("limits") or {}
    canonicalize_list(limits)
    canonicalize_list(resources.get("requests"))
    if limits and requests_from_limits:
        requests = resources.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)
    for port in ctr.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        if isinstance(ctr.get(probe), dict):
            _default_probe(ctr[probe])
    for hook in ((ctr.get("lifecycle") or {}).get(when) for when in ("postStart", "preStop")):
        if isinstance(hook, dict):
            _default_handler(hook)
    for env in ctr.get("env") or []:
        _default_field_ref((env.get("valueFrom") or {}).get("fieldRef"))


def _default_probe(probe: dict[str, Any]) -> None:
    """SetDefaults_Probe: a probe's period, timeout and thresholds when unset (zero is unset in Go)."""
    for name, value in (
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ):
        if not probe.get(name):
            probe[name] = value
    _default_handler(probe)


def _default_handler(handler: dict[str, Any]) -> None:
    """SetDefaults_HTTPGetAction (path `/`, scheme HTTP) and GRPCAction's `service: ""`."""
    http_get = handler.get("httpGet")
    if isinstance(http_get, dict):
        if not http_get.get("path"):
            http_get["path"] = "/"
        if not http_get.get("scheme"):
            http_get["scheme"] = "HTTP"
    grpc = handler.get("grpc")
    if isinstance(grpc, dict) and grpc.get("service") is None:
        grpc["service"] = ""


def _quantity_or_none(value: Any) -> Decimal | None:
    try:
        return parse_quantity(value)
    except (QuantityError, TypeError):
        return None


def pod_qos_class(spec: Mapping[str, Any]) -> str:
    """Guaranteed, Burstable or BestEffort from cpu and memory requests and limits, as kube ranks pods."""
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for ctr in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
        resources = ctr.get("resources") or {}
        ctr_limits = {}
        for name in ("cpu", "memory"):
            req = _quantity_or_none((resources.get("requests") or {}).get(name))
            lim = _quantity_or_none((resources.get("limits") or {}).get(name))
            if req is not None and req != 0:
                requests[name] = requests.get(name, Decimal(0)) + req
            if lim is not None and lim != 0:
                limits[name] = limits.get(name, Decimal(0)) + lim
                ctr_limits[name] = lim
        if set(ctr_limits) != {"cpu", "memory"}:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if (
        guaranteed
        and set(limits) == {"cpu", "memory"}
        and all(requests.get(name) == limits[name] for name in limits)
    ):
        return "Guaranteed"
    return "Burstable"


# The two classes every cluster has, with their values (kube-apiserver creates them at start-up).
SYSTEM_PRIORITIES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}


def _default_pod_spec(spec: dict[str, Any], *, pod: bool) -> None:
    """SetDefaults_PodSpec: what every pod spec gets, a template's too; with `pod`, SetDefaults_Pod's
    requests from limits as well, which kube gives a Pod's containers and init containers and never a
    template's (a Deployment's template keeps the limits alone)."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    # The deprecated `serviceAccount` is an alias: read when the name is not given, and written back as
    # the name (kube's conversion of every pod spec). A pod that names neither gets `default` from the
    # ServiceAccount admission plugin.
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if account:
        spec["serviceAccountName"] = spec["serviceAccount"] = account
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for ctr in spec.get(group) or []:
            _default_container(ctr, requests_from_limits=pod and group != "ephemeralContainers")
    canonicalize_list(spec.get("overhead"))
    for volume in spec.get("volumes") or []:
        if isinstance(volume, dict):
            _default_volume(volume)


# A volume's source fields (v1.VolumeSource): a volume that names none is an emptyDir.
_VOLUME_SOURCES = frozenset(
    {
        "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs",
        "iscsi", "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs", "flocker",
        "downwardAPI", "fc", "azureFile", "configMap", "vsphereVolume", "quobyte", "azureDisk",
        "photonPersistentDisk", "projected", "portworxVolume", "scaleIO", "storageos", "csi", "ephemeral",
        "image",
    }
)  # fmt: skip
# Defaults of the sources that have any (SetDefaults_<Source> in pkg/apis/core/v1/defaults.go); 420 is
# the octal 0644 file mode every projection of files starts with.
_VOLUME_SOURCE_DEFAULTS: dict[str, tuple[tuple[str, Any], ...]] = {
    "secret": (("defaultMode", 420),),
    "configMap": (("defaultMode", 420),),
    "downwardAPI": (("defaultMode", 420),),
    "projected": (("defaultMode", 420),),
    "hostPath": (("type", ""),),
    "iscsi": (("iscsiInterface", "default"),),
    "rbd": (("pool", "rbd"), ("user", "admin"), ("keyring", "/etc/ceph/keyring")),
    "azureDisk": (("cachingMode", "ReadWrite"), ("fsType", "ext4"), ("readOnly", False), ("kind", "Shared")),
    "scaleIO": (("storageMode", "ThinProvisioned"), ("fsType", "xfs")),
}


def _default_volume(volume: dict[str, Any]) -> None:
    """SetDefaults_Volume and its sources' defaults, with the field references of downward API files
    (`apiVersion: v1`) and a projected token's hour (`expirationSeconds: 3600`)."""
    if not any(value is not None for key, value in volume.items() if key in _VOLUME_SOURCES):
        volume["emptyDir"] = {}
        return
    _default_sources(volume)
    empty_dir = volume.get("emptyDir")
    if isinstance(empty_dir, dict) and "sizeLimit" in empty_dir:
        empty_dir["sizeLimit"] = canonical_or_same(empty_dir["sizeLimit"])
    _default_field_refs(volume.get("downwardAPI"))
    projected = volume.get("projected")
    if isinstance(projected, dict):
        for source in projected.get("sources") or []:
            if not isinstance(source, dict):
                continue
            _default_field_refs(source.get("downwardAPI"))
            token = source.get("serviceAccountToken")
            if isinstance(token, dict) and token.get("expirationSeconds") is None:
                token["expirationSeconds"] = 3600


def _default_sources(holder: dict[str, Any]) -> None:
    """The defaults of the sources a pod volume or a PersistentVolume's spec holds (a PV's own source
    types, `ISCSIPersistentVolumeSource` and the like, default the same fields to the same values)."""
    for name, defaults in _VOLUME_SOURCE_DEFAULTS.items():
        source = holder.get(name)
        if isinstance(source, dict):
            for field_name, value in defaults:
                if source.get(field_name) is None:
                    source[field_name] = value


def _default_field_refs(downward: Any) -> None:
    if isinstance(downward, dict):
        for item in downward.get("items") or []:
            if isinstance(item, dict):
                _default_field_ref(item.get("fieldRef"))


def _default_field_ref(field_ref: Any) -> None:
    """SetDefaults_ObjectFieldSelector, for env vars and downward API files alike."""
    if isinstance(field_ref, dict):
        field_ref.setdefault("apiVersion", "v1")


def _default_pod_spec_fields(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    _default_pod_spec(spec, pod=True)
    # The rest is the admission plugins' (Priority, DefaultTolerationSeconds), which see pods only, never
    # a template.
    # The Priority admission plugin resolves the class; only the built-in classes are known here, so a
    # pod naming another class keeps whatever priority the caller resolved.
    class_name = spec.get("priorityClassName") or ""
    if class_name in SYSTEM_PRIORITIES or not class_name:
        spec.setdefault("priority", SYSTEM_PRIORITIES.get(class_name, 0))
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tolerations = spec.setdefault("tolerations", [])
    for key in _NOT_READY_TOLERATIONS:
        # The DefaultTolerationSeconds plugin adds these unless the pod already tolerates the taint.
        if not any(
            (t.get("key") in (key, None, "")) and t.get("effect") in ("NoExecute", None, "")
            for t in tolerations
        ):
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )


def default_pod_status(obj: dict[str, Any]) -> None:
    """A pod's status phase and QoS class when missing; also what kube's PrepareForCreate gives a new pod."""
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    if "qosClass" not in status:  # not setdefault: the class is worked out only when it is missing
        status["qosClass"] = pod_qos_class(obj.get("spec") or {})


def _default_service(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    obj.setdefault("status", {}).setdefault("loadBalancer", {})


def _default_namespace(obj: dict[str, Any]) -> None:
    meta = obj.setdefault("metadata", {})
    name = meta.get("name")
    if name:
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {}).setdefault("phase", "Active")


def _default_secret(obj: dict[str, Any]) -> None:
    obj.setdefault("type", "Opaque")
    # kube folds write-only stringData into data (base64) and never stores stringData.
    string_data = obj.pop("stringData", None) or {}
    if string_data:
        data = obj.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def _default_node(obj: dict[str, Any]) -> None:
    status = obj.get("status")
    if status:
        canonicalize_list(status.get("capacity"))
        canonicalize_list(status.get("allocatable"))
    if status and status.get("capacity") and not status.get("allocatable"):
        status["allocatable"] = dict(status["capacity"])


def _default_limit_range(obj: dict[str, Any]) -> None:
    """SetDefaults_LimitRangeItem: a Container item's default limit falls back to its max, and its
    default request to the default limit, then to its min; every quantity in canonical form."""
    for item in (obj.get("spec") or {}).get("limits") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "Container":
            default = item.setdefault("default", {})
            request = item.setdefault("defaultRequest", {})
            if isinstance(default, dict) and isinstance(request, dict):
                for source, target in (
                    (item.get("max"), default),
                    (default, request),
                    (item.get("min"), request),
                ):
                    for name, value in (source or {}).items():
                        target.setdefault(name, value)
            if not default:
                item.pop("default")
            if not request:
                item.pop("defaultRequest")
        for key in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            canonicalize_list(item.get(key))


def _default_endpoints(obj: dict[str, Any]) -> None:
    """Each subset's ports' protocol defaults to TCP (SetDefaults_Endpoints)."""
    for subset in obj.get("subsets") or []:
        for port in (subset or {}).get("ports") or [] if isinstance(subset, dict) else []:
            if isinstance(port, dict) and not port.get("protocol"):
                port["protocol"] = "TCP"


def _default_endpoint_slice(obj: dict[str, Any]) -> None:
    """A port's protocol defaults to TCP and its name to "" (SetDefaults_EndpointPort)."""
    for port in obj.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("name", "")


def _default_resource_quota(obj: dict[str, Any]) -> None:
    canonicalize_list((obj.get("spec") or {}).get("hard"))
    status = obj.get("status") or {}
    canonicalize_list(status.get("hard"))
    canonicalize_list(status.get("used"))


def _default_webhooks(mutating: bool) -> Callable[[dict[str, Any]], None]:
    def apply(obj: dict[str, Any]) -> None:
        for hook in obj.get("webhooks") or []:
            hook.setdefault("failurePolicy", "Fail")
            hook.setdefault("matchPolicy", "Equivalent")
            hook.setdefault("namespaceSelector", {})
            hook.setdefault("objectSelector", {})
            hook.setdefault("timeoutSeconds", 10)
            if mutating:
                hook.setdefault("reinvocationPolicy", "Never")
            for rule in hook.get("rules") or []:
                rule.setdefault("scope", "*")
            service = (hook.get("clientConfig") or {}).get("service")
            if service is not None:
                service.setdefault("port", 443)

    return apply


def _default_pod_template(template: dict[str, Any]) -> None:
    """A template's pod spec gets SetDefaults_PodSpec's defaults, not the admission plugins'."""
    spec = template.setdefault("spec", {})
    restart = spec.get("restartPolicy")
    _default_pod_spec(spec, pod=False)
    if restart is None:
        # Jobs must choose OnFailure or Never; leave it unset so that validation says so.
        spec.pop("restartPolicy", None)
    template.setdefault("metadata", {}).setdefault("creationTimestamp", None)


def _default_job(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    # kube defaults on every decode, so this runs again when the stored Job is read: a Job created
    # without labels shows the generated ones its strategy put in the template too.
    default_job_labels(obj)
    _default_pod_template(spec.setdefault("template", {}))


def default_job_labels(job: dict[str, Any]) -> None:
    """SetDefaults_Job's rule for labels: a Job without labels of its own takes its template's."""
    template_labels = (((job.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels")
    meta = job.setdefault("metadata", {})
    if template_labels and not meta.get("labels"):
        meta["labels"] = dict(template_labels)


def _default_job_from_1_29(obj: dict[str, Any]) -> None:
    """What 1.29 added to SetDefaults_Job: manualSelector's false, and podReplacementPolicy (beta, on
    by default from 1.29), Failed where a podFailurePolicy is given."""
    spec = obj.setdefault("spec", {})
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    if spec.get("manualSelector") is None:
        spec["manualSelector"] = False


def _default_cron_job(obj: dict[str, Any]) -> None:
    """SetDefaults_CronJob; the job template's pod spec gets the pod spec's defaults, the Job spec none."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job_template = spec.setdefault("jobTemplate", {})
    job_template.setdefault("metadata", {}).setdefault("creationTimestamp", None)
    _default_pod_template(job_template.setdefault("spec", {}).setdefault("template", {}))


def _default_replica_set(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    _default_pod_template(spec.setdefault("template", {}))
    spec["template"]["spec"].setdefault("restartPolicy", "Always")


def _default_daemon_set(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    _default_pod_template(spec.setdefault("template", {}))
    spec["template"]["spec"].setdefault("restartPolicy", "Always")
    strategy = spec.setdefault("updateStrategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)


def _default_stateful_set(obj: dict[str, Any]) -> None:
    _default_replica_set(obj)
    spec = obj["spec"]
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        strategy.setdefault("rollingUpdate", {}).setdefault("partition", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    retention.setdefault("whenDeleted", "Retain")
    retention.setdefault("whenScaled", "Retain")


def _default_deployment(obj: dict[str, Any]) -> None:
    _default_replica_set(obj)
    spec = obj["spec"]
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)


def _default_priority_class(obj: dict[str, Any]) -> None:
    obj.setdefault("preemptionPolicy", "PreemptLowerPriority")


def _default_network_policy(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    if "policyTypes" not in spec:
        # kube's default: Ingress always, Egress when egress rules are given.
        spec["policyTypes"] = ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


def _default_persistent_volume_claim(obj: dict[str, Any]) -> None:
    """SetObjectDefaults_PersistentVolumeClaim: the volume mode, the phase, quantities in canonical form."""
    spec = obj.setdefault("spec", {})
    if isinstance(spec, dict):
        spec.setdefault("volumeMode", "Filesystem")
        resources = spec.get("resources")
        if isinstance(resources, dict):
            canonicalize_list(resources.get("requests"))
            canonicalize_list(resources.get("limits"))
    status = obj.get("status")
    if isinstance(status, dict):
        # a status write that leaves the phase out is decoded as Pending, as a new claim's
        if not status.get("phase"):
            status["phase"] = "Pending"
        canonicalize_list(status.get("capacity"))
        canonicalize_list(status.get("allocatedResources"))


def _default_persistent_volume(obj: dict[str, Any]) -> None:
    """SetObjectDefaults_PersistentVolume: Retain, Filesystem, the phase, its source's defaults."""
    spec = obj.setdefault("spec", {})
    if isinstance(spec, dict):
        if not spec.get("persistentVolumeReclaimPolicy"):
            spec["persistentVolumeReclaimPolicy"] = "Retain"
        spec.setdefault("volumeMode", "Filesystem")
        canonicalize_list(spec.get("capacity"))
        _default_sources(spec)
    status = obj.get("status")
    if isinstance(status, dict) and not status.get("phase"):
        status["phase"] = "Pending"


def _default_storage_class(obj: dict[str, Any]) -> None:
    """SetDefaults_StorageClass: a class's volumes are deleted with their claims and bound at once."""
    if obj.get("reclaimPolicy") is None:
        obj["reclaimPolicy"] = "Delete"
    if obj.get("volumeBindingMode") is None:
        obj["volumeBindingMode"] = "Immediate"


def _default_runtime_class(obj: dict[str, Any]) -> None:
    """kube has no defaults for node.k8s.io/v1; decoding gives the overhead's quantities their canonical
    form, as a pod's."""
    overhead = obj.get("overhead")
    if isinstance(overhead, dict):
        canonicalize_list(overhead.get("podFixed"))


# Kamaji's CRD defaults for a TenantControlPlane (the chart's schema): each applies, as kube-apiserver's
# structural defaulting does, only inside an object that is there.
KONNECTIVITY_SERVER = {"image": "registry.k8s.io/kas-network-proxy/proxy-server", "port": 8132}
KONNECTIVITY_AGENT = {"image": "registry.k8s.io/kas-network-proxy/proxy-agent", "mode": "DaemonSet"}
TCP_ADMISSION_CONTROLLERS = [
    "CertificateApproval",
    "CertificateSigning",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DefaultStorageClass",
    "DefaultTolerationSeconds",
    "LimitRanger",
    "MutatingAdmissionWebhook",
    "NamespaceLifecycle",
    "PersistentVolumeClaimResize",
    "Priority",
    "ResourceQuota",
    "RuntimeClass",
    "ServiceAccount",
    "StorageObjectInUseProtection",
    "TaintNodesByCondition",
    "ValidatingAdmissionWebhook",
]
TCP_DEPLOYMENT = {
    "replicas": 2,
    "serviceAccountName": "default",
    "registrySettings": {
        "registry": "registry.k8s.io",
        "apiServerImage": "kube-apiserver",
        "controllerManagerImage": "kube-controller-manager",
        "schedulerImage": "kube-scheduler",
    },
    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "100%", "maxUnavailable": 0}},
}
TCP_NETWORK = {
    "port": 6443,
    "clusterDomain": "cluster.local",
    "serviceCidr": "10.96.0.0/16",
    "podCidr": "10.244.0.0/16",
}


def _fill(target: Any, defaults: Mapping[str, Any]) -> None:
    """Set each default the object lacks (a copy: defaults are shared)."""
    if isinstance(target, dict):
        for key, value in defaults.items():
            if key not in target:
                target[key] = copy.deepcopy(value)


def _default_tenant_control_plane(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    kubernetes = spec.get("kubernetes")
    if isinstance(kubernetes, dict):
        _fill(kubernetes, {"admissionControllers": TCP_ADMISSION_CONTROLLERS})
        _fill(kubernetes.get("kubelet"), {"preferredAddressTypes": ["InternalIP", "ExternalIP", "Hostname"]})
    control_plane = spec.get("controlPlane")
    if isinstance(control_plane, dict):
        _fill(control_plane.get("deployment"), TCP_DEPLOYMENT)
    _fill(spec.get("networkProfile"), TCP_NETWORK)
    konnectivity = (spec.get("addons") or {}).get("konnectivity")
    if isinstance(konnectivity, dict):
        _fill(konnectivity, {"server": KONNECTIVITY_SERVER, "agent": KONNECTIVITY_AGENT})
        _fill(konnectivity.get("server"), {"image": KONNECTIVITY_SERVER["image"]})
        _fill(
            konnectivity.get("agent"),
            {
                **KONNECTIVITY_AGENT,
                "hostNetwork": False,
                "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
            },
        )


_DEFAULTERS: dict[str, Callable[[dict[str, Any]], None]] = {
    "PersistentVolumeClaim": _default_persistent_volume_claim,
    "PersistentVolume": _default_persistent_volume,
    "StorageClass": _default_storage_class,
    "RuntimeClass": _default_runtime_class,
    "PriorityClass": _default_priority_class,
    "NetworkPolicy": _default_network_policy,
    "Deployment": _default_deployment,
    "ReplicaSet": _default_replica_set,
    "DaemonSet": _default_daemon_set,
    "StatefulSet": _default_stateful_set,
    "Job": _default_job,
    "CronJob": _default_cron_job,
    "Service": _default_service,
    "Namespace": _default_namespace,
    "Secret": _default_secret,
    "ResourceQuota": _default_resource_quota,
    "LimitRange": _default_limit_range,
    "Endpoints": _default_endpoints,
    "EndpointSlice": _default_endpoint_slice,
    "TenantControlPlane": _default_tenant_control_plane,
    "MutatingWebhookConfiguration": _default_webhooks(mutating=True),
    "ValidatingWebhookConfiguration": _default_webhooks(mutating=False),
}


# Kinds whose defaulting is split by the top-level fields it writes: an update that shares a field with
# the stored object (which was defaulted when it was stored) skips that field's defaulting. The other
# kinds' defaulters may write anywhere, so they run on private copies of every field.
_DEFAULTERS_BY_FIELD: dict[str, tuple[tuple[str, Callable[[dict[str, Any]], None]], ...]] = {
    "Pod": (("spec", _default_pod_spec_fields), ("status", default_pod_status)),
    "Node": (("status", _default_node),),
}


# Defaults a later release added, by the first minor release that has them.
_DEFAULTERS_SINCE: dict[str, tuple[tuple[int, Callable[[dict[str, Any]], None]], ...]] = {
    "Job": ((29, _default_job_from_1_29),),
}


def default(
    kind: str, obj: dict[str, Any], unchanged: frozenset[str] = frozenset(), minor: int = LATEST
) -> None:
    """Fill in, in place, the fields kube-apiserver defaults for `kind`; other kinds are left alone.

    `unchanged` names top-level fields that `obj` shares with the stored object it updates; they must
    not be changed in place. They are defaulted already, so their defaulting is skipped where a kind's
    defaulting is split by field; elsewhere they are copied first. `minor` is the tenant's release:
    some defaults came with a later one.
    """
    by_field = _DEFAULTERS_BY_FIELD.get(kind)
    if by_field is not None:
        for field, defaulter in by_field:
            if field not in unchanged:
                defaulter(obj)
        return
    defaulter = _DEFAULTERS.get(kind)
    if defaulter is None:
        return
    for field in unchanged:
        if field in obj:
            obj[field] = clone(obj[field])
    defaulter(obj)
    for first_minor, later in _DEFAULTERS_SINCE.get(kind, ()):
        if minor >= first_minor:
            later(obj)
