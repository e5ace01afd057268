"""A ResourceQuota counts exactly the pods its scopes and scopeSelector name."""

from typing import Any

import pytest

from tenantgpu.apiserver.quota_scopes import quota_matches_pod
from tenantgpu.apiserver.selectors import SelectorError


def pod(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"containers": [{"name": "a", "image": "x"}]}
    base.update(spec)
    return {"metadata": {"name": "p"}, "spec": base}


GUARANTEED = {"limits": {"cpu": "1", "memory": "1Gi"}}


def test_unscoped_quota_counts_every_pod() -> None:
    assert quota_matches_pod({"hard": {"pods": "3"}}, pod())
    assert quota_matches_pod(None, pod())


@pytest.mark.parametrize(
    ("scopes", "best_effort", "guaranteed"),
    [
        (["BestEffort"], True, False),
        (["NotBestEffort"], False, True),
        (["NotTerminating"], True, True),
        (["Terminating"], False, False),
    ],
)
def test_scopes(scopes: list[str], best_effort: bool, guaranteed: bool) -> None:
    spec = {"hard": {"pods": "1"}, "scopes": scopes}
    assert quota_matches_pod(spec, pod()) is best_effort
    assert quota_matches_pod(spec, pod(containers=[{"name": "a", "resources": GUARANTEED}])) is guaranteed


def test_terminating_means_an_active_deadline() -> None:
    assert quota_matches_pod({"scopes": ["Terminating"]}, pod(activeDeadlineSeconds=60))
    assert not quota_matches_pod({"scopes": ["NotTerminating"]}, pod(activeDeadlineSeconds=60))


def test_priority_class_selector() -> None:
    high = {
        "scopeSelector": {
            "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
        }
    }
    assert quota_matches_pod(high, pod(priorityClassName="high"))
    assert not quota_matches_pod(high, pod(priorityClassName="low"))
    assert not quota_matches_pod(high, pod())
    any_class = {
        "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]}
    }
    assert quota_matches_pod(any_class, pod(priorityClassName="low"))
    assert not quota_matches_pod(any_class, pod())
    assert quota_matches_pod({"scopes": ["PriorityClass"]}, pod(priorityClassName="x"))


def test_cross_namespace_affinity() -> None:
    term = {"topologyKey": "kubernetes.io/hostname", "namespaceSelector": {}}
    crossing = pod(affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})
    spec = {"scopes": ["CrossNamespacePodAffinity"]}
    assert quota_matches_pod(spec, crossing)
    assert not quota_matches_pod(spec, pod())


def test_bad_scope_selectors_raise() -> None:
    with pytest.raises(SelectorError):
        quota_matches_pod({"scopes": ["Sometimes"]}, pod())
    bad = {
        "scopeSelector": {
            "matchExpressions": [{"scopeName": "BestEffort", "operator": "In", "values": ["x"]}]
        }
    }
    with pytest.raises(SelectorError):
        quota_matches_pod(bad, pod())
