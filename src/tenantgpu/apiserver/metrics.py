"""Prometheus metrics of one API server, in its own registry (many servers share one process)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0)


class _StorageCollector(Collector):
    def __init__(self, counts: Callable[[], Iterable[tuple[str, int, int]]]) -> None:
        self._counts = counts

    def collect(self):  # type: ignore[no-untyped-def]
        objects = GaugeMetricFamily(
            "apiserver_storage_objects", "Number of stored objects per resource", labels=["resource"]
        )
        watchers = GaugeMetricFamily(
            "apiserver_registered_watchers", "Number of open watches per resource", labels=["resource"]
        )
        for resource, stored, watching in self._counts():
            objects.add_metric([resource], stored)
            watchers.add_metric([resource], watching)
        yield objects
        yield watchers


class APIMetrics:
    """Request counters and latencies named as kube-apiserver names them."""

    def __init__(self, counts: Callable[[], Iterable[tuple[str, int, int]]]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._requests = Counter(
            "apiserver_request_total",
            "Counter of apiserver requests broken out by verb, resource and HTTP response code",
            ["verb", "resource", "code"],
            registry=self.registry,
        )
        self._latency = Histogram(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb and resource",
            ["verb", "resource"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_StorageCollector(counts))
        self._children: dict[tuple[str, str, int], tuple[object, object]] = {}

    def observe(self, verb: str, resource: str, code: int, seconds: float) -> None:
        key = (verb, resource, code)
        children = self._children.get(key)
        if children is None:
            children = (
                self._requests.labels(verb, resource, str(code)),
                self._latency.labels(verb, resource),
            )
            self._children[key] = children
        children[0].inc()  # type: ignore[attr-defined]
        children[1].observe(seconds)  # type: ignore[attr-defined]

    def render(self) -> bytes:
        return generate_latest(self.registry)
