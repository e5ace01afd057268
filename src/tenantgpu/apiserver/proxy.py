"""kube-apiserver's `proxy` subresources: `nodes/<node>/proxy/<path>` to the node's kubelet,
`pods/<pod>/proxy/<path>` to a pod's port and `services/<service>/proxy/<path>` to one of its endpoints,
each through the cluster egress (the tunnel).

Facts from kube (pkg/registry/core/{node,pod,service} `ResourceLocation` and `rest/proxy.go`,
apimachinery's `SplitSchemeNamePort`):
- the name segment is `name`, `name:port` or `scheme:name:port` (scheme http or https); anything else is
  `400 invalid <node|pod|service> request "<segment>"`;
- nodes: without a port, or with the kubelet's own, the request goes to the kubelet's endpoint (the
  node's address and `status.daemonEndpoints.kubeletEndpoint.Port`) over TLS with the API server's kubelet
  client certificate; another port is refused for a loopback or link-local address (`address not
  allowed`), which every simulated node has;
- pods: the port asked for, else the first container's first declared port, else the scheme's (80 or
  443); a pod without a global unicast IP is `400 address not allowed`;
- services: a port number is first turned into the name of the service port it is (`503 no service port
  <n> found for service "<s>"` if none), then an address of the service's Endpoints subset that has a
  port of that name is picked, at its port (`503 no endpoints available for service "<s>"` if none);
- the path after `proxy` (trailing slash kept) and the query go on unchanged, and the answer comes back
  as it is, status, content type and body;
- a destination out of reach is a `500` Status whose message is the dial's error (the reverse proxy's
  error handed to the request's responder, which has no reason for an error that is not a Status).
"""

from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from tenantgpu.apiserver import errors

_SCHEMES = ("", "http", "https")
# the kind each resource's refusal names (`invalid pod request "…"`)
_SINGULAR = {"nodes": "node", "pods": "pod", "services": "service"}


@dataclass(frozen=True)
class ProxyRequest:
    """A `proxy` request: the scheme, object name and port its segment asks for ("" where it names
    none), and the path with its query to send on."""

    name: str
    port: str
    path: str
    scheme: str = ""


@dataclass(frozen=True)
class Location:
    """Where a proxied request goes."""

    scheme: str
    host: str
    port: int


def split_scheme_name_port(segment: str) -> tuple[str, str, str] | None:
    """(scheme, name, port) of `name`, `name:port` or `scheme:name:port`; None when it is none of them."""
    parts = segment.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        return None
    return (scheme, name, port) if name and scheme in _SCHEMES else None


def proxy_request(plural: str, segment: str, path: str, query_string: str) -> ProxyRequest:
    """The proxied request of `path` (`…/<plural>/<segment>/proxy[/…]`, decoded)."""
    split = split_scheme_name_port(segment)
    if split is None:
        raise errors.bad_request(f'invalid {_SINGULAR.get(plural, plural)} request "{segment}"')
    scheme, name, port = split
    marker = f"/{plural}/{segment}/proxy"
    rest = path[path.find(marker) + len(marker) :] if marker in path else ""
    proxied = quote(rest if rest.startswith("/") else "/" + rest, safe="/:@!$&'()*+,;=-._~")
    if query_string:
        proxied += "?" + query_string
    return ProxyRequest(name, port, proxied, scheme)


def kubelet_endpoint(node: dict[str, Any]) -> tuple[str, int]:
    """(address, port) of a node's kubelet from its status, as kube-apiserver finds it."""
    status = node.get("status") or {}
    port = int(((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or 10250)
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    host = (
        addresses.get("InternalIP") or addresses.get("ExternalIP") or addresses.get("Hostname") or "127.0.0.1"
    )
    return host, port


def pod_location(pod: dict[str, Any], wanted: ProxyRequest) -> Location:
    """Where `pods/<pod>/proxy` goes: the pod's IP at the port asked for, its first declared one or the
    scheme's."""
    port = wanted.port
    if not port:
        for container in (pod.get("spec") or {}).get("containers") or []:
            ports = container.get("ports") or []
            if ports:
                port = str(ports[0].get("containerPort", ""))
                break
    ip = (pod.get("status") or {}).get("podIP") or ""
    if not _global_unicast(ip):
        raise errors.bad_request("address not allowed")
    scheme = wanted.scheme or "http"
    port = port or ("443" if scheme == "https" else "80")  # an address without a port: the scheme's
    if not port.isdigit():
        # kube joins a named port to the address as it is, which Go's dialer cannot resolve
        raise unreachable(f"dial tcp: address tcp/{port}: unknown port")
    return Location(scheme, ip, int(port))


def service_location(
    service: dict[str, Any], endpoints: dict[str, Any] | None, wanted: ProxyRequest, rng: random.Random
) -> Location:
    """Where `services/<service>/proxy` goes: an address of the service's endpoints that serves the port."""
    name = (service.get("metadata") or {}).get("name", "")
    port_name = wanted.port
    if port_name.isdigit():
        number = int(port_name)
        match = next(
            (p for p in (service.get("spec") or {}).get("ports") or [] if p.get("port") == number), None
        )
        if match is None:
            raise errors.service_unavailable(f'no service port {number} found for service "{name}"')
        port_name = match.get("name", "")
    subsets = (endpoints or {}).get("subsets") or []
    if not subsets:
        raise errors.service_unavailable(f'no endpoints available for service "{name}"')
    start = rng.randrange(len(subsets))
    for i in range(len(subsets)):
        subset = subsets[(start + i) % len(subsets)]
        addresses = subset.get("addresses") or []
        if not addresses:
            continue
        for port in subset.get("ports") or []:
            if port.get("name", "") == port_name:
                address = addresses[rng.randrange(len(addresses))]
                return Location(wanted.scheme or "http", address.get("ip", ""), int(port.get("port", 0)))
    segment = ":".join(p for p in (wanted.scheme, wanted.name, wanted.port) if p)
    raise errors.service_unavailable(f'no endpoints available for service "{segment}"')


def _global_unicast(ip: str) -> bool:
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return False
    return not (
        address.is_loopback or address.is_link_local or address.is_multicast or address.is_unspecified
    )


def unreachable(message: str) -> errors.APIError:
    """A destination the API server could not reach: a Status without a reason, as kube answers a plain
    error."""
    return errors.APIError(500, "", message)
