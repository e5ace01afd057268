"""Prometheus metrics of one API server, in its own registry (many servers share one process)."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0)
_BUCKET_LABELS = (*(floatToGoString(b) for b in _BUCKETS), "+Inf")  # the `le` label of each bucket


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


class _RequestCollector(Collector):
    """`apiserver_request_total` and `apiserver_request_duration_seconds` from plain counts.

    Every request is observed, so the counting is plain dict and list arithmetic on the event loop's
    thread; prometheus_client's own Counter and Histogram take a lock per increment (about 2 % of an API
    server's CPU under load). The exposition is still prometheus_client's.
    """

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, int], int] = {}
        # (verb, resource) → [count per bucket (the last is +Inf), sum of seconds]
        self.latencies: dict[tuple[str, str], list[Any]] = {}

    def collect(self):  # type: ignore[no-untyped-def]
        requests = CounterMetricFamily(
            "apiserver_request_total",
            "Counter of apiserver requests broken out by verb, resource and HTTP response code",
            labels=["verb", "resource", "code"],
        )
        for (verb, resource, code), count in self.requests.items():
            requests.add_metric([verb, resource, str(code)], count)
        latency = HistogramMetricFamily(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb and resource",
            labels=["verb", "resource"],
        )
        for (verb, resource), (counts, total) in self.latencies.items():
            cumulative = itertools.accumulate(counts)
            latency.add_metric([verb, resource], list(zip(_BUCKET_LABELS, cumulative, strict=True)), total)
        yield requests
        yield latency


class APIMetrics:
    """Request counters and latencies named as kube-apiserver names them."""

    def __init__(self, counts: Callable[[], Iterable[tuple[str, int, int]]]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._collector = _RequestCollector()
        self.registry.register(self._collector)
        self.registry.register(_StorageCollector(counts))

    def observe(self, verb: str, resource: str, code: int, seconds: float) -> None:
        requests = self._collector.requests
        key = (verb, resource, code)
        requests[key] = requests.get(key, 0) + 1
        latency = self._collector.latencies.get((verb, resource))
        if latency is None:
            latency = self._collector.latencies[(verb, resource)] = [[0] * (len(_BUCKETS) + 1), 0.0]
        latency[0][bisect.bisect_left(_BUCKETS, seconds)] += 1
        latency[1] += seconds

    def render(self) -> bytes:
        return generate_latest(self.registry)
