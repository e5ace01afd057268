"""The reconciled units of a tenant control plane: each owns one thing a tenant needs and reports its status.

Every unit has the same shape (Kamaji's `internal/resources` Resource): `ensure` brings what it owns to the
wanted state and writes its fragment of the derived status; `clean_up` removes it when the TCP goes away.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from tenantgpu.apiserver.validation import is_ip
from tenantgpu.kamaji import model, pki
from tenantgpu.kamaji.host import (
    CLEANUP_PRIOR_MIGRATION,
    ControlPlaneHost,
    ControlPlaneInstance,
    MigrationError,
    RunningInstance,
    schema_taken,
)
from tenantgpu.kamaji.konnectivityagent import AGENT_NAME, AGENT_NAMESPACE, CLUSTER_ROLE_BINDING, agent_spec
from tenantgpu.kamaji.kubeadmaddons import COREDNS_ADDON, KUBE_PROXY_ADDON
from tenantgpu.kamaji.kubeconfig import admin_kubeconfig, current_cluster, dump_kubeconfig
from tenantgpu.kamaji.model import Obj, TenantRef
from tenantgpu.kubeclient import ApiError, KubeClient
from tenantgpu.kubeclient.client import now_rfc3339

_LAST_UPDATE = "kamaji.clastix.io/last-update"


log = logging.getLogger(__name__)


@dataclass
class Reconciliation:
    """One pass over one TenantControlPlane: its object, the clients, and what units hand to each other."""

    tcp: Obj
    client: KubeClient
    host: ControlPlaneHost
    status: Obj = field(default_factory=dict)
    ca: pki.KeyPair | None = None
    serving: pki.KeyPair | None = None
    kubelet_client: pki.KeyPair | None = None
    service_account: pki.KeyPair | None = None
    running: RunningInstance | None = None
    datastore: Obj | None = None
    failure: str | None = None

    @property
    def ref(self) -> TenantRef:
        return TenantRef.of(self.tcp)

    def set_status(self, path: str, value: Any) -> None:
        node = self.status
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value


class Unit(Protocol):
    """One reconciled resource of a tenant control plane."""

    name: str

    async def ensure(self, r: Reconciliation) -> None: ...

    async def clean_up(self, r: Reconciliation) -> None: ...


# --- Secrets ------------------------------------------------------------------------------------


async def read_secret(client: KubeClient, namespace: str, name: str) -> Obj | None:
    return await client.get_if_found(model.SECRETS, name, namespace)


def secret_bytes(secret: Obj, key: str) -> bytes | None:
    value = (secret.get("data") or {}).get(key)
    return pki.unb64(value) if value else None


def _secret_labels(r: Reconciliation, suffix: str, lifecycle: str | None) -> dict[str, str]:
    labels = {model.NAME_LABEL: r.ref.name, model.COMPONENT_LABEL: suffix}
    if lifecycle is not None:
        labels[model.LIFECYCLE_LABEL] = lifecycle
    return labels


def rotation_requested(secret: Obj) -> bool:
    """Kamaji's `certs.kamaji.clastix.io/rotate` set to the empty string: renew the certificate now."""
    return (secret.get("metadata", {}).get("annotations") or {}).get(model.ROTATE_ANNOTATION) == ""


def _secret_body(
    r: Reconciliation,
    suffix: str,
    data: dict[str, bytes],
    lifecycle: str | None = None,
    rotated: bool = False,
) -> Obj:
    ref = r.ref
    now = now_rfc3339()
    annotations = {_LAST_UPDATE: now}
    if rotated:
        annotations[model.ROTATE_ANNOTATION] = now
    metadata: Obj = {
        "name": ref.secret_name(suffix),
        "namespace": ref.namespace,
        "labels": _secret_labels(r, suffix, lifecycle),
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": model.API_VERSION,
                "kind": "TenantControlPlane",
                "name": ref.name,
                "uid": ref.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    encoded = {k: pki.b64(v) for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": "Opaque", "data": encoded}


class SecretUnit:
    """A unit that owns one Secret `<tcp>-<suffix>`: it keeps the Secret valid and records it in status."""

    name: ClassVar[str]
    suffix: ClassVar[str]
    status_path: ClassVar[str]
    reports_last_update: ClassVar[bool] = True  # the status entry has `lastUpdate` in Kamaji's types
    # Kamaji's certificate lifecycle label (`x509`, `kubeconfig`): such a Secret is renewed on request
    lifecycle: ClassVar[str | None] = None

    def wanted(self, r: Reconciliation) -> bool:
        return True

    def valid(self, r: Reconciliation, secret: Obj) -> bool:
        raise NotImplementedError

    def build(self, r: Reconciliation) -> dict[str, bytes]:
        raise NotImplementedError

    def load(self, r: Reconciliation, secret: Obj) -> None:
        """Hand what the Secret holds to the units after this one."""

    async def ensure(self, r: Reconciliation) -> None:
        if not self.wanted(r):
            return
        name = r.ref.secret_name(self.suffix)
        secret = None
        if _status_at(r.tcp, self.status_path) is None:
            # Never reported: most likely a new tenant, so create at once and skip a read.
            try:
                secret = await r.client.create(model.SECRETS, self._body(r, self.build(r)), r.ref.namespace)
            except ApiError as err:
                if err.code != 409:
                    raise
        if secret is None:
            secret = await read_secret(r.client, r.ref.namespace, name)
            if secret is None:
                secret = await r.client.create(model.SECRETS, self._body(r, self.build(r)), r.ref.namespace)
            else:
                rotate = self.lifecycle is not None and rotation_requested(secret)
                if rotate or not self.valid(r, secret):
                    body = self._body(r, self.build(r), rotated=rotate)
                    body["metadata"]["resourceVersion"] = secret["metadata"].get("resourceVersion")
                    secret = await r.client.update(model.SECRETS, body)
                else:
                    secret = await self._label(r, secret)
        self.load(r, secret)
        reported = {
            "secretName": secret["metadata"]["name"],
            "checksum": model.checksum(secret.get("data") or {}),
        }
        if self.reports_last_update:
            reported["lastUpdate"] = (secret["metadata"].get("annotations") or {}).get(
                _LAST_UPDATE
            ) or secret["metadata"].get("creationTimestamp")
        r.set_status(self.status_path, reported)

    def _body(self, r: Reconciliation, data: dict[str, bytes], rotated: bool = False) -> Obj:
        return _secret_body(r, self.suffix, data, self.lifecycle, rotated)

    async def _label(self, r: Reconciliation, secret: Obj) -> Obj:
        """Kamaji merges its labels into a Secret it keeps (one written before a label was added, say)."""
        labels = secret["metadata"].get("labels") or {}
        wanted = _secret_labels(r, self.suffix, self.lifecycle)
        if all(labels.get(k) == v for k, v in wanted.items()):
            return secret
        patch = {"metadata": {"labels": wanted}}
        return await r.client.patch(model.SECRETS, secret["metadata"]["name"], patch, r.ref.namespace)

    async def clean_up(self, r: Reconciliation) -> None:
        try:
            await r.client.delete(model.SECRETS, r.ref.secret_name(self.suffix), r.ref.namespace)
        except ApiError as err:
            if err.code != 404:
                raise


def _status_at(tcp: Obj, path: str) -> Any:
    node: Any = tcp.get("status") or {}
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _pair(secret: Obj, cert_key: str, key_key: str) -> pki.KeyPair | None:
    cert, key = secret_bytes(secret, cert_key), secret_bytes(secret, key_key)
    return pki.KeyPair(cert, key) if cert and key else None


class CertificateAuthorityUnit(SecretUnit):
    """The tenant's own CA (`<tcp>-ca`): created once and kept, so credentials survive restarts."""

    name = "ca"
    suffix = model.CA_SECRET
    status_path = "certificates.ca"

    def valid(self, r: Reconciliation, secret: Obj) -> bool:
        return _pair(secret, pki.CA_CERT_KEY, pki.CA_KEY_KEY) is not None

    def build(self, r: Reconciliation) -> dict[str, bytes]:
        ca = pki.generate_ca(f"{r.ref.name}-ca")
        return {pki.CA_CERT_KEY: ca.cert_pem, pki.CA_KEY_KEY: ca.key_pem}

    def load(self, r: Reconciliation, secret: Obj) -> None:
        r.ca = _pair(secret, pki.CA_CERT_KEY, pki.CA_KEY_KEY)


def _serving_names(r: Reconciliation) -> tuple[list[str], list[str]]:
    ref = r.ref
    dns = [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        ref.name,
        f"{ref.name}.{ref.namespace}.svc",
        f"{ref.name}.{ref.namespace}.svc.cluster.local",
    ]
    ips = ["127.0.0.1"]
    address = model.advertised_address(r.tcp)
    for extra in [address, *model.cert_sans(r.tcp)]:
        target = ips if is_ip(extra) else dns
        if extra not in target:
            target.append(extra)
    return ips, dns


class TenantCertificateUnit(SecretUnit):
    """A Secret holding one certificate the tenant CA signed, and its key (kubeadm's file names as keys):
    re-issued when missing or signed by another CA, then handed on as `r.<loads_into>`."""

    cert_key: ClassVar[str]
    key_key: ClassVar[str]
    loads_into: ClassVar[str]  # the Reconciliation's attribute
    lifecycle = model.LIFECYCLE_X509

    def issue(self, r: Reconciliation, ca: pki.KeyPair) -> pki.KeyPair:
        raise NotImplementedError

    def valid(self, r: Reconciliation, secret: Obj) -> bool:
        pair = _pair(secret, self.cert_key, self.key_key)
        return pair is not None and r.ca is not None and pki.is_signed_by(pair.cert_pem, r.ca)

    def build(self, r: Reconciliation) -> dict[str, bytes]:
        assert r.ca is not None
        pair = self.issue(r, r.ca)
        return {self.cert_key: pair.cert_pem, self.key_key: pair.key_pem}

    def load(self, r: Reconciliation, secret: Obj) -> None:
        setattr(r, self.loads_into, _pair(secret, self.cert_key, self.key_key))


class APIServerCertificateUnit(TenantCertificateUnit):
    """The API server's serving certificate (`<tcp>-api-server-certificate`), signed by the tenant CA."""

    name = "api-server-certificate"
    suffix = model.API_SERVER_CERT_SECRET
    status_path = "certificates.apiServer"
    cert_key, key_key, loads_into = pki.APISERVER_CERT_KEY, pki.APISERVER_KEY_KEY, "serving"

    def issue(self, r: Reconciliation, ca: pki.KeyPair) -> pki.KeyPair:
        ips, dns = _serving_names(r)
        return pki.issue_serving_certificate(ca, "kube-apiserver", ips=ips, dns_names=dns)


class APIServerKubeletClientCertificateUnit(TenantCertificateUnit):
    """`<tcp>-api-server-kubelet-client-certificate`: what the tenant API server presents to its kubelets
    (for `kubectl logs` and `exec`), kubeadm's `kube-apiserver-kubelet-client` of `kubeadm:cluster-admins`,
    signed by the tenant CA."""

    name = "api-server-kubelet-client-certificate"
    suffix = model.API_SERVER_KUBELET_CLIENT_SECRET
    status_path = "certificates.apiServerKubeletClient"
    cert_key, key_key = pki.APISERVER_KUBELET_CLIENT_CERT_KEY, pki.APISERVER_KUBELET_CLIENT_KEY_KEY
    loads_into = "kubelet_client"

    def issue(self, r: Reconciliation, ca: pki.KeyPair) -> pki.KeyPair:
        return pki.issue_client_certificate(ca, pki.KUBELET_CLIENT_USER, (pki.KUBELET_CLIENT_GROUP,))


class ServiceAccountKeyUnit(SecretUnit):
    """The service-account token signing key pair (`<tcp>-sa-certificate`)."""

    name = "sa-certificate"
    suffix = model.SA_SECRET
    status_path = "certificates.sa"

    def valid(self, r: Reconciliation, secret: Obj) -> bool:
        return _pair(secret, pki.SA_PUBLIC_KEY, pki.SA_PRIVATE_KEY) is not None

    def build(self, r: Reconciliation) -> dict[str, bytes]:
        pair = pki.generate_signing_key()
        return {pki.SA_PUBLIC_KEY: pair.cert_pem, pki.SA_PRIVATE_KEY: pair.key_pem}

    def load(self, r: Reconciliation, secret: Obj) -> None:
        r.service_account = _pair(secret, pki.SA_PUBLIC_KEY, pki.SA_PRIVATE_KEY)


class AdminKubeconfigUnit(SecretUnit):
    """`<tcp>-admin-kubeconfig` (keys `admin.conf`, `super-admin.conf`) for the tenant's public endpoint."""

    name = "admin-kubeconfig"
    suffix = model.ADMIN_KUBECONFIG_SECRET
    status_path = "kubeconfig.admin"
    lifecycle = model.LIFECYCLE_KUBECONFIG

    def _server(self, r: Reconciliation) -> str:
        return f"https://{r.status.get('controlPlaneEndpoint') or model.endpoint(r.tcp)}"

    def wanted(self, r: Reconciliation) -> bool:
        # Until the API server has listened once there is no endpoint to point a kubeconfig at.
        return bool(r.status.get("controlPlaneEndpoint") or model.endpoint(r.tcp)) and r.ca is not None

    def valid(self, r: Reconciliation, secret: Obj) -> bool:
        text = secret_bytes(secret, model.ADMIN_KUBECONFIG_KEY)
        if not text or r.ca is None:
            return False
        try:
            return current_cluster(text.decode()) == (self._server(r), r.ca.cert_pem)
        except (KeyError, ValueError, TypeError, StopIteration):
            return False

    def build(self, r: Reconciliation) -> dict[str, bytes]:
        assert r.ca is not None
        client = pki.issue_client_certificate(r.ca, pki.ADMIN_USER, (pki.ADMIN_GROUP,))
        config = dump_kubeconfig(
            admin_kubeconfig(r.ref.name, self._server(r), r.ca.cert_pem, client, pki.ADMIN_USER)
        )
        return {
            model.ADMIN_KUBECONFIG_KEY: config.encode(),
            model.SUPER_ADMIN_KUBECONFIG_KEY: config.encode(),
        }


# --- storage and the running instance -----------------------------------------------------------


class DataStoreUnit:
    """Binds the tenant to its DataStore and key prefix; on deletion removes the prefix and its data."""

    name = "datastore"

    async def ensure(self, r: Reconciliation) -> None:
        name = model.datastore_name(r.tcp)
        try:
            store = await r.client.get(model.DATASTORES, name)
        except ApiError as err:
            if err.code != 404:
                raise
            r.failure = f'DataStore "{name}" not found'
            return
        previous = model.current_datastore_name(r.tcp)
        if previous and previous != name:
            store = await self._migrate(r, previous, store)
        r.datastore = store
        schema = model.datastore_schema(r.tcp)
        r.set_status(
            "storage",
            {
                "driver": _driver(store),
                "dataStoreName": store["metadata"]["name"],
                "setup": {"schema": schema, "user": schema},
            },
        )

    @staticmethod
    async def _migrate(r: Reconciliation, previous: str, target: Obj) -> Obj:
        """Kamaji's live migration: `spec.dataStore` changed, so the tenant's keys move to the new store
        (same driver only; the source keeps its copy). Returns the store the tenant is served from."""
        try:
            source = await r.client.get(model.DATASTORES, previous)
        except ApiError as err:
            if err.code != 404:
                raise
            return target  # the old store is gone: there is nothing left to carry over
        ref, schema = r.ref, model.datastore_schema(r.tcp)
        if _driver(source) != _driver(target):
            log.warning(
                "tcp %s: DataStore %s is %s, %s is %s: Kamaji migrates only between stores of one driver",
                ref.key, previous, _driver(source), target["metadata"]["name"], _driver(target),
            )  # fmt: skip
            return source
        wipe = (r.tcp["metadata"].get("annotations") or {}).get(CLEANUP_PRIOR_MIGRATION) == "true"
        to, source_at = model.datastore_endpoint(target), model.datastore_endpoint(source)
        if to == source_at:
            return target  # two names for one store: the data is already there
        try:
            # Checked before the tenant is stopped, so a refused migration does not take it down.
            if not wipe and (await r.host.export_tenant(schema, to)).rows:
                raise schema_taken(schema)
            # The tenant is frozen while its keys move: its API server stops, and starts on the new store.
            await r.host.stop(ref.uid)
            data = await r.host.export_tenant(schema, source_at)
            await r.host.import_tenant(schema, data, wipe=wipe, datastore=to)
        except MigrationError as err:
            log.warning("tcp %s: not migrated to DataStore %s: %s", ref.key, target["metadata"]["name"], err)
            return source
        log.info(
            "tcp %s: migrated %d keys from DataStore %s to %s",
            ref.key, len(data.rows), previous, target["metadata"]["name"],
        )  # fmt: skip
        return target

    async def clean_up(self, r: Reconciliation) -> None:
        store = r.datastore
        if store is None:
            with contextlib.suppress(ApiError):
                store = await r.client.get(model.DATASTORES, model.datastore_name(r.tcp))
        endpoint = "" if store is None else model.datastore_endpoint(store)
        await r.host.purge(model.datastore_schema(r.tcp), endpoint)


def _driver(store: Obj) -> str:
    return str((store.get("spec") or {}).get("driver", model.DEFAULT_DRIVER))


class DataStoreConfigUnit(SecretUnit):
    """`<tcp>-datastore-config`: how the tenant's API server reaches its slice of the DataStore (Kamaji's
    `DB_*` keys; SQLite has no users, so the password is empty and the user names the schema)."""

    name = "datastore-config"
    suffix = model.DATASTORE_CONFIG_SECRET
    status_path = "storage.config"
    reports_last_update = False  # Kamaji's DataStoreConfigStatus has a secret name and a checksum only

    def wanted(self, r: Reconciliation) -> bool:
        return r.datastore is not None

    def _data(self, r: Reconciliation) -> dict[str, bytes]:
        assert r.datastore is not None
        schema = model.datastore_schema(r.tcp)
        return {
            "DB_CONNECTION_STRING": model.datastore_endpoint(r.datastore).encode(),
            "DB_SCHEMA": schema.encode(),
            "DB_USER": schema.encode(),
            "DB_PASSWORD": b"",
        }

    def valid(self, r: Reconciliation, secret: Obj) -> bool:
        data = self._data(r)
        return all(
            secret_bytes(secret, key) == value or (not value and not secret_bytes(secret, key))
            for key, value in data.items()
        )

    def build(self, r: Reconciliation) -> dict[str, bytes]:
        return self._data(r)


class APIServerUnit:
    """The tenant API server instance (Kamaji's control-plane Deployment): started with replicas > 0,
    stopped with `replicas: 0` (Sleeping, data kept)."""

    name = "api-server"

    async def ensure(self, r: Reconciliation) -> None:
        ref = r.ref
        wanted = model.replicas(r.tcp)
        deployment: Obj = {
            "name": ref.name,
            "namespace": ref.namespace,
            "selector": f"{model.NAME_LABEL}={ref.name}",
            "replicas": wanted,
        }
        if r.failure is None and wanted > 0 and None not in (r.ca, r.serving, r.service_account):
            port = model.requested_port(r.tcp) or model.previous_port(r.tcp)
            try:
                r.running = await r.host.start(self._instance(r, port))
            except OSError:
                if model.requested_port(r.tcp) or not port:
                    raise
                # The old port is taken by something else now: serve elsewhere and re-issue the kubeconfig.
                r.running = await r.host.start(self._instance(r, 0))
        elif wanted == 0:
            await r.host.stop(ref.uid)
            r.running = None
        if r.running is not None:
            # Kamaji's soot manager: the kubeadm phases follow the TCP (a new network profile, kubelet
            # patches); the host writes them only when they changed.
            await r.host.apply_kubeadm(ref.uid, model.kubeadm_parameters(r.tcp, r.datastore))
        ready = 1 if r.running else 0
        deployment.update(readyReplicas=ready, availableReplicas=ready, updatedReplicas=ready)
        r.set_status("kubernetesResources.deployment", deployment)
        if r.running is not None:
            address = model.advertised_address(r.tcp)
            r.set_status("controlPlaneEndpoint", f"{address}:{r.running.port}")
            r.set_status(
                "kubernetesResources.service",
                {"name": ref.name, "namespace": ref.namespace, "port": r.running.port},
            )
        elif model.endpoint(r.tcp):
            # Sleeping keeps its endpoint and its Service (Kamaji scales only the Deployment to zero);
            # it just refuses connections.
            r.set_status("controlPlaneEndpoint", model.endpoint(r.tcp))
            service = ((r.tcp.get("status") or {}).get("kubernetesResources") or {}).get("service")
            if service:
                r.set_status("kubernetesResources.service", service)

    def _instance(self, r: Reconciliation, port: int) -> ControlPlaneInstance:
        assert r.ca and r.serving and r.service_account
        ref = r.ref
        return ControlPlaneInstance(
            key=ref.uid,
            namespace=ref.namespace,
            name=ref.name,
            schema=model.datastore_schema(r.tcp),
            address=model.advertised_address(r.tcp),
            port=port,
            kubernetes_version=model.kubernetes_version(r.tcp),
            ca=r.ca,
            serving=r.serving,
            service_account=r.service_account,
            kubelet_client=r.kubelet_client,
            datastore="" if r.datastore is None else model.datastore_endpoint(r.datastore),
            service_cidr=model.service_cidr(r.tcp),
            kubeadm=model.kubeadm_parameters(r.tcp, r.datastore),
        )

    async def clean_up(self, r: Reconciliation) -> None:
        await r.host.stop(r.ref.uid)


class KonnectivityUnit:
    """The konnectivity server beside the tenant API server (`spec.addons.konnectivity`): agents on the
    tenant's workers dial it, and the API server reaches webhooks and kubelets through them. Kamaji also
    writes the agent's ServiceAccount, ClusterRoleBinding and DaemonSet (or Deployment) into the tenant
    (`konnectivityagent`), and deletes them when the add-on is switched off."""

    name = "konnectivity"

    async def ensure(self, r: Reconciliation) -> None:
        ref = r.ref
        enabled = model.konnectivity_enabled(r.tcp)
        if not enabled:
            if r.running is not None:
                await r.host.stop_konnectivity(ref.uid, remove_agent=True)
            r.set_status("addons.konnectivity", {"enabled": False})
            return
        agent = agent_spec(r.tcp, model.advertised_address(r.tcp), 0)
        fragment: Obj = {
            "enabled": True,
            "agent": {"name": AGENT_NAME, "namespace": AGENT_NAMESPACE, "mode": agent.mode},
            "clusterrolebinding": {"name": CLUSTER_ROLE_BINDING},
            "sa": {"name": AGENT_NAME, "namespace": AGENT_NAMESPACE},
        }
        if r.running is not None:
            port = model.konnectivity_port(r.tcp)
            agent_port = await r.host.start_konnectivity(ref.uid, port, agent)
            fragment["service"] = {"name": ref.name, "namespace": ref.namespace, "port": agent_port}
        elif model.previous_konnectivity_port(r.tcp):
            fragment["service"] = {
                "name": ref.name,
                "namespace": ref.namespace,
                "port": model.previous_konnectivity_port(r.tcp),
            }
        r.set_status("addons.konnectivity", fragment)

    async def clean_up(self, r: Reconciliation) -> None:
        await r.host.stop_konnectivity(r.ref.uid)


class KubeadmAddonsUnit:
    """Kamaji's CoreDNS and kube-proxy add-ons (`spec.addons.coreDNS`, `spec.addons.kubeProxy`). Their
    objects go into the tenant with the kubeadm phases (`kubeadmaddons`), which follow the TCP; the
    status says which add-ons are on and since when, as Kamaji's `AddonStatus` does. A tenant that does
    not run keeps the status it had."""

    name = "kubeadm-addons"

    async def ensure(self, r: Reconciliation) -> None:
        for addon in (COREDNS_ADDON, KUBE_PROXY_ADDON):
            previous = _status_at(r.tcp, f"addons.{addon}") or {"enabled": False}
            wanted = model.addon_enabled(r.tcp, addon)
            if r.running is not None and bool(previous.get("enabled")) != wanted:
                r.set_status(f"addons.{addon}", {"enabled": wanted, "lastUpdate": now_rfc3339()})
            else:
                r.set_status(f"addons.{addon}", previous)

    async def clean_up(self, r: Reconciliation) -> None:
        """The tenant's objects go with its data."""


def default_units() -> list[Unit]:
    """The units in the order a tenant comes up; clean-up runs them in reverse."""
    return [
        DataStoreUnit(),
        DataStoreConfigUnit(),
        CertificateAuthorityUnit(),
        APIServerCertificateUnit(),
        APIServerKubeletClientCertificateUnit(),
        ServiceAccountKeyUnit(),
        APIServerUnit(),
        KonnectivityUnit(),
        KubeadmAddonsUnit(),
        AdminKubeconfigUnit(),
    ]
