"""The Konnectivity-style tunnel: a proxy server beside each tenant API server, an agent per worker."""

import os

# grpcio turns on gRPC's fork handlers unless told otherwise. A process with busy channels that forks a
# child (the lab starting a control-plane process for a DataStore, or again after a crash) then runs
# them in the child before it execs, where they can abort it ("Check failed: next_worker->state ==
# KICKED"). The lab's children exec at once and never touch the parent's channels, so they need no
# handlers. This must run before grpc is first imported; every grpc import in the project comes
# through this package.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from tenantgpu.konnectivity.agent import (
    Backoff,
    DialPolicy,
    ProxyAgent,
    dial_as_addressed,
    mapped_dial_policy,
)
from tenantgpu.konnectivity.backends import AgentInfo, DialError, NoAgentAvailable
from tenantgpu.konnectivity.client import GrpcEgress
from tenantgpu.konnectivity.egress import Dialler, Egress, TunnelConnector
from tenantgpu.konnectivity.selector import cluster_uds_name, egress_selector_configuration
from tenantgpu.konnectivity.server import ProxyServer, TokenVerifier, service_account_username
from tenantgpu.konnectivity.wire import NO_AGENT_AVAILABLE, AgentIdentifiers

__all__ = [
    "NO_AGENT_AVAILABLE",
    "AgentIdentifiers",
    "AgentInfo",
    "Backoff",
    "DialError",
    "DialPolicy",
    "Dialler",
    "Egress",
    "GrpcEgress",
    "NoAgentAvailable",
    "ProxyAgent",
    "ProxyServer",
    "TokenVerifier",
    "TunnelConnector",
    "cluster_uds_name",
    "dial_as_addressed",
    "egress_selector_configuration",
    "mapped_dial_policy",
    "service_account_username",
]
