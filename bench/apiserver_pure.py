"""What the API server's pure helpers cost per object: selectors, Tables, strategic merge, validation."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tenantgpu.apiserver.patch import apply_strategic_merge_patch
from tenantgpu.apiserver.selectors import parse_field_selector, parse_label_selector
from tenantgpu.apiserver.tables import to_table
from tenantgpu.apiserver.validation import default, validate

_RESULTS = Path(__file__).resolve().parent / "results"


def _pods(count: int) -> list[dict[str, Any]]:
    pods = []
    for i in range(count):
        pod: dict[str, Any] = {
            "metadata": {
                "name": f"job-{i}",
                "namespace": f"team-{i % 4}",
                "labels": {"app": f"app-{i % 10}", "tier": "gpu" if i % 3 == 0 else "cpu"},
                "creationTimestamp": "2026-11-29T19:00:00Z",
            },
            "spec": {
                "nodeName": f"worker-{i % 8}" if i % 5 else "",
                "containers": [
                    {"name": "main", "image": "trainer:1.0", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                ],
            },
        }
        default("Pod", pod)
        pods.append(pod)
    return pods


def _per_item(label: str, count: int, work: Callable[[], object]) -> dict[str, float]:
    start = time.perf_counter()
    work()
    elapsed = time.perf_counter() - start
    micros = elapsed / count * 1e6
    print(f"{label:<42} {micros:9.1f} µs/object  ({count} objects, {elapsed * 1000:.1f} ms)")
    return {"microseconds_per_object": micros, "objects": count}


def main() -> None:
    pods = _pods(5000)
    labels = parse_label_selector("app in (app-1,app-2),tier=gpu")
    fields = parse_field_selector("spec.nodeName=,metadata.namespace=team-1")
    now = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
    body = {
        "metadata": {"annotations": {"hami.io/bind-phase": "success"}},
        "spec": {
            "$setElementOrder/containers": [{"name": "main"}],
            "containers": [{"name": "main", "image": "t:2"}],
        },
    }
    results = {
        "label_selector_match": _per_item(
            "label selector match",
            len(pods),
            lambda: [p for p in pods if labels.matches(p["metadata"]["labels"])],
        ),
        "field_selector_match": _per_item(
            "field selector match", len(pods), lambda: [p for p in pods if fields.matches(p)]
        ),
        "pod_table": _per_item(
            "Table row (pods, includeObject=Metadata)", len(pods), lambda: to_table("Pod", pods, now=now)
        ),
        "strategic_merge_patch": _per_item(
            "strategic merge patch (apply-shaped)",
            len(pods),
            lambda: [apply_strategic_merge_patch(p, body, "Pod") for p in pods],
        ),
        "validate_pod": _per_item("validate Pod", len(pods), lambda: [validate("Pod", p) for p in pods]),
    }
    _RESULTS.mkdir(parents=True, exist_ok=True)
    (_RESULTS / "apiserver_pure.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
