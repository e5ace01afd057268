"""The cluster IPs and node ports of Services, allocated by the API server as kube-apiserver does.

A Service of type ClusterIP, NodePort or LoadBalancer gets an IP from the service CIDR (Kamaji's
`networkProfile.serviceCidr`, 10.96.0.0/16 by default); the first address belongs to `default/kubernetes`.
As with kube's ServiceIPStaticSubrange, IPs are drawn at random from the upper part of the range, so the
lower part stays free for Services that ask for a fixed IP. NodePort and LoadBalancer ports get a node
port from 30000-32767. What is in use is read from the Services stored; nothing else is kept, so a
deleted Service frees its IP and ports and a restarted server knows every allocation.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tenantgpu.apiserver.validation import Cause

__all__ = ["DEFAULT_SERVICE_CIDR", "ServiceNetwork"]

DEFAULT_SERVICE_CIDR = "10.96.0.0/16"
_NEEDS_NODE_PORT = ("NodePort", "LoadBalancer")

Obj = dict[str, Any]


def _invalid(path: str, shown: str, detail: str) -> Cause:
    return Cause("FieldValueInvalid", f"Invalid value: {shown}: {detail}", path)


def _shown_list(values: list[str]) -> str:
    return "[" + ",".join(f'"{v}"' for v in values) + "]"


@dataclass
class ServiceNetwork:
    """One cluster's service range; `assign` fills in a Service's IPs and node ports before it is stored."""

    cidr: str = DEFAULT_SERVICE_CIDR
    node_ports: range = range(30000, 32768)
    _random: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        self._network = ipaddress.IPv4Network(self.cidr, strict=False)

    @property
    def kubernetes_ip(self) -> str:
        """The first address of the range, which kube-apiserver gives `default/kubernetes`."""
        return str(self._network.network_address + 1)

    def assign(
        self, service: Obj, old: Mapping[str, Any] | None, others: Iterable[Mapping[str, Any]]
    ) -> list[Cause]:
        """Sets `clusterIP(s)`, `ipFamilies`, `ipFamilyPolicy` and node ports; returns why it cannot.

        `others` are the stored Services (the one being updated may be among them: it is skipped by
        its uid). An update that leaves the IP or a node port out keeps the one already allocated.
        """
        spec = service.setdefault("spec", {})
        uid = (service.get("metadata") or {}).get("uid")
        used_ips: set[str] = set()
        used_ports: set[int] = set()
        for other in others:
            if (other.get("metadata") or {}).get("uid") == uid:
                continue
            other_spec = other.get("spec") or {}
            used_ips.update(ip for ip in other_spec.get("clusterIPs") or [other_spec.get("clusterIP")] if ip)
            used_ports.update(p["nodePort"] for p in other_spec.get("ports") or [] if p.get("nodePort"))
        causes = self._assign_ip(spec, (old or {}).get("spec") or {}, used_ips)
        causes += self._assign_node_ports(spec, (old or {}).get("spec") or {}, used_ports)
        return causes

    def _assign_ip(self, spec: Obj, old_spec: Mapping[str, Any], used: set[str]) -> list[Cause]:
        service_type = spec.get("type") or "ClusterIP"
        if service_type == "ExternalName":
            # A Service turned into ExternalName gives its IP back; fields left as they were are dropped.
            for name in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                if name in spec and spec[name] == old_spec.get(name):
                    del spec[name]
            return []
        requested = spec.get("clusterIP") or ""
        old_ip = old_spec.get("clusterIP") or ""
        if not requested and (spec.get("clusterIPs") or []):
            requested = spec["clusterIPs"][0]
        if not requested and old_ip:
            requested = old_ip  # an update that leaves the IP out keeps it, as kube's does
        if old_ip and requested != old_ip:
            return [_invalid("spec.clusterIPs[0]", _shown_list([requested]), "may not change once set")]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        if requested == "None":
            spec["clusterIP"], spec["clusterIPs"] = "None", ["None"]
            return []
        if requested == old_ip and old_ip:
            spec["clusterIP"], spec["clusterIPs"] = old_ip, [old_ip]
            return []
        if requested:
            problem = self._check_requested(requested, used)
            if problem:
                return [_invalid("spec.clusterIPs", _shown_list([requested]), problem)]
            ip = requested
        else:
            ip = self._next_free(used)
        spec["clusterIP"], spec["clusterIPs"] = ip, [ip]
        return []

    def _check_requested(self, requested: str, used: set[str]) -> str:
        try:
            address = ipaddress.IPv4Address(requested)
        except ValueError:
            return f"failed to allocate IP {requested}: must be a valid IP address, (e.g. 10.9.8.7)"
        if address not in self._network or address in (
            self._network.network_address,
            self._network.broadcast_address,
        ):
            return (
                f"failed to allocate IP {requested}: the provided IP ({requested}) is not in the valid range. "
                f"The range of valid IPs is {self._network}"
            )
        if requested in used:
            return f"failed to allocate IP {requested}: provided IP is already allocated"
        return ""

    def _next_free(self, used: set[str]) -> str:
        size = self._network.num_addresses
        # kube keeps the lower band (at least 16, at most 256 addresses) for Services that name their IP.
        low = min(max(16, size // 16), 256) if size > 16 else 1
        first = int(self._network.network_address)
        for start, end in ((low, size - 1), (1, low)):
            if start >= end:
                continue
            offset = self._random.randrange(start, end)
            for step in range(end - start):
                candidate = str(
                    ipaddress.IPv4Address(first + start + (offset - start + step) % (end - start))
                )
                if candidate not in used:
                    return candidate
        raise RuntimeError(f"range {self._network} is full")  # an Internal error, as kube reports it

    def _assign_node_ports(self, spec: Obj, old_spec: Mapping[str, Any], used: set[int]) -> list[Cause]:
        ports = spec.get("ports") or []
        if (spec.get("type") or "ClusterIP") not in _NEEDS_NODE_PORT:
            return []
        kept = {
            (p.get("port"), p.get("protocol", "TCP")): p.get("nodePort") for p in old_spec.get("ports") or []
        }
        causes: list[Cause] = []
        taken = set(used)
        for i, port in enumerate(ports):
            wanted = port.get("nodePort") or kept.get((port.get("port"), port.get("protocol", "TCP")))
            if wanted:
                if wanted not in self.node_ports:
                    causes.append(
                        _invalid(
                            f"spec.ports[{i}].nodePort",
                            str(wanted),
                            f"provided port is not in the valid range. The range of valid ports is "
                            f"{self.node_ports.start}-{self.node_ports.stop - 1}",
                        )
                    )
                    continue
                if wanted in taken:
                    causes.append(
                        _invalid(
                            f"spec.ports[{i}].nodePort", str(wanted), "provided port is already allocated"
                        )
                    )
                    continue
            else:
                free = [p for p in self.node_ports if p not in taken]
                if not free:
                    raise RuntimeError("range for node ports is full")
                wanted = self._random.choice(free)
            port["nodePort"] = wanted
            taken.add(wanted)
        return causes
