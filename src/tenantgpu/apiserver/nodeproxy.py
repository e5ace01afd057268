"""kube-apiserver's node proxy: `/api/v1/nodes/<node>/proxy/<path>` passed on to the node's kubelet.

Facts from kube (pkg/registry/core/node/rest/proxy.go, node/strategy.go `ResourceLocation`,
apimachinery's `SplitSchemeNamePort`):
- the name segment is `node`, `node:port` or `scheme:node:port` (scheme http or https); anything else is
  `400 invalid node request "<segment>"`;
- without a port, or with the kubelet's own, the request goes to the kubelet's endpoint (the node's
  address and `status.daemonEndpoints.kubeletEndpoint.Port`) over TLS with the API server's kubelet client
  certificate; another port is refused for a loopback or link-local address (`address not allowed`), which
  every simulated node has;
- the path after `proxy` (trailing slash kept) and the query go to the kubelet unchanged, and its answer
  comes back as it is, status, content type and body;
- a kubelet out of reach is a `500` Status whose message is the dial's error (the reverse proxy's error
  handed to the request's responder, which has no reason for an error that is not a Status).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from tenantgpu.apiserver import errors

_SCHEMES = ("", "http", "https")


@dataclass(frozen=True)
class ProxyRequest:
    """Where a `nodes/proxy` request goes: the node, the port asked for (None: the kubelet's) and the
    path with its query."""

    node: str
    port: int | None
    path: str


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


def proxy_request(segment: str, path: str, query_string: str) -> ProxyRequest:
    """The proxied request of `path` (`/api/v1/nodes/<segment>/proxy[/…]`, decoded)."""
    split = split_scheme_name_port(segment)
    if split is None:
        raise errors.bad_request(f'invalid node request "{segment}"')
    _, name, port = split
    marker = f"/nodes/{segment}/proxy"
    rest = path[path.find(marker) + len(marker) :] if marker in path else ""
    proxied = quote(rest if rest.startswith("/") else "/" + rest, safe="/:@!$&'()*+,;=-._~")
    if query_string:
        proxied += "?" + query_string
    return ProxyRequest(name, int(port) if port.isdigit() else None, proxied)


def kubelet_endpoint(node: dict[str, Any]) -> tuple[str, int]:
    """(address, port) of a node's kubelet from its status, as kube-apiserver finds it."""
    status = node.get("status") or {}
    port = int(((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or 10250)
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    host = (
        addresses.get("InternalIP") or addresses.get("ExternalIP") or addresses.get("Hostname") or "127.0.0.1"
    )
    return host, port


def unreachable(message: str) -> errors.APIError:
    """A kubelet the API server could not reach: a Status without a reason, as kube answers a plain error."""
    return errors.APIError(500, "", message)
