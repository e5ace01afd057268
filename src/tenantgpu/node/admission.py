"""The kubelet's own admission of a pod bound to its node: kube's predicate admit handler.

A scheduler checks a pod against the node before it binds it, but a pod can also name its node itself
(`spec.nodeName`), and a node's room may have changed since. So the kubelet checks again, after the
device plugin's Allocate (kube adds that handler first): the pod's `kubernetes.io/os` label and
`spec.os` against the node, then the scheduler's NodeResourcesFit against the pods it has already
admitted (pods, cpu, memory, ephemeral-storage, then the extended resources the node advertises),
NodeAffinity, NodePorts and, for a pod that is not static, the node's NoExecute taints. The first
failure rejects the pod with kube's reason and text (`OutOfcpu`, `Node didn't have enough resource:
cpu, requested: 4000, used: 500, capacity: 2000`, `Predicate NodeAffinity failed: …`), unless the pod
is critical and only short of resources: then `criticalpods` chooses pods to evict for it.

Pure functions: the kubelet passes the node and what the pods it admitted charge it, either as a list
of their requests or as the running totals it keeps (`NodeUsage`), so that admitting one more pod costs
the same beside ten pods or two hundred.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tenantgpu.gpushare import reasons
from tenantgpu.gpushare.basics import pod_amounts, selector_matches, untolerated_taint
from tenantgpu.gpushare.quantity import QuantityError, parse_quantity

OS_LABEL = "kubernetes.io/os"
NODE_OS = "linux"

# The resources NodeResourcesFit checks by name, in its order; every other one is a "scalar" resource.
_NAMED = ("cpu", "memory", "ephemeral-storage")
_OUT_OF = {
    "cpu": "OutOfcpu",
    "memory": "OutOfmemory",
    "ephemeral-storage": "OutOfephemeral-storage",
    "pods": "OutOfpods",
}
_NODE_PORTS_REASON = "node(s) didn't have free ports for the requested pod ports"
_TAINTS_REASON = "node(s) had taints that the pod didn't tolerate"

Requests = dict[str, int]
HostPort = tuple[str, str, int]  # (address, protocol, port)


@dataclass
class NodeUsage:
    """What the admitted pods charge a node, as kube's NodeInfo totals it: how many there are, their
    requests summed per resource, and the host ports they hold (a multiset: two pods may name the same
    port on different addresses)."""

    pods: int = 0
    requested: dict[str, int] = field(default_factory=dict)
    ports: Counter[HostPort] = field(default_factory=Counter)

    @classmethod
    def of(cls, admitted: Iterable[Requests], ports: Iterable[HostPort] = ()) -> NodeUsage:
        usage = cls()
        for requests in admitted:
            usage.add(requests)
        usage.ports.update(ports)
        return usage

    def add(self, requests: Requests, ports: Iterable[HostPort] = ()) -> None:
        self.pods += 1
        for name, value in requests.items():
            self.requested[name] = self.requested.get(name, 0) + value
        self.ports.update(ports)

    def remove(self, requests: Requests, ports: Iterable[HostPort] = ()) -> None:
        self.pods -= 1
        for name, value in requests.items():
            left = self.requested.get(name, 0) - value
            if left:
                self.requested[name] = left
            else:
                self.requested.pop(name, None)
        self.ports.subtract(ports)
        for port in [p for p, n in self.ports.items() if n <= 0]:
            del self.ports[port]

    def without(self, requests: Requests | None, ports: Iterable[HostPort] = ()) -> NodeUsage:
        """A copy without one pod's charge (None: nothing to take out)."""
        copy = NodeUsage(self.pods, dict(self.requested), Counter(self.ports))
        if requests is not None:
            copy.remove(requests, ports)
        return copy


@dataclass(frozen=True)
class Rejection:
    """Why the kubelet refused a pod: the event's and the Failed status's reason, and kube's text."""

    reason: str
    message: str


def whole(name: str, value: Any) -> int:
    """A quantity as the kubelet's messages count it: milli-CPU, otherwise the value rounded up."""
    quantity = parse_quantity(value)
    return math.ceil(quantity * 1000) if name == "cpu" else math.ceil(quantity)


def _container_requests(container: Mapping[str, Any]) -> dict[str, Any]:
    resources = container.get("resources") or {}
    # The API server defaults a request to its limit; a pod from elsewhere may not have been defaulted.
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: whole(name, value) for name, value in merged.items()}


def pod_requests(pod: Mapping[str, Any]) -> Requests:
    """What kube's PodRequests charges the node per resource (app containers and sidecars add up, an
    init container needs its own peak, the overhead comes on top), in the kubelet's units. A request
    that is no quantity counts as nothing: the API server refuses such pods before they get here."""
    spec = pod.get("spec") or {}
    try:
        needs = pod_amounts(spec, _container_requests)
        for name, value in (spec.get("overhead") or {}).items():
            needs[name] = needs.get(name, 0) + whole(name, value)
    except QuantityError:
        return {}
    return {name: int(value) for name, value in needs.items() if value}


def _allocatable(node: Mapping[str, Any]) -> dict[str, Any]:
    status = node.get("status") or {}
    return status.get("allocatable") or status.get("capacity") or {}


def _is_extended(name: str) -> bool:
    """kube's IsExtendedResourceName: a domain outside kubernetes.io, and not a quota's `requests.` name."""
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


@dataclass(frozen=True)
class Failure:
    """One of generalFilter's reasons; an insufficient resource also says how much is missing
    (InsufficientResourceError.GetInsufficientAmount), which the critical pod handler frees."""

    rejection: Rejection
    resource: str | None = None
    missing: int = 0


def _insufficient(name: str, requested: int, used: int, capacity: int) -> Failure:
    return Failure(
        Rejection(
            _OUT_OF.get(name, f"OutOf{name}"),
            f"Node didn't have enough resource: {name}, requested: {requested}, used: {used}, "
            f"capacity: {capacity}",
        ),
        name,
        requested - (capacity - used),
    )


def _fit(wanted: Requests, node: Mapping[str, Any], usage: NodeUsage) -> list[Failure]:
    """NodeResourcesFit's failures, in its order: pods, cpu, memory, ephemeral storage, scalars."""
    allocatable = _allocatable(node)
    found = []
    if "pods" in allocatable:
        allowed = math.floor(parse_quantity(allocatable["pods"]))
        if usage.pods + 1 > allowed:
            found.append(_insufficient("pods", 1, usage.pods, allowed))
    # An extended resource the node does not advertise is a cluster-level one: the kubelet leaves it out.
    wanted = {n: v for n, v in wanted.items() if n in allocatable or not _is_extended(n)}
    scalars = sorted(n for n in wanted if n not in _NAMED and n != "pods")
    for name in (*(n for n in _NAMED if n in wanted), *scalars):
        capacity = whole(name, allocatable[name]) if name in allocatable else 0
        used = usage.requested.get(name, 0)
        if wanted[name] > capacity - used:
            found.append(_insufficient(name, wanted[name], used, capacity))
    return found


def host_ports(pod: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """The (address, protocol, port) triples a pod's containers bind on the node."""
    spec = pod.get("spec") or {}
    ports = []
    for container in (*(spec.get("initContainers") or []), *(spec.get("containers") or [])):
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                ports.append(
                    (port.get("hostIP") or "0.0.0.0", port.get("protocol") or "TCP", int(port["hostPort"]))
                )
    return ports


def _ports_conflict(wanted: list[HostPort], taken: Iterable[HostPort]) -> bool:
    """NodePorts: the same protocol and port, on the same address or where either binds every address."""
    for ip, protocol, port in taken:
        for want_ip, want_protocol, want_port in wanted:
            if (port, protocol) == (want_port, want_protocol) and (
                ip == want_ip or "0.0.0.0" in (ip, want_ip)
            ):
                return True
    return False


def _predicate(name: str, reason: str) -> Rejection:
    return Rejection(name, f"Predicate {name} failed: {reason}")


def failures(
    pod: Mapping[str, Any],
    node: Mapping[str, Any],
    admitted: list[Requests] | NodeUsage,
    *,
    ports_in_use: Iterable[HostPort] = (),
    static: bool = False,
) -> list[Failure]:
    """kube's generalFilter: every reason the node cannot take `pod` beside the pods it admitted (what
    each requests, see `pod_requests`, and the host ports they hold; or their totals, `NodeUsage`, which
    carry the ports), in its order."""
    usage = admitted if isinstance(admitted, NodeUsage) else NodeUsage.of(admitted, ports_in_use)
    found = _fit(pod_requests(pod), node, usage)
    if not selector_matches(dict(pod), dict(node)):
        found.append(Failure(_predicate("NodeAffinity", reasons.NODE_SELECTOR_MISMATCH)))
    wanted_ports = host_ports(pod)
    if wanted_ports and _ports_conflict(wanted_ports, usage.ports):
        found.append(Failure(_predicate("NodePorts", _NODE_PORTS_REASON)))
    if not static and untolerated_taint(dict(pod), dict(node), effects=("NoExecute",)) is not None:
        found.append(Failure(_predicate("TaintToleration", _TAINTS_REASON)))
    return found


def os_rejection(pod: Mapping[str, Any], node: Mapping[str, Any]) -> Rejection | None:
    """The checks kube makes first, since evicting pods would not help them: the pod's OS label and field."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    node_os = ((node.get("metadata") or {}).get("labels") or {}).get(OS_LABEL) or NODE_OS
    if OS_LABEL in labels and labels[OS_LABEL] != node_os:
        return Rejection(
            "PodOSSelectorNodeLabelDoesNotMatch",
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
        )
    pod_os = ((pod.get("spec") or {}).get("os") or {}).get("name")
    if pod_os is not None and pod_os != NODE_OS:
        return Rejection("PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS")
    return None


def admit(
    pod: Mapping[str, Any],
    node: Mapping[str, Any],
    admitted: list[Requests] | NodeUsage,
    *,
    ports_in_use: Iterable[HostPort] = (),
    static: bool = False,
) -> Rejection | None:
    """None when the kubelet admits `pod` beside the pods it admitted before; otherwise kube's first
    reason to refuse it (no pod is evicted for it: see `criticalpods.handle_failure` for that)."""
    refused = os_rejection(pod, node)
    if refused is not None:
        return refused
    found = failures(pod, node, admitted, ports_in_use=ports_in_use, static=static)
    return found[0].rejection if found else None
