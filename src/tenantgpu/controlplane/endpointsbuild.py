"""What kube-controller-manager's `endpoints` and `endpointslice` controllers write for a Service, worked
out from the Service, its pods and their nodes: no I/O, so the rules can be checked one by one.

The Endpoints (kube 1.33, `pkg/controller/endpoint`):
- pods selected by the Service in its namespace, with a pod IP, not Succeeded or Failed; a pod being
  deleted only when the Service publishes not-ready addresses;
- an address per pod (the pod IP of the Service's first IP family, the node name, a `targetRef` to the
  pod, the hostname when `spec.hostname` is set and `spec.subdomain` names the Service), under
  `addresses` when the pod is Ready or the Service publishes not-ready addresses, else under
  `notReadyAddresses`;
- per Service port the pod's port: a number as it is, a name looked up among the ports of the pod's
  containers (and restartable init containers) of the same protocol; a pod without it is left out of
  that port only;
- the subsets repacked as `RepackSubsets` does: addresses that share the same ports grouped into one
  subset, an address not ready for a port wherever it is not ready, addresses sorted by IP and pod
  uid, ports and subsets in the order of the md5 of their Go dump (`hashutil.DeepHashObject`);
- at most 1000 addresses, ready ones first, with `endpoints.kubernetes.io/over-capacity: truncated`;
- the Service's labels, `service.kubernetes.io/headless` for a Service without a cluster IP, and
  `endpoints.kubernetes.io/managed-by: endpoint-controller`.

The EndpointSlices (`k8s.io/endpointslice`'s reconciler):
- every selected pod with a pod IP that is not Succeeded or Failed, being deleted or not, with the
  conditions ready (Ready and not being deleted, or published anyway), serving (Ready) and
  terminating (being deleted), its node's `topology.kubernetes.io/zone` as the zone;
- grouped by the pod's resolved ports (sorted by the md5 of their Go dump), at most 100 endpoints a
  slice, existing slices kept and filled before new ones are made;
- a Service without any endpoint keeps one empty placeholder slice;
- slices named by `generateName: <service>-`, labelled with the Service's labels,
  `kubernetes.io/service-name` and `endpointslice.kubernetes.io/managed-by`, owned by the Service.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tenantgpu.controlplane.conditions import parse_time
from tenantgpu.controlplane.podstate import is_ready, is_terminal

Obj = dict[str, Any]

MAX_ENDPOINTS_PER_SLICE = 100  # kube-controller-manager's --max-endpoints-per-slice default
MAX_CAPACITY = 1000  # the endpoints controller's maxCapacity
OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"
TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
HEADLESS = "service.kubernetes.io/headless"
ENDPOINTS_MANAGED_BY = "endpoints.kubernetes.io/managed-by"
ENDPOINTS_CONTROLLER = "endpoint-controller"
SERVICE_NAME = "kubernetes.io/service-name"
SLICE_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
SLICE_CONTROLLER = "endpointslice-controller.k8s.io"
MIRROR_CONTROLLER = "endpointslicemirroring-controller.k8s.io"
ZONE_LABEL = "topology.kubernetes.io/zone"


# --- which pods, which addresses ---------------------------------------------------------------------


def has_selector(service: Mapping[str, Any]) -> bool:
    """The controllers write for the Service: it selects pods and is not ExternalName."""
    spec = service.get("spec") or {}
    return spec.get("type") != "ExternalName" and bool(spec.get("selector"))


def selects(service: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """The Service's selector picks the pod, in the same namespace (GetPodServiceMemberships)."""
    selector = (service.get("spec") or {}).get("selector")
    if not selector:
        return False
    if (pod.get("metadata") or {}).get("namespace") != (service.get("metadata") or {}).get("namespace"):
        return False
    return all(((pod.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in selector.items())


def selected_pods(service: Mapping[str, Any], pods: Iterable[Obj]) -> list[Obj]:
    """The pods the Service selects, in a set order (kube's lister order is its cache's)."""
    picked = [p for p in pods if selects(service, p)]
    return sorted(picked, key=lambda p: p["metadata"].get("name") or "")


def should_be_in_endpoints(pod: Mapping[str, Any], include_terminating: bool) -> bool:
    """ShouldPodBeInEndpoints."""
    if is_terminal(dict(pod)):
        return False
    status = pod.get("status") or {}
    if not status.get("podIP") and not status.get("podIPs"):
        return False
    return include_terminating or not (pod.get("metadata") or {}).get("deletionTimestamp")


def should_set_hostname(pod: Mapping[str, Any], service: Mapping[str, Any]) -> bool:
    """ShouldSetHostname: the pod has a hostname and its subdomain is the Service, in its namespace."""
    spec = pod.get("spec") or {}
    smeta, pmeta = service.get("metadata") or {}, pod.get("metadata") or {}
    return (
        bool(spec.get("hostname"))
        and spec.get("subdomain") == smeta.get("name")
        and smeta.get("namespace") == pmeta.get("namespace")
    )


def _is_ipv6(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).version == 6
    except ValueError:
        return False


def _pod_ips(pod: Mapping[str, Any]) -> list[str]:
    return [str(p.get("ip")) for p in (pod.get("status") or {}).get("podIPs") or [] if p.get("ip")]


def service_ip_family(service: Mapping[str, Any], pod: Mapping[str, Any]) -> str:
    """The family the endpoints controller takes the pod's address from: the Service's first IP family,
    else its cluster IP's, else the pod IP's."""
    spec = service.get("spec") or {}
    families = spec.get("ipFamilies") or []
    if families:
        return str(families[0])
    cluster_ip = spec.get("clusterIP") or ""
    if cluster_ip and cluster_ip != "None":
        return "IPv6" if _is_ipv6(cluster_ip) else "IPv4"
    return "IPv6" if _is_ipv6((pod.get("status") or {}).get("podIP") or "") else "IPv4"


def find_port(pod: Mapping[str, Any], service_port: Mapping[str, Any]) -> int | None:
    """FindPort: a numeric targetPort as it is; a named one from the pod's containers' ports (then its
    restartable init containers') of the Service port's protocol; None when the pod has none."""
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, int):
        return target
    protocol = service_port.get("protocol") or "TCP"
    spec = pod.get("spec") or {}
    sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    for container in [*(spec.get("containers") or []), *sidecars]:
        for port in container.get("ports") or []:
            if port.get("name") == target and (port.get("protocol") or "TCP") == protocol:
                return int(port["containerPort"])
    return None


def is_service_ip_set(service: Mapping[str, Any]) -> bool:
    cluster_ip = (service.get("spec") or {}).get("clusterIP") or ""
    return cluster_ip not in ("", "None")


# --- Go's dump for hashing (spew %#v as k8s.io/apimachinery's dump.ForHash prints it) -----------------


def _str_ptr(value: str | None) -> str:
    return "(*string)<nil>" if value is None else f"(*string){value}"


def _dump_endpoint_port(port: Mapping[str, Any], top: bool) -> str:
    body = (
        f"{{Name:(string){port.get('name') or ''} Port:(int32){int(port.get('port') or 0)} "
        f"Protocol:(v1.Protocol){port.get('protocol') or ''} AppProtocol:{_str_ptr(port.get('appProtocol'))}}}"
    )
    return "(v1.EndpointPort)" + body if top else body


def _dump_address(address: Mapping[str, Any]) -> str:
    ref = address.get("targetRef")
    if ref is None:
        target = "(*v1.ObjectReference)<nil>"
    else:
        target = (
            f"(*v1.ObjectReference){{Kind:(string){ref.get('kind') or ''} "
            f"Namespace:(string){ref.get('namespace') or ''} Name:(string){ref.get('name') or ''} "
            f"UID:(types.UID){ref.get('uid') or ''} APIVersion:(string){ref.get('apiVersion') or ''} "
            f"ResourceVersion:(string){ref.get('resourceVersion') or ''} "
            f"FieldPath:(string){ref.get('fieldPath') or ''}}}"
        )
    # the controller always points NodeName at the pod's spec.nodeName
    return (
        f"{{IP:(string){address.get('ip') or ''} Hostname:(string){address.get('hostname') or ''} "
        f"NodeName:{_str_ptr(address.get('nodeName', ''))} TargetRef:{target}}}"
    )


def _dump_list(type_name: str, items: list[str] | None) -> str:
    return f"({type_name})" + ("<nil>" if items is None else "[" + " ".join(items) + "]")


def _dump_subset(subset: _Subset) -> str:
    return (
        "(v1.EndpointSubset){"
        f"Addresses:{_dump_list('[]v1.EndpointAddress', _maybe(subset.addresses, _dump_address))} "
        f"NotReadyAddresses:{_dump_list('[]v1.EndpointAddress', _maybe(subset.not_ready, _dump_address))} "
        f"Ports:{_dump_list('[]v1.EndpointPort', _maybe(subset.ports, lambda p: _dump_endpoint_port(p, False)))}"
        "}"
    )


def _maybe(items: list[Obj] | None, dump: Callable[[Obj], str]) -> list[str] | None:
    return None if items is None else [dump(i) for i in items]


def _dump_slice_port(port: Mapping[str, Any]) -> str:
    def ptr(type_name: str, key: str) -> str:
        value = port.get(key)
        return f"(*{type_name})<nil>" if value is None else f"(*{type_name}){value}"

    return (
        f"(v1.EndpointPort){{Name:{ptr('string', 'name')} Protocol:{ptr('v1.Protocol', 'protocol')} "
        f"Port:{ptr('int32', 'port')} AppProtocol:{ptr('string', 'appProtocol')}}}"
    )


def _md5(text: str) -> bytes:
    return hashlib.md5(text.encode(), usedforsecurity=False).digest()


# --- Endpoints ---------------------------------------------------------------------------------------


@dataclass
class _Subset:
    addresses: list[Obj] | None = None  # None: Go's nil slice, which dumps differently from []
    not_ready: list[Obj] | None = None
    ports: list[Obj] | None = None


def endpoint_address(service: Mapping[str, Any], pod: Mapping[str, Any]) -> Obj | None:
    """podToEndpointAddressForService, with the hostname ShouldSetHostname allows; None when the pod has
    no IP of the Service's family."""
    want_v6 = service_ip_family(service, pod) == "IPv6"
    ip = next((i for i in _pod_ips(pod) if _is_ipv6(i) == want_v6), None)
    if ip is None:
        return None
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    address: Obj = {"ip": str(ipaddress.ip_address(ip))}
    if should_set_hostname(pod, service):
        address["hostname"] = spec["hostname"]
    address["nodeName"] = spec.get("nodeName") or ""
    address["targetRef"] = {
        "kind": "Pod",
        "namespace": meta.get("namespace") or "",
        "name": meta.get("name") or "",
        "uid": meta.get("uid") or "",
    }
    return address


def _endpoint_port(service_port: Mapping[str, Any], number: int) -> Obj:
    port: Obj = {"name": service_port.get("name") or "", "port": number}
    port["protocol"] = service_port.get("protocol") or "TCP"
    if service_port.get("appProtocol") is not None:
        port["appProtocol"] = service_port["appProtocol"]
    return port


def _port_key(port: Mapping[str, Any]) -> tuple[Any, ...]:
    return (port.get("name") or "", port.get("port"), port.get("protocol") or "", port.get("appProtocol"))


def _address_key(address: Mapping[str, Any]) -> tuple[str, str]:
    return (address.get("ip") or "", (address.get("targetRef") or {}).get("uid") or "")


def _address_order(address: Mapping[str, Any]) -> tuple[bytes, int, str]:
    """LessEndpointAddress: by IP (bytewise), then an address without a targetRef first, then the uid."""
    ref = address.get("targetRef")
    return ((address.get("ip") or "").encode(), 0 if ref is None else 1, (ref or {}).get("uid") or "")


def repack_subsets(subsets: list[_Subset]) -> list[_Subset]:
    """RepackSubsets then SortSubsets."""
    first: dict[tuple[str, str], Obj] = {}  # the first address seen for each (ip, uid)
    by_port: dict[tuple[Any, ...], dict[tuple[str, str], bool]] = {}
    port_of: dict[tuple[Any, ...], Obj | None] = {}

    def note(address: Obj, port: Obj | None, ready: bool) -> None:
        key = _address_key(address)
        first.setdefault(key, address)
        pkey = ("sentinel",) if port is None else _port_key(port)
        port_of.setdefault(pkey, port)
        readiness = by_port.setdefault(pkey, {})
        if readiness.get(key, True):  # not ready for a port anywhere: not ready for it
            readiness[key] = ready

    for subset in subsets:
        for port in subset.ports or [None]:
            for address in subset.addresses or []:
                note(address, port, True)
            for address in subset.not_ready or []:
                note(address, port, False)
    groups: dict[frozenset[tuple[tuple[str, str], bool]], list[Obj] | None] = {}
    for pkey, readiness in by_port.items():
        group = frozenset(readiness.items())
        port = port_of[pkey]
        if port is not None:
            groups[group] = [*(groups.get(group) or []), port]
        else:
            groups.setdefault(group, None)
    final: list[_Subset] = []
    for group, ports in groups.items():
        ready = [first[k] for k, r in group if r]
        not_ready = [first[k] for k, r in group if not r]
        final.append(
            _Subset(
                sorted(ready, key=_address_order) or None,
                sorted(not_ready, key=_address_order) or None,
                None if ports is None else sorted(ports, key=lambda p: _md5(_dump_endpoint_port(p, True))),
            )
        )
    return sorted(final, key=lambda s: _md5(_dump_subset(s)))


def _truncate(subsets: list[_Subset]) -> bool:
    """truncateEndpoints: keep at most MAX_CAPACITY addresses, spread over the subsets in proportion,
    ready ones first; whether anything was cut."""
    total_ready = sum(len(s.addresses or []) for s in subsets)
    total_not_ready = sum(len(s.not_ready or []) for s in subsets)
    if total_ready + total_not_ready <= MAX_CAPACITY:
        return False
    truncate_ready = total_ready > MAX_CAPACITY
    allowed = MAX_CAPACITY if truncate_ready else MAX_CAPACITY - total_ready
    total = total_ready if truncate_ready else total_not_ready
    can_add = allowed
    for subset in subsets:
        count = len((subset.addresses if truncate_ready else subset.not_ready) or [])
        to_add = min(math.ceil(count / total * allowed), can_add)
        if truncate_ready:
            subset.addresses = (subset.addresses or [])[:to_add]
            subset.not_ready = []
            can_add -= len(subset.addresses)
        else:
            subset.not_ready = (subset.not_ready or [])[:to_add]
            can_add -= len(subset.not_ready)
    return True


def _subset_json(subset: _Subset) -> Obj:
    out: Obj = {}
    if subset.addresses:
        out["addresses"] = subset.addresses
    if subset.not_ready:
        out["notReadyAddresses"] = subset.not_ready
    if subset.ports:
        out["ports"] = subset.ports
    return out


@dataclass
class EndpointsContent:
    """What the endpoints controller works out for a Service: the subsets (JSON), whether they were cut
    to MAX_CAPACITY, and how many addresses are ready and not."""

    subsets: list[Obj]
    truncated: bool
    ready: int
    not_ready: int


def endpoints_subsets(service: Mapping[str, Any], pods: Iterable[Obj]) -> EndpointsContent:
    """The subsets of the Service's Endpoints, from the pods it selects (syncService's loop)."""
    spec = service.get("spec") or {}
    publish = bool(spec.get("publishNotReadyAddresses"))
    service_ports = spec.get("ports") or []
    subsets: list[_Subset] = []
    for pod in selected_pods(service, pods):
        if not should_be_in_endpoints(pod, publish):
            continue
        address = endpoint_address(service, pod)
        if address is None:
            continue
        ready = publish or is_ready(pod)

        def add(ports: list[Obj], address: Obj = address, ready: bool = ready) -> None:
            if ready:
                subsets.append(_Subset([address], None, ports))
            else:
                subsets.append(_Subset(None, [address], ports))

        if not service_ports:
            if spec.get("clusterIP") == "None":
                add([])  # a headless Service may have no ports
            continue
        for service_port in service_ports:
            number = find_port(pod, service_port)
            if number is not None:
                add([_endpoint_port(service_port, number)])
    packed = repack_subsets(subsets)
    cut = _truncate(packed)
    return EndpointsContent(
        [s for s in (_subset_json(s) for s in packed) if s] if packed else [],
        cut,
        sum(len(s.addresses or []) for s in packed),
        sum(len(s.not_ready or []) for s in packed),
    )


def endpoints_labels(service: Mapping[str, Any]) -> dict[str, str]:
    """The labels the endpoints controller gives the Service's Endpoints."""
    labels = dict((service.get("metadata") or {}).get("labels") or {})
    if is_service_ip_set(service):
        labels.pop(HEADLESS, None)
    else:
        labels[HEADLESS] = ""
    labels[ENDPOINTS_MANAGED_BY] = ENDPOINTS_CONTROLLER
    return labels


def _labels_correct(current: Mapping[str, str], service_labels: Mapping[str, str]) -> bool:
    """labelsCorrectForEndpoints."""
    if current.get(ENDPOINTS_MANAGED_BY) != ENDPOINTS_CONTROLLER:
        return False
    skipped = 0
    for key, value in current.items():
        if key in (HEADLESS, ENDPOINTS_MANAGED_BY):
            skipped += 1
        elif service_labels.get(key) != value:
            return False
    return len(service_labels) == len(current) - skipped


def _without_ref_versions(subsets: list[Obj]) -> list[Obj]:
    def address(a: Obj) -> Obj:
        if "targetRef" not in a:
            return a
        ref = {k: v for k, v in (a["targetRef"] or {}).items() if k != "resourceVersion"}
        return {**a, "targetRef": ref}

    return [
        {
            **s,
            **{k: [address(a) for a in s[k]] for k in ("addresses", "notReadyAddresses") if k in s},
        }
        for s in subsets
    ]


def go_time(ts: float) -> str:
    """time.Time.UTC().Format(time.RFC3339Nano): no fraction when whole, else without trailing zeros."""
    moment = datetime.fromtimestamp(ts, UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += "." + f"{moment.microsecond:06d}".rstrip("0")
    return text + "Z"


def desired_endpoints(
    service: Mapping[str, Any],
    pods: Iterable[Obj],
    current: Mapping[str, Any] | None,
    trigger_time: float | None,
) -> Obj | None:
    """The Endpoints to write for the Service (`current` as stored, None when missing), or None when
    the stored one is right already: its subsets (ignoring the pods' resourceVersions), its labels and
    its over-capacity annotation, as kube compares before it writes."""
    content = endpoints_subsets(service, pods)
    service_labels = (service.get("metadata") or {}).get("labels") or {}
    if current is not None:
        annotations = (current.get("metadata") or {}).get("annotations") or {}
        stored = current.get("subsets") or []
        total = sum(len(s.get("addresses") or []) + len(s.get("notReadyAddresses") or []) for s in stored)
        capacity_right = total <= MAX_CAPACITY and OVER_CAPACITY not in annotations
        if (
            _without_ref_versions(stored) == _without_ref_versions(content.subsets)
            and _labels_correct((current.get("metadata") or {}).get("labels") or {}, service_labels)
            and capacity_right
        ):
            return None
    smeta = service.get("metadata") or {}
    if current is not None:
        body: Obj = {**current, "metadata": dict(current.get("metadata") or {})}
    else:
        body = {"metadata": {"name": smeta.get("name"), "namespace": smeta.get("namespace")}}
    body["apiVersion"], body["kind"] = "v1", "Endpoints"
    meta = body["metadata"]
    annotations = dict(meta.get("annotations") or {})
    if trigger_time is not None:
        annotations[TRIGGER_TIME] = go_time(trigger_time)
    else:
        annotations.pop(TRIGGER_TIME, None)
    if content.truncated:
        annotations[OVER_CAPACITY] = "truncated"
    else:
        annotations.pop(OVER_CAPACITY, None)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    meta["labels"] = endpoints_labels(service)
    body["subsets"] = content.subsets
    if not content.subsets:
        body.pop("subsets")
    return body


# --- the trigger time ----------------------------------------------------------------------------------


@dataclass
class TriggerTimes:
    """TriggerTimeTracker: when the last change a sync reflects happened, for the
    `endpoints.kubernetes.io/last-change-trigger-time` annotation. The first sync of a Service after
    the controller starts reports its creation; later ones the earliest pod Ready transition (or
    Service creation) newer than what the previous sync saw, or None when nothing changed."""

    states: dict[tuple[str, str], tuple[float | None, dict[str, float]]] = field(default_factory=dict)

    def compute(self, service: Mapping[str, Any], pods: Iterable[Obj]) -> float | None:
        meta = service.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        known = key in self.states
        last_service, last_pods = self.states.get(key, (None, {}))
        earliest: float | None = None
        pod_times: dict[str, float] = {}
        for pod in pods:
            when = _ready_transition(pod)
            if when is None:
                continue
            name = pod["metadata"].get("name") or ""
            pod_times[name] = when
            if name not in last_pods or when > last_pods[name]:
                earliest = when if earliest is None else min(earliest, when)
        created = parse_time(meta.get("creationTimestamp"))
        if created is not None and (last_service is None or created > last_service):
            earliest = created if earliest is None else min(earliest, created)
        self.states[key] = (created, pod_times)
        if not known:
            return created
        return earliest

    def forget(self, namespace: str, name: str) -> None:
        self.states.pop((namespace, name), None)


def _ready_transition(pod: Mapping[str, Any]) -> float | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return parse_time(condition.get("lastTransitionTime"))
    return None


# --- EndpointSlices --------------------------------------------------------------------------------


def address_types(service: Mapping[str, Any]) -> list[str]:
    """getAddressTypesForService: from ipFamilies, else the cluster IP's family, else both."""
    spec = service.get("spec") or {}
    kinds = [
        {"IPv4": "IPv4", "IPv6": "IPv6"}[f] for f in spec.get("ipFamilies") or [] if f in ("IPv4", "IPv6")
    ]
    if kinds:
        return list(dict.fromkeys(kinds))
    if is_service_ip_set(service):
        return ["IPv6" if _is_ipv6(spec["clusterIP"]) else "IPv4"]
    return ["IPv4", "IPv6"]


def slice_ports(service: Mapping[str, Any], pod: Mapping[str, Any]) -> list[Obj]:
    """getEndpointPorts, in the order NewPortMapKey leaves them (by the hash of each port)."""
    spec = service.get("spec") or {}
    if not spec.get("ports") and spec.get("clusterIP") == "None":
        return []
    ports: list[Obj] = []
    for service_port in spec.get("ports") or []:
        number = find_port(pod, service_port)
        if number is None:
            continue
        port: Obj = {
            "name": service_port.get("name") or "",
            "port": number,
            "protocol": service_port.get("protocol") or "TCP",
        }
        if service_port.get("appProtocol") is not None:
            port["appProtocol"] = service_port["appProtocol"]
        ports.append(port)
    return sort_slice_ports(ports)


def sort_slice_ports(ports: Iterable[Mapping[str, Any]]) -> list[Obj]:
    return [dict(p) for p in sorted(ports, key=lambda p: _md5(_dump_slice_port(p)))]


def _ports_key(ports: Iterable[Mapping[str, Any]]) -> tuple[tuple[Any, ...], ...]:
    return tuple(
        sorted((p.get("name"), p.get("port"), p.get("protocol"), p.get("appProtocol")) for p in ports)
    )


def slice_endpoint(
    pod: Mapping[str, Any], node: Mapping[str, Any] | None, service: Mapping[str, Any], address_type: str
) -> Obj:
    """podToEndpoint."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    serving = is_ready(dict(pod))
    terminating = bool(meta.get("deletionTimestamp"))
    ready = bool((service.get("spec") or {}).get("publishNotReadyAddresses")) or (serving and not terminating)
    want_v6 = address_type == "IPv6"
    endpoint: Obj = {
        "addresses": [str(ipaddress.ip_address(i)) for i in _pod_ips(pod) if _is_ipv6(i) == want_v6],
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
    }
    if should_set_hostname(pod, service):
        endpoint["hostname"] = spec["hostname"]
    endpoint["targetRef"] = {
        "kind": "Pod",
        "namespace": meta.get("namespace") or "",
        "name": meta.get("name") or "",
        "uid": meta.get("uid") or "",
    }
    if spec.get("nodeName"):
        endpoint["nodeName"] = spec["nodeName"]
    zone = ((node or {}).get("metadata") or {}).get("labels", {}).get(ZONE_LABEL)
    if zone:
        endpoint["zone"] = zone
    return endpoint


def _endpoint_key(endpoint: Mapping[str, Any]) -> tuple[Any, ...]:
    """The identity the reconciler's EndpointSet hashes: addresses, hostname and the pod's name."""
    ref = endpoint.get("targetRef") or {}
    return (
        tuple(sorted(endpoint.get("addresses") or [])),
        endpoint.get("hostname") or "",
        ref.get("namespace") or "",
        ref.get("name") or "",
    )


def _equal_beyond_key(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """EndpointsEqualBeyondHash: node, zone, the three conditions and the targetRef (without its
    resourceVersion)."""

    def ref(e: Mapping[str, Any]) -> Any:
        r = e.get("targetRef")
        return None if r is None else {k: v for k, v in r.items() if k != "resourceVersion" and v}

    conditions_a, conditions_b = a.get("conditions") or {}, b.get("conditions") or {}
    return (
        a.get("nodeName") == b.get("nodeName")
        and a.get("zone") == b.get("zone")
        and all(conditions_a.get(c) == conditions_b.get(c) for c in ("ready", "serving", "terminating"))
        and ref(a) == ref(b)
    )


def slice_labels(
    existing: Mapping[str, str], service: Mapping[str, Any], controller: str
) -> tuple[dict[str, str], bool]:
    """setEndpointSliceLabels: the Service's labels (without the reserved keys), headless or not, the
    service name and the manager; and whether the slice's own (non-reserved) labels differ."""
    reserved = (SERVICE_NAME, SLICE_MANAGED_BY, HEADLESS)
    mine = {k: v for k, v in existing.items() if k not in reserved}
    wanted = {
        k: v for k, v in ((service.get("metadata") or {}).get("labels") or {}).items() if k not in reserved
    }
    changed = mine != wanted
    if is_service_ip_set(service):
        wanted.pop(HEADLESS, None)
    else:
        wanted[HEADLESS] = ""
    wanted[SERVICE_NAME] = (service.get("metadata") or {}).get("name") or ""
    wanted[SLICE_MANAGED_BY] = controller
    return wanted, changed


def service_owner_reference(service: Mapping[str, Any]) -> Obj:
    """metav1.NewControllerRef(service, v1 Service)."""
    meta = service.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def slice_name_prefix(service_name: str) -> str:
    """getEndpointSlicePrefix: `<service>-` (a Service's name, a DNS label, always makes a valid one)."""
    return f"{service_name}-"


def new_slice(service: Mapping[str, Any], ports: list[Obj], address_type: str, controller: str) -> Obj:
    """newEndpointSlice: empty, named by generateName, owned by the Service."""
    meta = service.get("metadata") or {}
    labels, _ = slice_labels({}, service, controller)
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "generateName": slice_name_prefix(meta.get("name") or ""),
            "namespace": meta.get("namespace"),
            "labels": labels,
            "ownerReferences": [service_owner_reference(service)],
        },
        "addressType": address_type,
        "endpoints": [],
        "ports": ports,
    }


def owned_by_service(slice_: Mapping[str, Any], service: Mapping[str, Any]) -> bool:
    uid = (service.get("metadata") or {}).get("uid")
    return any(
        o.get("uid") == uid and o.get("kind") == "Service" and o.get("apiVersion") == "v1"
        for o in (slice_.get("metadata") or {}).get("ownerReferences") or []
    )


@dataclass
class SlicePlan:
    """What the reconciler writes: slices to create (by generateName), to update (whole), to delete;
    and why pods were left out (a pod whose node is missing), which makes kube retry the sync."""

    create: list[Obj] = field(default_factory=list)
    update: list[Obj] = field(default_factory=list)
    delete: list[Obj] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.create or self.update or self.delete)


def _is_placeholder(slice_: Mapping[str, Any], placeholder: Mapping[str, Any]) -> bool:
    """placeholderSliceCompare: the same address type, no endpoints and no ports, the same namespace
    and labels (its ObjectMeta rule compares nothing else of the metadata)."""
    meta, other = slice_.get("metadata") or {}, placeholder.get("metadata") or {}
    return (
        slice_.get("addressType") == placeholder.get("addressType")
        and not slice_.get("endpoints")
        and not slice_.get("ports")
        and meta.get("namespace") == other.get("namespace")
        and (meta.get("labels") or {}) == (other.get("labels") or {})
    )


def plan_slices(
    service: Mapping[str, Any],
    pods: Iterable[Obj],
    node: Callable[[str], Obj | None],
    existing: Iterable[Obj],
    *,
    trigger_time: float | None = None,
    max_per_slice: int = MAX_ENDPOINTS_PER_SLICE,
    controller: str = SLICE_CONTROLLER,
) -> SlicePlan:
    """The reconciler's Reconcile for one Service: `existing` are the slices this controller manages
    for it (labelled with its name and manager, not being deleted)."""
    plan = SlicePlan()
    kinds = address_types(service)
    by_type: dict[str, list[Obj]] = {}
    for slice_ in existing:
        if slice_.get("addressType") not in kinds:
            plan.delete.append(slice_)
        else:
            by_type.setdefault(str(slice_.get("addressType")), []).append(slice_)
    selected = selected_pods(service, pods)
    stale_deletes = list(plan.delete)
    plan.delete = []
    for kind in kinds:
        _plan_address_type(
            service, selected, node, by_type.get(kind, []), kind, max_per_slice, controller, plan
        )
    plan.delete.extend(stale_deletes)
    annotate = trigger_time is not None
    for slice_ in [*plan.create, *plan.update]:
        annotations = dict(slice_["metadata"].get("annotations") or {})
        if annotate:
            annotations[TRIGGER_TIME] = go_time(trigger_time)  # type: ignore[arg-type]
        else:
            annotations.pop(TRIGGER_TIME, None)
        slice_["metadata"]["annotations"] = annotations
        if not annotations:
            del slice_["metadata"]["annotations"]
    return plan


def _plan_address_type(
    service: Mapping[str, Any],
    pods: list[Obj],
    node: Callable[[str], Obj | None],
    existing: list[Obj],
    address_type: str,
    max_per_slice: int,
    controller: str,
    plan: SlicePlan,
) -> None:
    """reconcileByAddressType, then finalize's reuse of deleted slices' names."""
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    to_create: list[Obj] = []
    to_update: list[Obj] = []
    to_delete: list[Obj] = []
    existing_by_ports: dict[tuple[Any, ...], list[Obj]] = {}
    for slice_ in existing:
        if owned_by_service(slice_, service):
            existing_by_ports.setdefault(_ports_key(slice_.get("ports") or []), []).append(slice_)
        else:
            to_delete.append(slice_)
    desired: dict[tuple[Any, ...], dict[tuple[Any, ...], Obj]] = {}
    ports_of: dict[tuple[Any, ...], list[Obj]] = {}
    for pod in pods:
        if not should_be_in_endpoints(pod, True):
            continue
        ports = slice_ports(service, pod)
        key = _ports_key(ports)
        wanted = desired.setdefault(key, {})
        ports_of.setdefault(key, ports)
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        found = node(node_name) if node_name else None
        if found is None and not publish:
            meta, smeta = pod["metadata"], service.get("metadata") or {}
            plan.errors.append(
                f"skipping Pod {meta.get('name')} for Service {smeta.get('namespace')}/{smeta.get('name')}: "
                f"Node {node_name} Not Found"
            )
            continue
        endpoint = slice_endpoint(pod, found, service, address_type)
        if endpoint["addresses"]:
            wanted[_endpoint_key(endpoint)] = endpoint
    for key, wanted in desired.items():
        created, updated, deleted = _plan_port_mapping(
            service,
            existing_by_ports.get(key, []),
            wanted,
            ports_of[key],
            address_type,
            max_per_slice,
            controller,
        )
        to_create += created
        to_update += updated
        to_delete += deleted
    for key, slices in existing_by_ports.items():
        if key not in desired:
            to_delete += slices
    if len(existing) == len(to_delete) and not to_create:
        placeholder = new_slice(service, [], address_type, controller)
        if len(to_delete) == 1 and _is_placeholder(to_delete[0], placeholder):
            to_delete = []
        else:
            to_create.append(placeholder)
    # finalize: a slice to create takes the name of one to delete, and is written over it
    i = 0
    while i < len(to_delete) and to_create:
        old = to_delete[i]
        if old.get("addressType") == to_create[-1]["addressType"] and owned_by_service(old, service):
            fresh = to_create.pop()
            fresh["metadata"]["name"] = old["metadata"]["name"]
            fresh["metadata"].pop("generateName", None)
            to_update.append(fresh)
            del to_delete[i]
        else:
            i += 1
    plan.create += to_create
    plan.update += to_update
    plan.delete += to_delete


def _plan_port_mapping(
    service: Mapping[str, Any],
    existing: list[Obj],
    wanted: dict[tuple[Any, ...], Obj],
    ports: list[Obj],
    address_type: str,
    max_per_slice: int,
    controller: str,
) -> tuple[list[Obj], list[Obj], list[Obj]]:
    """reconcileByPortMapping: keep what existing slices hold and still want, fill the slices being
    updated, then the unchanged slice that fits best, then new ones."""
    wanted = dict(wanted)
    by_name: dict[str, Obj] = {}
    unchanged: list[str] = []
    to_update: list[str] = []
    to_delete: list[str] = []
    for slice_ in existing:
        name = slice_["metadata"]["name"]
        by_name[name] = slice_
        kept: list[Obj] = []
        changed = False
        for endpoint in slice_.get("endpoints") or []:
            got = wanted.pop(_endpoint_key(endpoint), None)
            if got is not None:
                kept.append(got)
                changed = changed or not _equal_beyond_key(got, endpoint)
        labels, labels_changed = slice_labels(
            (slice_.get("metadata") or {}).get("labels") or {}, service, controller
        )
        if changed or len(kept) != len(slice_.get("endpoints") or []):
            if not kept:
                to_delete.append(name)
            else:
                copy = _copy_slice(slice_)
                copy["endpoints"] = kept
                copy["metadata"]["labels"] = labels
                by_name[name] = copy
                to_update.append(name)
        elif labels_changed:
            copy = _copy_slice(slice_)
            copy["metadata"]["labels"] = labels
            by_name[name] = copy
            to_update.append(name)
        else:
            unchanged.append(name)
    pending = list(wanted.values())
    if pending and to_update:
        for name in sorted(to_update, key=lambda n: -len(by_name[n]["endpoints"])):
            slice_ = by_name[name]
            while pending and len(slice_["endpoints"]) < max_per_slice:
                slice_["endpoints"].append(pending.pop(0))
    created: list[Obj] = []
    while pending:
        fill: Obj | None = None
        if len(pending) < max_per_slice and unchanged:
            fill = _slice_to_fill([by_name[n] for n in unchanged], len(pending), max_per_slice)
        if fill is None:
            fill = new_slice(service, ports, address_type, controller)
        else:
            fill = _copy_slice(fill)
            by_name[fill["metadata"]["name"]] = fill
        while pending and len(fill["endpoints"]) < max_per_slice:
            fill["endpoints"].append(pending.pop(0))
        name = fill["metadata"].get("name")
        if name:
            if name not in to_update:
                to_update.append(name)
            if name in unchanged:
                unchanged.remove(name)
        else:
            created.append(fill)
    return created, [by_name[n] for n in to_update], [by_name[n] for n in to_delete]


def _copy_slice(slice_: Mapping[str, Any]) -> Obj:
    copy = dict(slice_)
    copy["metadata"] = dict(slice_.get("metadata") or {})
    copy["endpoints"] = list(slice_.get("endpoints") or [])
    return copy


def _slice_to_fill(slices: list[Obj], count: int, max_per_slice: int) -> Obj | None:
    """getSliceToFill: the slice the pending endpoints fill most closely without overflowing it."""
    closest, best = max_per_slice, None
    for slice_ in slices:
        diff = max_per_slice - (count + len(slice_.get("endpoints") or []))
        if 0 <= diff < closest:
            closest, best = diff, slice_
            if diff == 0:
                return best
    return best


# --- which Services a pod change concerns ------------------------------------------------------------


def pod_endpoints_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[bool, bool]:
    """podEndpointsChanged: (what the endpoints show changed, the labels or hostname/subdomain changed)."""
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    labels_changed = (old_meta.get("labels") or {}) != (new_meta.get("labels") or {}) or any(
        old_spec.get(k) != new_spec.get(k) for k in ("hostname", "subdomain")
    )
    if old_meta.get("deletionTimestamp") != new_meta.get("deletionTimestamp"):
        return True, labels_changed
    if is_ready(dict(old)) != is_ready(dict(new)):
        return True, labels_changed
    return _pod_ips(old) != _pod_ips(new), labels_changed


def services_for_pod_change(
    services: Iterable[Mapping[str, Any]], old: Mapping[str, Any] | None, new: Mapping[str, Any]
) -> set[tuple[str, str]]:
    """The (namespace, name) of the Services to sync after a pod event (GetPodServiceMemberships and
    GetServicesToUpdateOnPodChange); `old` None for an add or a delete."""
    listed = list(services)

    def members(pod: Mapping[str, Any]) -> set[tuple[str, str]]:
        return {
            ((s.get("metadata") or {}).get("namespace") or "", (s.get("metadata") or {}).get("name") or "")
            for s in listed
            if selects(s, pod)
        }

    if old is None:
        return members(new)
    if (old.get("metadata") or {}).get("resourceVersion") == (new.get("metadata") or {}).get(
        "resourceVersion"
    ):
        return set()
    changed, labels_changed = pod_endpoints_changed(old, new)
    if not changed and not labels_changed:
        return set()
    now = members(new)
    if not labels_changed:
        return now
    before = members(old)
    return now | before if changed else now ^ before


__all__ = [
    "address_types",
    "desired_endpoints",
    "endpoints_subsets",
    "find_port",
    "has_selector",
    "plan_slices",
    "services_for_pod_change",
]
