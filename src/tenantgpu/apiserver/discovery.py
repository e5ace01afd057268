"""Discovery documents: legacy `/api`, `/apis`, per group-version lists, and aggregated discovery."""

from __future__ import annotations

from typing import Any

from tenantgpu.apiserver.kinds import Kind, KindTable

AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"


def aggregated_content_type(accept: str) -> str | None:
    """The aggregated-discovery media type the client asked for first, or None for legacy.

    kubectl only treats the body as aggregated when the response Content-Type says so exactly.
    """
    for part in accept.split(","):
        params = {p.strip() for p in part.split(";")[1:]}
        if "as=APIGroupDiscoveryList" in params and "g=apidiscovery.k8s.io" in params:
            if "v=v2" in params:
                return AGGREGATED_V2
            if "v=v2beta1" in params:
                return AGGREGATED_V2BETA1
    return None


def _resource_entry(kind: Kind) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": list(kind.verbs),
    }
    if kind.short_names:
        entry["shortNames"] = list(kind.short_names)
    if kind.categories:
        entry["categories"] = list(kind.categories)
    return entry


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def resource_list(kinds: KindTable, group: str, version: str) -> dict[str, Any]:
    resources: list[dict[str, Any]] = []
    for kind in kinds.in_group_version(group, version):
        resources.append(_resource_entry(kind))
        for sub in kind.subresources:
            entry: dict[str, Any] = {
                "name": f"{kind.plural}/{sub.name}",
                "singularName": "",
                "namespaced": kind.namespaced,
                "kind": sub.kind,
                "verbs": list(sub.verbs),
            }
            if sub.group != group or sub.version != version:
                entry["group"] = sub.group
                entry["version"] = sub.version
            resources.append(entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group(kinds: KindTable, name: str) -> dict[str, Any] | None:
    versions = kinds.group_versions().get(name)
    if not name or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def api_group_list(kinds: KindTable) -> dict[str, Any]:
    groups = [_group(name, versions) for name, versions in kinds.group_versions().items() if name]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _aggregated_resource(kind: Kind) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": kind.plural,
        "responseKind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
        "scope": "Namespaced" if kind.namespaced else "Cluster",
        "singularResource": kind.singular,
        "verbs": list(kind.verbs),
    }
    if kind.short_names:
        entry["shortNames"] = list(kind.short_names)
    if kind.categories:
        entry["categories"] = list(kind.categories)
    if kind.subresources:
        entry["subresources"] = [
            {
                "subresource": sub.name,
                "responseKind": {"group": sub.group, "version": sub.version, "kind": sub.kind},
                "verbs": list(sub.verbs),
            }
            for sub in kind.subresources
        ]
    return entry


def aggregated(kinds: KindTable, content_type: str, *, core: bool) -> dict[str, Any]:
    """The aggregated list for `/api` (core=True, one item named "") or `/apis` (one item per group)."""
    items = []
    for name, versions in kinds.group_versions().items():
        if bool(name) == core:
            continue
        items.append(
            {
                "metadata": {"name": name, "creationTimestamp": None},
                "versions": [
                    {
                        "version": v,
                        "freshness": "Current",
                        "resources": [_aggregated_resource(k) for k in kinds.in_group_version(name, v)],
                    }
                    for v in versions
                ],
            }
        )
    version = "v2" if content_type == AGGREGATED_V2 else "v2beta1"
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{version}",
        "metadata": {},
        "items": items,
    }
