"""Kamaji's kinds as the controller reads them: names, defaults and the derived readiness of a TenantControlPlane."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tenantgpu.apiserver.serviceips import DEFAULT_SERVICE_CIDR
from tenantgpu.kamaji.kubeadmconfig import (
    DEFAULT_CLUSTER_DOMAIN,
    DEFAULT_POD_CIDR,
    KINE_ENDPOINT,
    KubeadmParameters,
    dns_service_ips,
)
from tenantgpu.kamaji.writepermissions import blocks_of
from tenantgpu.kubeclient import ResourceKind

Obj = dict[str, Any]

GROUP = "kamaji.clastix.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
FINALIZER = "finalizer.kamaji.clastix.io"
DEFAULT_DATASTORE = "default"
DEFAULT_DRIVER = "sqlite"
# Kamaji's default is 2 replicas of the control-plane Deployment; here every replica > 0 is one instance.
DEFAULT_REPLICAS = 2
# The in-cluster port Kamaji defaults to; every tenant shares one host here, so each gets its own port.
KAMAJI_DEFAULT_PORT = 6443
KAMAJI_KONNECTIVITY_PORT = 8132
DEFAULT_ADDRESS = "127.0.0.1"
NAME_LABEL = "kamaji.clastix.io/name"
COMPONENT_LABEL = "kamaji.clastix.io/component"
# Kamaji's certificate lifecycle: the label marks the Secrets whose certificates it renews (`x509`, or a
# kubeconfig's client certificate), the annotation with an empty value asks for a renewal now, and the
# renewal writes its time (RFC 3339) there (internal/utilities/certs_rotation.go).
LIFECYCLE_LABEL = "kamaji.clastix.io/certificate_lifecycle_controller"
LIFECYCLE_X509 = "x509"
LIFECYCLE_KUBECONFIG = "kubeconfig"
ROTATE_ANNOTATION = "certs.kamaji.clastix.io/rotate"

TENANT_CONTROL_PLANES = ResourceKind(GROUP, VERSION, "tenantcontrolplanes", "TenantControlPlane", True)
DATASTORES = ResourceKind(GROUP, VERSION, "datastores", "DataStore", False)
SECRETS = ResourceKind("", "v1", "secrets", "Secret", True)

# Secret name suffixes, as Kamaji's `utilities.AddTenantPrefix` names them.
CA_SECRET = "ca"
API_SERVER_CERT_SECRET = "api-server-certificate"
API_SERVER_KUBELET_CLIENT_SECRET = "api-server-kubelet-client-certificate"
SA_SECRET = "sa-certificate"
ADMIN_KUBECONFIG_SECRET = "admin-kubeconfig"
DATASTORE_CONFIG_SECRET = "datastore-config"
ADMIN_KUBECONFIG_KEY = "admin.conf"
SUPER_ADMIN_KUBECONFIG_KEY = "super-admin.conf"


class VersionStatus(StrEnum):
    """`status.kubernetesResources.version.status`: Kamaji's readiness enum (there is no conditions list)."""

    UNKNOWN = "Unknown"
    PROVISIONING = "Provisioning"
    CA_ROTATING = "CertificateAuthorityRotating"
    UPGRADING = "Upgrading"
    MIGRATING = "Migrating"
    READY = "Ready"
    NOT_READY = "NotReady"
    SLEEPING = "Sleeping"
    WRITE_LIMITED = "WriteLimited"


@dataclass(frozen=True)
class TenantRef:
    """Which TenantControlPlane: its namespace, name and UID (the UID tells a re-created one apart)."""

    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, tcp: Obj) -> TenantRef:
        meta = tcp.get("metadata") or {}
        return cls(meta.get("namespace") or "default", meta["name"], meta.get("uid") or "")

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def secret_name(self, suffix: str) -> str:
        return f"{self.name}-{suffix}"


def _get(obj: Obj, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)  # type: ignore[assignment]
    return obj


def replicas(tcp: Obj) -> int:
    value = _get(tcp, "spec", "controlPlane", "deployment", "replicas")
    return DEFAULT_REPLICAS if value is None else int(value)


def kubernetes_version(tcp: Obj) -> str:
    return str(_get(tcp, "spec", "kubernetes", "version") or "")


def datastore_name(tcp: Obj) -> str:
    return str(_get(tcp, "spec", "dataStore") or DEFAULT_DATASTORE)


def current_datastore_name(tcp: Obj) -> str:
    """The DataStore the tenant's data is in now (`status.storage.dataStoreName`); empty before the first."""
    return str(_get(tcp, "status", "storage", "dataStoreName") or "")


def datastore_endpoint(store: Obj) -> str:
    """A DataStore's first endpoint (`sqlite://<path>` for the lab's own driver)."""
    endpoints = (store.get("spec") or {}).get("endpoints") or [""]
    return str(endpoints[0])


def datastore_schema(tcp: Obj) -> str:
    """The tenant's key prefix in the shared store: `spec.dataStoreSchema`, else the UID as it is (Kamaji
    ≥ #1235's GetDefaultDatastoreSchema, which its controller falls back to: its webhook cannot set it,
    since a mutating webhook sees no UID on a create)."""
    explicit = _get(tcp, "spec", "dataStoreSchema")
    if explicit:
        return str(explicit)
    return str(_get(tcp, "metadata", "uid") or "")


def requested_port(tcp: Obj) -> int:
    """An explicit `spec.networkProfile.port` other than Kamaji's in-cluster default, else 0 (allocate one)."""
    port = _get(tcp, "spec", "networkProfile", "port")
    return 0 if port in (None, KAMAJI_DEFAULT_PORT) else int(port)


def advertised_address(tcp: Obj) -> str:
    return str(_get(tcp, "spec", "networkProfile", "address") or DEFAULT_ADDRESS)


def service_cidr(tcp: Obj) -> str:
    """`spec.networkProfile.serviceCidr`, Kamaji's default 10.96.0.0/16 when absent."""
    return str(_get(tcp, "spec", "networkProfile", "serviceCidr") or DEFAULT_SERVICE_CIDR)


def cert_sans(tcp: Obj) -> list[str]:
    return [str(s) for s in _get(tcp, "spec", "networkProfile", "certSANs") or []]


def kubeadm_parameters(tcp: Obj, datastore: Obj | None) -> KubeadmParameters:
    """What Kamaji's kubeadm configuration takes from the TCP and its DataStore (see `kubeadmconfig`). The
    plural CIDR fields win over the singular ones, as in Kamaji; an absent `networkProfile` counts as the
    CRD's defaults, and absent DNS IPs as those Kamaji's webhook derives."""
    network = _get(tcp, "spec", "networkProfile") or {}
    service_cidrs = tuple(network.get("serviceCidrs") or [network.get("serviceCidr") or DEFAULT_SERVICE_CIDR])
    pod_cidrs = tuple(network.get("podCidrs") or [network.get("podCidr") or DEFAULT_POD_CIDR])
    try:
        dns_ips = tuple(network.get("dnsServiceIPs") or dns_service_ips(service_cidrs))
    except ValueError:
        dns_ips = ()
    store = (datastore or {}).get("spec") or {}
    etcd = tuple(str(e) for e in store.get("endpoints") or []) if store.get("driver") == "etcd" else ()
    kubelet = _get(tcp, "spec", "kubernetes", "kubelet") or {}
    return KubeadmParameters(
        name=str(_get(tcp, "metadata", "name")),
        namespace=str(_get(tcp, "metadata", "namespace") or "default"),
        version=kubernetes_version(tcp),
        address=advertised_address(tcp),
        service_cidrs=service_cidrs,
        pod_cidrs=pod_cidrs,
        cluster_domain=str(network.get("clusterDomain") or DEFAULT_CLUSTER_DOMAIN),
        dns_service_ips=dns_ips,
        cert_sans=tuple(cert_sans(tcp)),
        etcd_endpoints=etcd or (KINE_ENDPOINT,),
        cgroup_driver=str(kubelet.get("cgroupfs") or ""),
        kubelet_patches=tuple(kubelet.get("configurationJSONPatches") or ()),
        coredns=_addon_image(tcp, "coreDNS"),
        kube_proxy=_addon_image(tcp, "kubeProxy"),
        write_permissions=blocks_of(tcp),
    )


def addon_enabled(tcp: Obj, addon: str) -> bool:
    """`spec.addons.coreDNS` or `spec.addons.kubeProxy` is present (Kamaji: presence enables)."""
    return _addon_image(tcp, addon) is not None


def _addon_image(tcp: Obj, addon: str) -> tuple[str, str] | None:
    """`spec.addons.<addon>` as (imageRepository, imageTag): presence enables the add-on, as in Kamaji."""
    spec = _get(tcp, "spec", "addons", addon)
    if not isinstance(spec, dict):
        return None
    return (str(spec.get("imageRepository") or ""), str(spec.get("imageTag") or ""))


def previous_port(tcp: Obj) -> int:
    """The port the tenant last served on (from its endpoint), so a restarted lab keeps its kubeconfigs valid."""
    endpoint = str(_get(tcp, "status", "controlPlaneEndpoint") or "")
    host, _, port = endpoint.rpartition(":")
    return int(port) if host and port.isdigit() else 0


def konnectivity_enabled(tcp: Obj) -> bool:
    """The add-on is on when `spec.addons.konnectivity` is present (Kamaji: presence enables)."""
    addons = _get(tcp, "spec", "addons") or {}
    return isinstance(addons, dict) and addons.get("konnectivity") is not None


def previous_konnectivity_port(tcp: Obj) -> int:
    return int(_get(tcp, "status", "addons", "konnectivity", "service", "port") or 0)


def konnectivity_port(tcp: Obj) -> int:
    """Kamaji's default agent port 8132 would collide between tenants on one host: keep the last port, or any."""
    port = _get(tcp, "spec", "addons", "konnectivity", "server", "port")
    if port not in (None, KAMAJI_KONNECTIVITY_PORT):
        return int(port)
    return previous_konnectivity_port(tcp)


def is_deleting(tcp: Obj) -> bool:
    return bool(_get(tcp, "metadata", "deletionTimestamp"))


def version_status(tcp: Obj) -> str:
    return str(_get(tcp, "status", "kubernetesResources", "version", "status") or "")


def serving(tcp: Obj) -> bool:
    """The tenant's API server answers: `Ready`, or `WriteLimited` (it answers, and refuses the writes
    its TCP blocks)."""
    return version_status(tcp) in (VersionStatus.READY, VersionStatus.WRITE_LIMITED)


def endpoint(tcp: Obj) -> str:
    return str(_get(tcp, "status", "controlPlaneEndpoint") or "")


def derive_version_status(
    *, replicas: int, running: bool, ready: bool, failed: bool, write_limited: bool = False
) -> VersionStatus:
    """Readiness in the order Kamaji derives it from the control-plane Deployment: a TCP whose writes are
    limited is `WriteLimited` whenever it is neither asleep nor failed."""
    if replicas == 0:
        return VersionStatus.SLEEPING if not running else VersionStatus.PROVISIONING
    if failed:
        return VersionStatus.NOT_READY
    if write_limited:
        return VersionStatus.WRITE_LIMITED
    if running and ready:
        return VersionStatus.READY
    return VersionStatus.PROVISIONING


def checksum(data: dict[str, str]) -> str:
    """A stable digest of a Secret's data, recorded in status like Kamaji's `checksum` fields."""
    return hashlib.md5(json.dumps(data, sort_keys=True).encode(), usedforsecurity=False).hexdigest()


def tenant_control_plane(
    name: str,
    namespace: str = "default",
    *,
    version: str,
    replicas: int = 1,
    datastore: str = DEFAULT_DATASTORE,
    labels: dict[str, str] | None = None,
) -> Obj:
    """A TenantControlPlane manifest as a user would write it (the lab creates one per tenant this way)."""
    meta: Obj = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    return {
        "apiVersion": API_VERSION,
        "kind": "TenantControlPlane",
        "metadata": meta,
        "spec": {
            "dataStore": datastore,
            "controlPlane": {
                "deployment": {"replicas": replicas},
                "service": {"serviceType": "ClusterIP"},
            },
            # `kubelet` is required by Kamaji's CRD; the lab's kubelets take its defaults.
            "kubernetes": {"version": version, "kubelet": {}},
            "addons": {"konnectivity": {"server": {"port": 8132}}},
        },
    }


def datastore(name: str = DEFAULT_DATASTORE, driver: str = DEFAULT_DRIVER, endpoint: str = "") -> Obj:
    """A DataStore: the shared store every TenantControlPlane that names it keeps its objects in."""
    return {
        "apiVersion": API_VERSION,
        "kind": "DataStore",
        "metadata": {"name": name},
        "spec": {"driver": driver, "endpoints": [endpoint or "sqlite://datastore.sqlite"]},
    }
