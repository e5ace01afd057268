"""Kamaji's TenantControlPlane webhook rules (internal/webhook/handlers: tcp_name, tcp_version, tcp_datastore)."""

from __future__ import annotations

from typing import Any

import pytest

from tenantgpu.kamaji import model
from tenantgpu.kamaji.webhook import TenantControlPlaneWebhook, check_version


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
