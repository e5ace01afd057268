"""The arithmetic and orderings the workload controllers take from kube, without an API server."""

from __future__ import annotations

from typing import Any

import pytest

from tenantgpu.controlplane.deployment import resolve, surge_and_unavailable, template_hash
from tenantgpu.controlplane.replicaset import deletion_order, ended_on_its_own


def deploy(replicas: int, surge: Any, unavailable: Any) -> dict[str, Any]:
    rolling = {"maxSurge": surge, "maxUnavailable": unavailable}
    return {"spec": {"replicas": replicas, "strategy": {"type": "RollingUpdate", "rollingUpdate": rolling}}}


@pytest.mark.parametrize(
    ("replicas", "surge", "unavailable", "expected"),
    [
        (10, "25%", "25%", (3, 2)),  # surge rounds up, unavailability down, as kube's ResolveFenceposts
        (4, "25%", "25%", (1, 1)),
        (1, "25%", "25%", (1, 0)),
        (3, 0, 0, (0, 1)),  # both zero: kube lets one be unavailable so the rollout can move
        (3, 5, 1, (5, 1)),
        (2, "50%", 5, (1, 2)),  # never more unavailable than there are replicas
    ],
)
def test_surge_and_unavailability_resolve_as_kube_does(
    replicas: int, surge: Any, unavailable: Any, expected: tuple[int, int]
) -> None:
    assert surge_and_unavailable(deploy(replicas, surge, unavailable)) == expected


def test_percentages_resolve_against_the_total() -> None:
    assert resolve("30%", 7, round_up=True) == 3 and resolve("30%", 7, round_up=False) == 2
    assert resolve(4, 7, round_up=True) == 4


def test_the_template_hash_is_stable_kube_alphabet_and_follows_the_template() -> None:
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "a"}]}}
    same = {"spec": {"containers": [{"image": "a", "name": "c"}]}, "metadata": {"labels": {"app": "x"}}}
    digest = template_hash(template)
    assert digest == template_hash(same), "key order does not matter"
    assert set(digest) <= set("bcdfghjklmnpqrstvwxz2456789") and 1 <= len(digest) <= 10
    changed = {**template, "spec": {"containers": [{"name": "c", "image": "b"}]}}
    assert template_hash(changed) != digest
    assert template_hash(template, 1) != digest, "a collision count gives another name"


def pod(
    name: str, created: str, *, node: str = "", phase: str = "Pending", ready: bool = False
) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": conditions},
    }


def test_surplus_pods_go_unscheduled_then_pending_then_not_ready_then_youngest_first() -> None:
    pods = [
        pod("ready-old", "2026-11-30T10:00:00Z", node="n", phase="Running", ready=True),
        pod("ready-young", "2026-11-30T11:00:00Z", node="n", phase="Running", ready=True),
        pod("unready", "2026-11-30T09:00:00Z", node="n", phase="Running"),
        pod("pending", "2026-11-30T09:00:00Z", node="n"),
        pod("unscheduled", "2026-11-30T08:00:00Z"),
    ]
    order = [p["metadata"]["name"] for p in deletion_order(pods)]
    assert order == ["unscheduled", "pending", "unready", "ready-young", "ready-old"]


def test_only_a_pod_that_ends_without_being_deleted_delays_its_replacement() -> None:
    running = {"metadata": {"name": "p"}, "status": {"phase": "Running"}}
    ended = {"metadata": {"name": "p"}, "status": {"phase": "Succeeded"}}
    stopping = {
        "metadata": {"name": "p", "deletionTimestamp": "2026-12-03T07:00:00Z"},
        "status": {"phase": "Running"},
    }
    stopped = {**stopping, "status": {"phase": "Succeeded"}}
    assert ended_on_its_own(ended, running)  # its run-for time is up: replaced after the back-off
    assert not ended_on_its_own(ended, ended)  # counted once
    # deleted (or scaled down): the kubelet stops it through a terminal phase; replaced at once
    assert not ended_on_its_own(stopped, stopping)
    assert not ended_on_its_own({**stopped, "status": {"phase": "Failed"}}, running)
