"""The proxy server's Prometheus metrics, named as upstream's `konnectivity_network_proxy_server_*`."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

NAMESPACE = "konnectivity_network_proxy"
SUBSYSTEM = "server"

# Upstream's buckets: dial latency from 1 µs to 12.5 s.
LATENCY_BUCKETS = (0.000001, 0.00001, 0.0001, 0.005, 0.025, 0.1, 0.5, 2.5, 12.5)

# Upstream's dial_failure_count reasons (pkg/server/metrics).
FAILURE_NO_AGENT = "no_agent"
FAILURE_ERROR_RESPONSE = "error_response"
FAILURE_BACKEND_CLOSE = "backend_close"
FAILURE_BACKEND_DIAL_TIMEOUT = "backend_dial_timeout"
FAILURE_FRONTEND_CLOSE = "frontend_close"


class ServerMetrics:
    """One registry per proxy server (a process may host many tenants' servers)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        common = {"namespace": NAMESPACE, "subsystem": SUBSYSTEM, "registry": self.registry}
        self.dial_duration = Histogram(
            "dial_duration_seconds",
            "Latency of dial to the remote endpoint in seconds",
            buckets=LATENCY_BUCKETS,
            **common,
        )
        self.dial_failures = Counter(
            "dial_failure_count",
            "Number of dial failures observed. Multiple failures can occur for a single dial request.",
            ["reason"],
            **common,
        )
        self.ready_backends = Gauge(
            "ready_backends", "Number of konnectivity agent connected to the proxy server", **common
        )
        self.pending_dials = Gauge(
            "pending_backend_dials", "Current number of pending backend dial requests", **common
        )
        self.established = Gauge(
            "established_connections",
            "Current number of established end-to-end connections (post-dial).",
            **common,
        )
        self.grpc_connections = Gauge(
            "grpc_connections",
            "Number of current grpc connections, partitioned by service method.",
            ["service_method"],
            **common,
        )

    def observe_backends(
        self, ready: Callable[[], int], pending: Callable[[], int], established: Callable[[], int]
    ) -> None:
        """Gauges read at scrape time from the live state, so they can never drift from it."""
        self.ready_backends.set_function(lambda: float(ready()))
        self.pending_dials.set_function(lambda: float(pending()))
        self.established.set_function(lambda: float(established()))

    def exposition(self) -> bytes:
        """The Prometheus text format, as served on upstream's admin/metrics port."""
        return generate_latest(self.registry)
