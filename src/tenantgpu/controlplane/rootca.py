"""`kube-root-ca.crt` in every namespace: kube-controller-manager's root CA publisher.

Pods verify the API server with this bundle (the service account volume projects it), and tools read it
to trust `kubernetes.default.svc`. The publisher puts the ConfigMap into each active namespace, and puts
it back when someone deletes it or changes its `ca.crt`.
"""

from __future__ import annotations

from typing import Any

from tenantgpu.controlplane.everynamespace import EveryNamespace
from tenantgpu.kubeclient import Informer, KubeClient

CONFIG_MAP = "kube-root-ca.crt"
KEY = "ca.crt"


class RootCAPublisher(EveryNamespace):
    """Keeps ConfigMap `kube-root-ca.crt` (`data["ca.crt"]` = the cluster CA) in every active namespace."""

    resource = "configmaps"
    name = CONFIG_MAP

    def __init__(self, client: KubeClient, *, namespaces: Informer, ca_pem: bytes) -> None:
        super().__init__(client, namespaces=namespaces)
        self.ca = ca_pem.decode()

    def body(self, namespace: str) -> dict[str, Any]:
        return {**super().body(namespace), "data": {KEY: self.ca}}

    def repair(self, current: dict[str, Any]) -> dict[str, Any] | None:
        return None if (current.get("data") or {}).get(KEY) == self.ca else {"data": {KEY: self.ca}}
