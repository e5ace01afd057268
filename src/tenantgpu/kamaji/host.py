"""Where tenant control planes run: the seam between the controller and the API-server instances it starts."""

from __future__ import annotations

import base64
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from tenantgpu.apiserver.serviceips import DEFAULT_SERVICE_CIDR
from tenantgpu.kamaji.konnectivityagent import AgentSpec
from tenantgpu.kamaji.kubeadmconfig import KubeadmParameters, dns_service_ips
from tenantgpu.kamaji.pki import KeyPair


@dataclass(frozen=True)
class ControlPlaneInstance:
    """Everything one tenant API server needs; the controller builds it from the TCP and its Secrets."""

    key: str  # the TCP's UID: a re-created TCP of the same name is a different instance
    namespace: str
    name: str
    schema: str  # the tenant's key prefix in the shared datastore
    address: str
    port: int  # 0 = any free port
    kubernetes_version: str
    ca: KeyPair
    serving: KeyPair
    service_account: KeyPair
    # The DataStore's endpoint (`sqlite://<path>`); empty means the host's own store.
    datastore: str = ""
    service_cidr: str = DEFAULT_SERVICE_CIDR  # `spec.networkProfile.serviceCidr`
    # What Kamaji's kubeadm phases write into the tenant; None: the defaults for this name and version.
    kubeadm: KubeadmParameters | None = None
    # What the API server presents to the kubelets (`<tcp>-api-server-kubelet-client-certificate`).
    kubelet_client: KeyPair | None = None

    def kubeadm_parameters(self) -> KubeadmParameters:
        return self.kubeadm or KubeadmParameters(
            name=self.name,
            namespace=self.namespace,
            version=self.kubernetes_version,
            address=self.address,
            service_cidrs=(self.service_cidr,),
            dns_service_ips=tuple(dns_service_ips([self.service_cidr])),
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe form, to hand the instance to a control-plane process."""
        data = asdict(self)
        for name in ("ca", "serving", "service_account", "kubelet_client"):
            pair: KeyPair | None = getattr(self, name)
            if pair is None:
                continue
            data[name] = {
                "cert_pem": base64.b64encode(pair.cert_pem).decode(),
                "key_pem": base64.b64encode(pair.key_pem).decode(),
            }
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ControlPlaneInstance:
        pairs = {
            name: KeyPair(base64.b64decode(data[name]["cert_pem"]), base64.b64decode(data[name]["key_pem"]))
            for name in ("ca", "serving", "service_account", "kubelet_client")
            if data.get(name) is not None
        }
        kubeadm = KubeadmParameters.from_json(data["kubeadm"]) if data.get("kubeadm") else None
        return cls(**{**data, **pairs, "kubeadm": kubeadm})


# Kamaji's annotation: a migration may replace what the target DataStore already holds for the schema.
CLEANUP_PRIOR_MIGRATION = "kamaji.clastix.io/cleanup-prior-migration"


class MigrationError(Exception):
    """A tenant's data could not be moved to its new DataStore; it stays where it was."""


def schema_taken(schema: str) -> MigrationError:
    """The target DataStore already holds the tenant's schema, and nothing said to replace it."""
    return MigrationError(
        f"the target DataStore already holds schema {schema!r}; "
        f"annotate the TenantControlPlane {CLEANUP_PRIOR_MIGRATION}=true to replace it"
    )


@dataclass(frozen=True)
class TenantData:
    """A tenant's keys as a migration carries them, with the source store's revision at the time."""

    revision: int
    rows: list[tuple[str, bytes]]

    def to_json(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "rows": [[key, base64.b64encode(value).decode()] for key, value in self.rows],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TenantData:
        return cls(int(data["revision"]), [(key, base64.b64decode(value)) for key, value in data["rows"]])


@dataclass(frozen=True)
class RunningInstance:
    """What the host reports about a started instance: where it listens."""

    port: int
    konnectivity_port: int = 0


class ControlPlaneHost(Protocol):
    """Starts and stops tenant control planes (API server plus its konnectivity server) in this process."""

    async def start(self, instance: ControlPlaneInstance) -> RunningInstance:
        """Start the instance, or return the running one unchanged if it is already up with the same PKI."""
        ...

    async def stop(self, key: str) -> None:
        """Stop the instance if it runs; its data stays in the datastore."""
        ...

    def running(self, key: str) -> RunningInstance | None: ...

    async def start_konnectivity(self, key: str, port: int, agent: AgentSpec | None = None) -> int:
        """Start the konnectivity server beside the running instance (or keep it); returns its agent port.

        From then on the API server reaches the tenant's services (webhooks, kubelets) through it. With
        `agent`, Kamaji's agent objects are written into the tenant (their port: the server's)."""
        ...

    async def stop_konnectivity(self, key: str, *, remove_agent: bool = False) -> None:
        """Stop the konnectivity server; with `remove_agent` (the add-on switched off) also delete the
        agent objects Kamaji wrote into the tenant."""
        ...

    async def apply_kubeadm(self, key: str, params: KubeadmParameters) -> None:
        """Write Kamaji's kubeadm phases into the running tenant again when their parameters changed."""
        ...

    async def purge(self, schema: str, datastore: str = "") -> None:
        """Delete every key under the tenant's prefix in that DataStore (empty: the host's own store)."""
        ...

    async def export_tenant(self, schema: str, datastore: str = "") -> TenantData:
        """Read every key under the tenant's prefix in that DataStore (a migration's source)."""
        ...

    async def import_tenant(self, schema: str, data: TenantData, *, wipe: bool, datastore: str = "") -> None:
        """Write a migrating tenant's keys into that DataStore; MigrationError if it holds the schema already
        (unless `wipe`)."""
        ...
