"""/metrics: kube-apiserver's request counter and latency histogram, read back with Prometheus' parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tenantgpu.apiserver.metrics import APIMetrics


def _samples(metrics: APIMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_requests_are_counted_by_verb_resource_and_code_and_timed_in_cumulative_buckets() -> None:
    metrics = APIMetrics(lambda: [("pods", 3, 2)])
    for seconds in (0.0005, 0.001, 0.004, 0.3):
        metrics.observe("POST", "pods", 201, seconds)
    metrics.observe("PATCH", "pods", 409, 70.0)
    samples = _samples(metrics)

    assert (
        samples[("apiserver_request_total", (("code", "201"), ("resource", "pods"), ("verb", "POST")))] == 4
    )
    assert (
        samples[("apiserver_request_total", (("code", "409"), ("resource", "pods"), ("verb", "PATCH")))] == 1
    )

    def bucket(verb: str, le: str) -> float:
        return samples[
            ("apiserver_request_duration_seconds_bucket", (("le", le), ("resource", "pods"), ("verb", verb)))
        ]

    # `le` is inclusive: 0.001 s falls in the 0.001 bucket, as Prometheus' client libraries count it.
    assert [bucket("POST", le) for le in ("0.001", "0.0025", "0.005", "0.25", "0.5", "+Inf")] == [
        2,
        2,
        3,
        3,
        4,
        4,
    ]
    assert bucket("PATCH", "60.0") == 0 and bucket("PATCH", "+Inf") == 1
    post = (("resource", "pods"), ("verb", "POST"))
    assert samples[("apiserver_request_duration_seconds_count", post)] == 4
    assert abs(samples[("apiserver_request_duration_seconds_sum", post)] - 0.3055) < 1e-9
    assert samples[("apiserver_storage_objects", (("resource", "pods"),))] == 3
    assert samples[("apiserver_registered_watchers", (("resource", "pods"),))] == 2
