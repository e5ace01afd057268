"""The kubeadm and kubelet configurations Kamaji uploads into each tenant (`kubeadm-config`, `kubelet-config`).

Kamaji builds a kubeadm `InitConfiguration` per TenantControlPlane (internal/kubeadm/configuration.go) and its
soot manager uploads two documents into the tenant's `kube-system` (internal/kubeadm/uploadconfig.go), which
`kubeadm join` reads with its bootstrap token. Facts read from Kamaji (clastix/kamaji, built on the kubeadm
and kubelet packages of Kubernetes 1.36) and those packages:

- `ClusterConfiguration` (kubeadm.k8s.io/v1beta4): kubeadm's static defaults (`certificatesDir`
  /etc/kubernetes/pki, `imageRepository` registry.k8s.io, `encryptionAlgorithm` RSA-2048, certificate
  validity 8760h and CA validity 87600h), then Kamaji's own values: the TCP's name as `clusterName`, its
  version, its advertised endpoint, `certSANs` (127.0.0.1, localhost, the name, its two Service names, the
  address, then `spec.networkProfile.certSANs`), the API server's `etcd-compaction-interval=0s` and
  `etcd-prefix=/<name>`, networking from `networkProfile` (CIDRs joined by commas), and an external etcd:
  the DataStore's endpoints for the etcd driver, `127.0.0.1:2379` (kine) for every other driver, with empty
  file names unless the endpoint is `https`.
- `KubeletConfiguration` (kubelet.config.k8s.io/v1beta1): the kubelet's own defaults of 1.36 (with the
  KubeletCrashLoopBackOffMax and KubeletEnsureSecretPulledImages gates on, as in 1.36), then the CA file,
  `spec.kubernetes.kubelet.cgroupfs` as `cgroupDriver` (set over the default, so an unset field leaves no
  driver at all), `clusterDNS` from `networkProfile.dnsServiceIPs`, `clusterDomain`, `rotateCertificates`,
  the static pod path and no `resolvConf`; then `configurationJSONPatches` (RFC 6902) on its JSON, and the
  result read back into the Go type, so keys the type does not know are dropped.
- Both are written as the Go serializers write them: JSON field names, keys sorted, `omitempty` fields
  left out, and struct-valued fields such as `imageMaximumGCAge: 0s` or `memorySwap: {}` kept.

The lab's TenantControlPlanes may leave `networkProfile` out; the lab then uses the values its CRD would
default (service CIDR 10.96.0.0/16, pod CIDR 10.244.0.0/16, `cluster.local`) and its webhook would derive
(the DNS IP .10 of the service CIDR), as it does for the tenant's Services.
"""

from __future__ import annotations

import ipaddress
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from tenantgpu.apiserver.patch import PatchError, apply_json_patch

Obj = dict[str, Any]

KUBEADM_API_VERSION = "kubeadm.k8s.io/v1beta4"
KUBELET_API_VERSION = "kubelet.config.k8s.io/v1beta1"
KINE_ENDPOINT = "127.0.0.1:2379"
DEFAULT_POD_CIDR = "10.244.0.0/16"
DEFAULT_CLUSTER_DOMAIN = "cluster.local"
# kubeadm's paths for an external etcd reached over TLS (Kamaji's internal/kubeadm/configuration.go)
ETCD_TLS_FILES = (
    "/etc/kubernetes/pki/etcd/ca.crt",
    "/etc/kubernetes/pki/apiserver-etcd-client.crt",
    "/etc/kubernetes/pki/apiserver-etcd-client.key",
)


@dataclass(frozen=True)
class KubeadmParameters:
    """What Kamaji takes from a TenantControlPlane for its kubeadm configuration (its `kubeadm.Parameters`).
    The endpoint's port is known only once the API server listens, so it is not here."""

    name: str
    namespace: str
    version: str
    address: str
    service_cidrs: tuple[str, ...] = ("10.96.0.0/16",)
    pod_cidrs: tuple[str, ...] = (DEFAULT_POD_CIDR,)
    cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
    dns_service_ips: tuple[str, ...] = ()
    cert_sans: tuple[str, ...] = ()
    etcd_endpoints: tuple[str, ...] = (KINE_ENDPOINT,)
    cgroup_driver: str = ""  # `spec.kubernetes.kubelet.cgroupfs`
    kubelet_patches: tuple[Obj, ...] = field(default=())  # `spec.kubernetes.kubelet.configurationJSONPatches`
    # `spec.addons.coreDNS` and `spec.addons.kubeProxy` as (imageRepository, imageTag); None when absent
    coredns: tuple[str, str] | None = None
    kube_proxy: tuple[str, str] | None = None
    # `spec.writePermissions` as (blockCreation, blockUpdate, blockDeletion)
    write_permissions: tuple[bool, bool, bool] = (False, False, False)

    def to_json(self) -> Obj:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Obj) -> KubeadmParameters:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def dns_service_ips(cidrs: list[str] | tuple[str, ...]) -> list[str]:
    """Kamaji's DNS Service IP of each service CIDR: its network address plus 10 (IPv4) or 16 (IPv6)."""
    found = []
    for cidr in cidrs:
        network = ipaddress.ip_network(cidr, strict=False)
        found.append(str(network.network_address + (10 if network.version == 4 else 16)))
    return found


def cluster_configuration(params: KubeadmParameters, endpoint: str) -> Obj:
    """The `ClusterConfiguration` Kamaji uploads, as kubeadm's v1beta4 serializer writes it."""
    tls = params.etcd_endpoints and params.etcd_endpoints[0].startswith("https")
    ca_file, cert_file, key_file = ETCD_TLS_FILES if tls else ("", "", "")
    networking: Obj = {"dnsDomain": params.cluster_domain, "podSubnet": ",".join(params.pod_cidrs)}
    networking["serviceSubnet"] = ",".join(params.service_cidrs)
    return {
        "apiServer": {
            "certSANs": [
                "127.0.0.1",
                "localhost",
                params.name,
                f"{params.name}.{params.namespace}.svc",
                f"{params.name}.{params.namespace}.svc.cluster.local",
                params.address,
                *params.cert_sans,
            ],
            "extraArgs": [
                {"name": "etcd-compaction-interval", "value": "0s"},
                {"name": "etcd-prefix", "value": f"/{params.name}"},
            ],
        },
        "apiVersion": KUBEADM_API_VERSION,
        "caCertificateValidityPeriod": "87600h0m0s",
        "certificateValidityPeriod": "8760h0m0s",
        "certificatesDir": "/etc/kubernetes/pki",
        "clusterName": params.name,
        "controlPlaneEndpoint": endpoint,
        "controllerManager": {},
        "dns": {},
        "encryptionAlgorithm": "RSA-2048",
        "etcd": {
            "external": {
                "caFile": ca_file,
                "certFile": cert_file,
                "endpoints": list(params.etcd_endpoints),
                "keyFile": key_file,
            }
        },
        "imageRepository": "registry.k8s.io",
        "kind": "ClusterConfiguration",
        "kubernetesVersion": params.version,
        "networking": {k: v for k, v in networking.items() if v},
        "proxy": {},
        "scheduler": {},
    }


def _kubelet_defaults() -> Obj:
    """The kubelet's v1beta1 defaults (SetDefaults_KubeletConfiguration, Kubernetes 1.36) as JSON."""
    return {
        "address": "0.0.0.0",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"cacheTTL": "2m0s", "enabled": True},
            "x509": {},
        },
        "authorization": {
            "mode": "Webhook",
            "webhook": {"cacheAuthorizedTTL": "5m0s", "cacheUnauthorizedTTL": "30s"},
        },
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": True,
        "configMapAndSecretChangeDetectionStrategy": "Watch",
        "containerLogMaxFiles": 5,
        "containerLogMaxSize": "10Mi",
        "containerLogMaxWorkers": 1,
        "containerLogMonitorInterval": "10s",
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "contentType": "application/vnd.kubernetes.protobuf",
        "cpuCFSQuota": True,
        "cpuCFSQuotaPeriod": "100ms",
        "cpuManagerPolicy": "none",
        "cpuManagerReconcilePeriod": "10s",
        "crashLoopBackOff": {"maxContainerRestartPeriod": "5m0s"},
        "enableControllerAttachDetach": True,
        "enableDebugFlagsHandler": True,
        "enableDebuggingHandlers": True,
        "enableProfilingHandler": True,
        "enableServer": True,
        "enableSystemLogHandler": True,
        "enforceNodeAllocatable": ["pods"],
        "eventBurst": 100,
        "eventRecordQPS": 50,
        "evictionPressureTransitionPeriod": "5m0s",
        "failCgroupV1": True,
        "failSwapOn": True,
        "fileCheckFrequency": "20s",
        "hairpinMode": "promiscuous-bridge",
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "httpCheckFrequency": "20s",
        "imageGCHighThresholdPercent": 85,
        "imageGCLowThresholdPercent": 80,
        "imageMaximumGCAge": "0s",
        "imageMinimumGCAge": "2m0s",
        "imagePullCredentialsVerificationPolicy": "NeverVerifyPreloadedImages",
        "iptablesDropBit": 15,
        "iptablesMasqueradeBit": 14,
        "kubeAPIBurst": 100,
        "kubeAPIQPS": 50,
        "localStorageCapacityIsolation": True,
        "logging": {
            "flushFrequency": "5s",
            "format": "text",
            "options": {"json": {"infoBufferSize": "0"}, "text": {"infoBufferSize": "0"}},
            "verbosity": 0,
        },
        "makeIPTablesUtilChains": True,
        "maxOpenFiles": 1000000,
        "maxPods": 110,
        "memoryManagerPolicy": "None",
        "memoryReservationPolicy": "None",
        "memorySwap": {},
        "memoryThrottlingFactor": 0.9,
        "mergeDefaultEvictionSettings": False,
        "nodeLeaseDurationSeconds": 40,
        "nodeStatusMaxImages": 50,
        "nodeStatusReportFrequency": "5m0s",
        "nodeStatusUpdateFrequency": "10s",
        "oomScoreAdj": -999,
        "podLogsDir": "/var/log/pods",
        "podPidsLimit": -1,
        "port": 10250,
        "registerNode": True,
        "registryBurst": 10,
        "registryPullQPS": 5,
        "resolvConf": "/etc/resolv.conf",
        "runtimeRequestTimeout": "2m0s",
        "seccompDefault": False,
        "serializeImagePulls": True,
        "shutdownGracePeriod": "0s",
        "shutdownGracePeriodCriticalPods": "0s",
        "streamingConnectionIdleTimeout": "4h0m0s",
        "syncFrequency": "1m0s",
        "topologyManagerPolicy": "none",
        "topologyManagerScope": "container",
        "volumePluginDir": "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/",
        "volumeStatsAggPeriod": "1m0s",
    }


# The top-level JSON names of the Go type (kubelet 1.36): what survives the patched JSON's decoding.
KUBELET_FIELDS = frozenset(
    """apiVersion kind enableServer staticPodPath podLogsDir syncFrequency fileCheckFrequency
    httpCheckFrequency staticPodURL staticPodURLHeader address port readOnlyPort tlsCertFile
    tlsPrivateKeyFile tlsCipherSuites tlsCurvePreferences tlsMinVersion rotateCertificates
    serverTLSBootstrap authentication authorization registryPullQPS registryBurst
    imagePullCredentialsVerificationPolicy preloadedImagesVerificationAllowlist eventRecordQPS
    eventBurst enableDebuggingHandlers enableContentionProfiling healthzPort healthzBindAddress
    oomScoreAdj clusterDomain clusterDNS streamingConnectionIdleTimeout nodeStatusUpdateFrequency
    nodeStatusReportFrequency nodeLeaseDurationSeconds imageMinimumGCAge imageMaximumGCAge
    imageGCHighThresholdPercent imageGCLowThresholdPercent volumeStatsAggPeriod kubeletCgroups
    systemCgroups cgroupRoot cgroupsPerQOS cgroupDriver cpuManagerPolicy singleProcessOOMKill
    cpuManagerPolicyOptions cpuManagerReconcilePeriod memoryManagerPolicy topologyManagerPolicy
    topologyManagerScope topologyManagerPolicyOptions qosReserved runtimeRequestTimeout hairpinMode
    maxPods podCIDR podPidsLimit resolvConf runOnce cpuCFSQuota cpuCFSQuotaPeriod nodeStatusMaxImages
    maxOpenFiles contentType kubeAPIQPS kubeAPIBurst serializeImagePulls maxParallelImagePulls
    evictionHard evictionSoft evictionSoftGracePeriod evictionPressureTransitionPeriod
    evictionMaxPodGracePeriod evictionMinimumReclaim mergeDefaultEvictionSettings podsPerCore
    enableControllerAttachDetach protectKernelDefaults makeIPTablesUtilChains iptablesMasqueradeBit
    iptablesDropBit featureGates failSwapOn memorySwap containerLogMaxSize containerLogMaxFiles
    containerLogMaxWorkers containerLogMonitorInterval configMapAndSecretChangeDetectionStrategy
    systemReserved kubeReserved reservedSystemCPUs showHiddenMetricsForVersion systemReservedCgroup
    kubeReservedCgroup enforceNodeAllocatable allowedUnsafeSysctls volumePluginDir providerID
    kernelMemcgNotification logging enableSystemLogHandler enableSystemLogQuery shutdownGracePeriod
    shutdownGracePeriodCriticalPods shutdownGracePeriodByPodPriority crashLoopBackOff reservedMemory
    enableProfilingHandler enableDebugFlagsHandler seccompDefault memoryThrottlingFactor
    memoryReservationPolicy registerWithTaints registerNode tracing localStorageCapacityIsolation
    containerRuntimeEndpoint imageServiceEndpoint failCgroupV1 userNamespaces""".split()  # noqa: SIM905
)
# The pointer fields among them (`*bool`, `*int32`, …): an explicit false or zero is written.
KUBELET_POINTERS = frozenset(
    """enableServer registryPullQPS eventRecordQPS enableDebuggingHandlers healthzPort oomScoreAdj
    imageGCHighThresholdPercent imageGCLowThresholdPercent cgroupsPerQOS singleProcessOOMKill
    podPidsLimit resolvConf cpuCFSQuota cpuCFSQuotaPeriod nodeStatusMaxImages kubeAPIQPS
    serializeImagePulls maxParallelImagePulls mergeDefaultEvictionSettings enableControllerAttachDetach
    makeIPTablesUtilChains iptablesMasqueradeBit iptablesDropBit failSwapOn containerLogMaxFiles
    containerLogMaxWorkers containerLogMonitorInterval enableSystemLogHandler enableSystemLogQuery
    enableProfilingHandler enableDebugFlagsHandler seccompDefault memoryThrottlingFactor registerNode
    tracing localStorageCapacityIsolation failCgroupV1 userNamespaces""".split()  # noqa: SIM905
)
# Values the Go type always writes (structs, and one string without omitempty), at their zero values.
KUBELET_ALWAYS: Obj = {
    "authentication": {"anonymous": {}, "webhook": {"cacheTTL": "0s"}, "x509": {}},
    "authorization": {"webhook": {"cacheAuthorizedTTL": "0s", "cacheUnauthorizedTTL": "0s"}},
    "containerRuntimeEndpoint": "",
    "crashLoopBackOff": {},
    "memorySwap": {},
    "logging": {"flushFrequency": 0, "options": {"json": {}, "text": {}}, "verbosity": 0},
    **dict.fromkeys(
        """syncFrequency fileCheckFrequency httpCheckFrequency streamingConnectionIdleTimeout
        nodeStatusUpdateFrequency nodeStatusReportFrequency imageMinimumGCAge imageMaximumGCAge
        volumeStatsAggPeriod cpuManagerReconcilePeriod runtimeRequestTimeout evictionPressureTransitionPeriod
        shutdownGracePeriod shutdownGracePeriodCriticalPods""".split(),  # noqa: SIM905
        "0s",
    ),
}
_EMPTY: tuple[Any, ...] = ("", [], {}, None)


class KubeletConfigurationError(ValueError):
    """`configurationJSONPatches` do not apply to the kubelet configuration."""


def kubelet_configuration(params: KubeadmParameters) -> Obj:
    """The `KubeletConfiguration` Kamaji uploads, after the TCP's JSON patches."""
    config: Obj = {"apiVersion": KUBELET_API_VERSION, "kind": "KubeletConfiguration", **_kubelet_defaults()}
    config["authentication"]["x509"] = {"clientCAFile": "/etc/kubernetes/pki/ca.crt"}
    config["cgroupDriver"] = params.cgroup_driver
    config["clusterDNS"] = list(params.dns_service_ips)
    config["clusterDomain"] = params.cluster_domain
    config["rotateCertificates"] = True
    config["staticPodPath"] = "/etc/kubernetes/manifests"
    del config["resolvConf"]  # clastix/kamaji#581: the kubelet finds its resolv.conf itself
    config = {k: v for k, v in config.items() if v not in ("", [], None)}
    if params.kubelet_patches:
        try:
            patched = apply_json_patch(config, list(params.kubelet_patches))
        except PatchError as err:
            raise KubeletConfigurationError(
                f"unable to apply JSON patching to KubeletConfiguration: {err}"
            ) from None
        if not isinstance(patched, dict):
            raise KubeletConfigurationError("unable to decode JSON to KubeletConfiguration: not an object")
        config = _as_go_type(patched)
    return config


def _as_go_type(config: Obj) -> Obj:
    """The patched JSON read back into the Go type and written again: unknown keys go, and so do the zero
    values of `omitempty` fields that are not pointers; what the type always writes comes back."""
    kept: Obj = {}
    for name, value in config.items():
        if name not in KUBELET_FIELDS or value is None:
            continue
        if (
            name in KUBELET_POINTERS
            or name in KUBELET_ALWAYS
            or not (value in _EMPTY or value is False or value == 0)
        ):
            kept[name] = value
    for name, zero in KUBELET_ALWAYS.items():
        kept[name] = (
            _merged(zero, kept[name]) if isinstance(zero, dict) and name in kept else kept.get(name, zero)
        )
    return kept


def _merged(base: Obj, over: Obj) -> Obj:
    out = dict(base)
    for key, value in over.items():
        out[key] = (
            _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        )
    return out


class _GoYamlDumper(yaml.SafeDumper):
    """YAML as sigs.k8s.io/yaml writes it: a string that must be quoted gets double quotes."""

    def choose_scalar_style(self) -> str:
        style = super().choose_scalar_style()
        return '"' if style == "'" else style


def go_yaml(obj: Obj) -> str:
    """`obj` as Kubernetes' YAML serializer writes it: keys sorted, block style, no line folding."""
    return yaml.dump(obj, Dumper=_GoYamlDumper, default_flow_style=False, sort_keys=True, width=float("inf"))
