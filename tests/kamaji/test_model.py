"""Kamaji's TCP fields as the controller reads them, and readiness derived in Kamaji's order."""

from tenantgpu.kamaji import model
from tenantgpu.kamaji.model import VersionStatus, derive_version_status


def _tcp(**spec):
    return {"metadata": {"name": "t", "namespace": "ns", "uid": "ab-cd"}, "spec": spec}


def test_defaults_follow_kamaji() -> None:
    tcp = _tcp()
    assert model.replicas(tcp) == 2
    assert model.datastore_name(tcp) == "default"
    # Since Kamaji PR #1235 the schema defaults to the UID, as it is (GetDefaultDatastoreSchema).
    assert model.datastore_schema(tcp) == "ab-cd"
    assert model.requested_port(tcp) == 0


def test_explicit_fields_win() -> None:
    tcp = _tcp(dataStoreSchema="mine", dataStore="other", networkProfile={"port": 7443})
    tcp["spec"]["controlPlane"] = {"deployment": {"replicas": 0}}
    assert model.datastore_schema(tcp) == "mine"
    assert model.datastore_name(tcp) == "other"
    assert model.requested_port(tcp) == 7443
    assert model.replicas(tcp) == 0


def test_previous_port_comes_from_the_endpoint() -> None:
    tcp = _tcp()
    assert model.previous_port(tcp) == 0
    tcp["status"] = {"controlPlaneEndpoint": "127.0.0.1:40123"}
    assert model.previous_port(tcp) == 40123


def test_readiness_order() -> None:
    assert (
        derive_version_status(replicas=0, running=False, ready=False, failed=False) == VersionStatus.SLEEPING
    )
    assert derive_version_status(replicas=1, running=True, ready=True, failed=True) == VersionStatus.NOT_READY
    assert derive_version_status(replicas=1, running=True, ready=True, failed=False) == VersionStatus.READY
    assert (
        derive_version_status(replicas=1, running=False, ready=False, failed=False)
        == VersionStatus.PROVISIONING
    )


def test_manifest_is_a_tenant_control_plane() -> None:
    tcp = model.tenant_control_plane("tenant-a", version="v1.31.4")
    assert tcp["apiVersion"] == "kamaji.clastix.io/v1alpha1"
    assert tcp["kind"] == "TenantControlPlane"
    assert tcp["spec"]["kubernetes"]["version"] == "v1.31.4"
    assert model.replicas(tcp) == 1
