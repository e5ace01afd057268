"""Static pods as the kubelet shows them through the API: mirror pods, annotated and owned by their Node
(what `kubectl drain` recognises and leaves alone)."""

from __future__ import annotations

from typing import Any

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"


def owned_by_node(pod: dict[str, Any], node_name: str, node_uid: str) -> dict[str, Any]:
    """The pod with the ownerReference a mirror pod has to its Node."""
    owner = {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid, "controller": True}
    return {**pod, "metadata": {**pod["metadata"], "ownerReferences": [owner]}}
