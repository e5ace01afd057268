"""kube-apiserver's EgressSelectorConfiguration for the tunnel: as Kamaji writes it, as a dialler reads it."""

from __future__ import annotations

from typing import Any

# Kamaji's values (internal/resources/konnectivity): the sidecar's socket, and the ConfigMap that
# carries the file for kube-apiserver's --egress-selector-config-file.
DEFAULT_UDS_NAME = "/run/konnectivity/konnectivity-server.socket"
CONFIGMAP_SUFFIX = "konnectivity-egress-selector-configuration"
CONFIGMAP_KEY = "egress-selector-configuration.yaml"
API_VERSION = "apiserver.k8s.io/v1beta1"
KIND = "EgressSelectorConfiguration"
CLUSTER = "cluster"


def egress_selector_configuration(uds_name: str = DEFAULT_UDS_NAME) -> dict[str, Any]:
    """One selection, `cluster`, over gRPC on the sidecar's Unix socket: what Kamaji gives each tenant."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "egressSelections": [
            {
                "name": CLUSTER,
                "connection": {"proxyProtocol": "GRPC", "transport": {"uds": {"udsName": uds_name}}},
            }
        ],
    }


def cluster_uds_name(configuration: dict[str, Any]) -> str | None:
    """The socket that `cluster` egress goes through, or None when `cluster` traffic is dialled directly.

    Raises ValueError for a selection this tunnel does not speak (HTTPConnect, TCP transport).
    """
    if configuration.get("kind") != KIND:
        raise ValueError(f"expected kind {KIND}, got {configuration.get('kind')!r}")
    for selection in configuration.get("egressSelections") or []:
        if selection.get("name") != CLUSTER:
            continue
        connection = selection.get("connection") or {}
        protocol = connection.get("proxyProtocol", "Direct")
        if protocol == "Direct":
            return None
        if protocol != "GRPC":
            raise ValueError(f"proxyProtocol {protocol!r} is not supported; use GRPC")
        uds = (connection.get("transport") or {}).get("uds") or {}
        if not uds.get("udsName"):
            raise ValueError("the cluster selection needs transport.uds.udsName")
        return str(uds["udsName"])
    return None
