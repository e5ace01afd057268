"""What a running lab holds, read over the wire: tenants with endpoint and state, nodes, GPUs and pods."""

from __future__ import annotations

import asyncio
from typing import Any

from tenantgpu.gpushare import ClusterState, SharingConfig
from tenantgpu.kamaji import model
from tenantgpu.kubeclient import ApiError, KubeClient
from tenantgpu.lab.state import StateDir, kubeconfig_file_name

Obj = dict[str, Any]


async def collect_status(state: StateDir) -> Obj:
    """The lab's status as plain data (the shape `tenantgpu status -o json` prints)."""
    pid = state.running_pid()
    result: Obj = {"stateDir": str(state.root), "running": pid is not None, "pid": pid, "management": None}
    result["tenants"] = []
    if pid is None or not state.management_kubeconfig.exists():
        return result
    async with KubeClient.from_kubeconfig(
        state.management_kubeconfig, user_agent="tenantgpu-status"
    ) as client:
        result["management"] = {
            "endpoint": client.config.server,
            "kubeconfig": str(state.management_kubeconfig),
        }
        listing = await client.list(model.TENANT_CONTROL_PLANES)
        tcps = sorted(
            listing["items"], key=lambda t: (t["metadata"].get("namespace", ""), t["metadata"]["name"])
        )
    result["tenants"] = await asyncio.gather(*(_tenant_status(state, tcp) for tcp in tcps))
    return result


async def _tenant_status(state: StateDir, tcp: Obj) -> Obj:
    ref = model.TenantRef.of(tcp)
    path = state.tenant_kubeconfig(kubeconfig_file_name(ref.namespace, ref.name))
    tenant: Obj = {
        "name": ref.name,
        "namespace": ref.namespace,
        "state": model.version_status(tcp) or "Unknown",
        "version": model.kubernetes_version(tcp),
        "endpoint": model.endpoint(tcp),
        "dataStore": model.datastore_name(tcp),
        "kubeconfig": str(path) if path.exists() else None,
        "nodes": [],
        "pods": [],
    }
    if not model.serving(tcp) or not path.exists():
        return tenant
    try:
        async with KubeClient.from_kubeconfig(path, user_agent="tenantgpu-status") as client:
            nodes, pods = await asyncio.gather(client.list("nodes"), client.list("pods"))
    except (ApiError, OSError) as err:
        tenant["error"] = str(err)
        return tenant
    tenant["nodes"] = _nodes_with_gpus(nodes["items"], pods["items"])
    tenant["pods"] = [
        {
            "namespace": pod["metadata"].get("namespace"),
            "name": pod["metadata"]["name"],
            "phase": (pod.get("status") or {}).get("phase", ""),
            "node": (pod.get("spec") or {}).get("nodeName"),
        }
        for pod in pods["items"]
    ]
    return tenant


def _nodes_with_gpus(nodes: list[Obj], pods: list[Obj]) -> list[Obj]:
    """Per node its readiness and, per GPU, what HAMi has handed out: usage derived from pod annotations."""
    state = ClusterState(SharingConfig())
    for node in nodes:
        state.upsert_node(node)
    for pod in pods:
        state.upsert_pod(pod)
    result = []
    for node in nodes:
        name = node["metadata"]["name"]
        conditions = (node.get("status") or {}).get("conditions") or []
        try:
            usage = state.node_usage(name)
        except KeyError:
            usage = []
        result.append(
            {
                "name": name,
                "ready": any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
                "pods": sum(1 for p in pods if (p.get("spec") or {}).get("nodeName") == name),
                "gpus": [
                    {
                        "uuid": gpu.uuid,
                        "type": gpu.type,
                        "index": gpu.index,
                        "memory": {"allocated": gpu.usedmem, "total": gpu.totalmem},
                        "cores": {"allocated": gpu.usedcores, "total": gpu.totalcore},
                        "slots": {"used": gpu.used, "total": gpu.count},
                        "sharedPods": len(gpu.pods),
                    }
                    for gpu in usage
                ],
            }
        )
    return result
