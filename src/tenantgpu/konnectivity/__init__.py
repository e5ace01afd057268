"""The Konnectivity-style tunnel: a proxy server beside each tenant API server, an agent per worker."""

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
