"""Kubeconfig files: the admin credentials of a cluster in the shape kubectl and client-go read."""

from __future__ import annotations

from typing import Any

import yaml

from tenantgpu.kamaji.pki import KeyPair, b64, unb64


def admin_kubeconfig(cluster: str, server: str, ca_pem: bytes, client: KeyPair, user: str) -> dict[str, Any]:
    """A kubeconfig with one cluster, one client-certificate user and one current context."""
    context = f"{user}@{cluster}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [
            {"name": cluster, "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(client.cert_pem),
                    "client-key-data": b64(client.key_pem),
                },
            }
        ],
        "contexts": [
            {"name": context, "context": {"cluster": cluster, "user": user, "namespace": "default"}}
        ],
        "current-context": context,
    }


# libyaml when present: the controller reads kubeconfigs on every pass, pure-Python YAML is 20x slower.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump_kubeconfig(config: dict[str, Any]) -> str:
    return yaml.dump(config, Dumper=_Dumper, sort_keys=False)


def current_cluster(text: str) -> tuple[str, bytes]:
    """The (server URL, CA certificate PEM) of the current context's cluster."""
    config = yaml.load(text, Loader=_Loader)
    context_name = config.get("current-context")
    contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
    clusters = {c["name"]: c["cluster"] for c in config.get("clusters") or []}
    cluster = clusters[
        contexts[context_name]["cluster"] if context_name in contexts else next(iter(clusters))
    ]
    return str(cluster["server"]), unb64(cluster["certificate-authority-data"])


def kubeconfig_server(text: str) -> str:
    """The server URL of the current context's cluster."""
    return current_cluster(text)[0]


def kubeconfig_ca(text: str) -> bytes:
    """The CA certificate (PEM) of the current context's cluster."""
    return current_cluster(text)[1]
