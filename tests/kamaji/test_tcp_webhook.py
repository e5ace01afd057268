"""Kamaji's TenantControlPlane webhooks (internal/webhook/handlers: tcp_name, tcp_version, tcp_datastore,
tcp_defaults) and its CRD's defaults."""

from __future__ import annotations

from typing import Any

import pytest

from tenantgpu.apiserver.validation import default
from tenantgpu.kamaji import model
from tenantgpu.kamaji.webhook import (
    TenantControlPlaneDefaults,
    TenantControlPlaneWebhook,
    check_version,
    dns_service_ips,
)


@pytest.mark.parametrize(
    ("new", "old", "why"),
    [
        ("v1.31.4", None, None),
        ("1.35.9", None, None),  # patch versions are not compared
        (
            "v1.36.0",
            None,
            "unable to create a TenantControlPlane with a Kubernetes version greater than the supported one, actually v1.35",
        ),
        (
            "v1.31",
            None,
            "unable to parse the desired Kubernetes version: No Major.Minor.Patch elements found",
        ),
        (
            "latest",
            None,
            "unable to parse the desired Kubernetes version: No Major.Minor.Patch elements found",
        ),
        ("v1.32.1", "v1.31.4", None),
        ("v1.31.9", "v1.31.4", None),
        ("v1.30.2", "v1.31.4", "unable to downgrade a TenantControlPlane from 1.31.0 to 1.30.0"),
        ("v1.33.0", "v1.31.4", "unable to upgrade to a minor version in a non-sequential mode"),
        ("v1.36.0", "v1.35.0", "unable to upgrade to a version greater than the supported one (v1.35)"),
    ],
)
def test_version_changes_kamaji_allows_and_refuses(new: str, old: str | None, why: str | None) -> None:
    assert check_version(new, old) == why


def _webhook(*datastores: str) -> TenantControlPlaneWebhook:
    known = set(datastores)
    return TenantControlPlaneWebhook(lambda name: {"metadata": {"name": name}} if name in known else None)


def test_names_and_datastores_are_checked_on_create() -> None:
    tcp: dict[str, Any] = model.tenant_control_plane("tenant-a", version="v1.31.4", datastore="default")
    assert _webhook("default").refusal(tcp, None) is None
    assert _webhook().refusal(tcp, None) == "default DataStore does not exist"
    tcp["metadata"]["name"] = "1st-tenant"
    assert (_webhook("default").refusal(tcp, None) or "").startswith(
        "the provided name is invalid, a DNS-1035 label must consist of lower case alphanumeric characters"
    )
    overrides = model.tenant_control_plane("tenant-b", version="v1.31.4", datastore="")
    overrides["spec"].pop("dataStore")
    overrides["spec"]["dataStoreOverrides"] = [
        {"resource": "/events", "dataStore": "events"},
        {"resource": "/events", "dataStore": "events"},
    ]
    assert (
        _webhook("events").refusal(overrides, None)
        == "duplicate resource override in Spec.DataStoreOverrides"
    )


def test_kamaji_s_defaults_on_create_and_the_crd_s_after_them() -> None:
    tcp: dict[str, Any] = {
        "metadata": {"name": "tenant-n", "namespace": "default", "uid": "e47f8dba"},
        "spec": {
            "controlPlane": {"service": {"serviceType": "ClusterIP"}},
            "kubernetes": {"version": "v1.31.0", "kubelet": {}},
            "networkProfile": {"serviceCidr": "10.100.0.0/16"},
            "addons": {"konnectivity": {}},
        },
    }
    # the order of kube-apiserver: the CRD's defaults, the mutating webhook, the CRD's defaults again
    default("TenantControlPlane", tcp)
    TenantControlPlaneDefaults("default").default(tcp)
    default("TenantControlPlane", tcp)
    spec = tcp["spec"]
    assert (spec["dataStore"], spec["dataStoreSchema"], spec["dataStoreUsername"]) == (
        "default",
        "e47f8dba",
        "e47f8dba",
    )
    assert spec["controlPlane"]["deployment"]["replicas"] == 2
    assert spec["controlPlane"]["deployment"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "100%", "maxUnavailable": 0},
    }
    assert spec["networkProfile"] == {
        "serviceCidr": "10.100.0.0/16",
        "serviceCidrs": ["10.100.0.0/16"],
        "podCidr": "10.244.0.0/16",
        "podCidrs": ["10.244.0.0/16"],
        "dnsServiceIPs": ["10.100.0.10"],
        "port": 6443,
        "clusterDomain": "cluster.local",
    }
    assert spec["kubernetes"]["kubelet"] == {
        "preferredAddressTypes": ["InternalIP", "ExternalIP", "Hostname"]
    }
    assert "ResourceQuota" in spec["kubernetes"]["admissionControllers"]
    assert spec["addons"]["konnectivity"]["server"] == {
        "image": "registry.k8s.io/kas-network-proxy/proxy-server",
        "port": 8132,
    }
    assert spec["addons"]["konnectivity"]["agent"]["mode"] == "DaemonSet"


def test_what_a_user_wrote_is_kept_and_absent_objects_get_no_defaults() -> None:
    tcp = model.tenant_control_plane("tenant-a", version="v1.31.4", replicas=1)
    tcp["metadata"]["uid"] = "u1"
    default("TenantControlPlane", tcp)
    TenantControlPlaneDefaults("default").default(tcp)
    assert tcp["spec"]["controlPlane"]["deployment"]["replicas"] == 1
    assert "networkProfile" not in tcp["spec"]  # a CRD default needs its parent object
    assert dns_service_ips(["fd00:10:96::/112"]) == ["fd00:10:96::10"]
