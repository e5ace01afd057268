"""Which pods a ResourceQuota counts: its `scopes` and `scopeSelector`, as kube's pod evaluator decides."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tenantgpu.apiserver.defaults import pod_qos_class
from tenantgpu.apiserver.selectors import SelectorError

__all__ = ["quota_matches_pod"]

_SCOPES = (
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
)


def _cross_namespace_affinity(spec: Mapping[str, Any]) -> bool:
    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        rules = affinity.get(kind) or {}
        terms = list(rules.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        terms += [
            w.get("podAffinityTerm") or {}
            for w in rules.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        ]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in terms):
            return True
    return False


def _scope_holds(scope: str, operator: str, values: list[str], pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    if scope == "PriorityClass":
        name = spec.get("priorityClassName") or ""
        if operator == "In":
            return name in values
        if operator == "NotIn":
            return name not in values
        if operator == "Exists":
            return bool(name)
        return not name  # DoesNotExist
    if scope == "Terminating":
        holds = isinstance(spec.get("activeDeadlineSeconds"), int) and spec["activeDeadlineSeconds"] >= 0
    elif scope == "NotTerminating":
        holds = spec.get("activeDeadlineSeconds") is None
    elif scope in ("BestEffort", "NotBestEffort"):
        qos = (pod.get("status") or {}).get("qosClass") or pod_qos_class(spec)
        holds = (qos == "BestEffort") == (scope == "BestEffort")
    else:
        holds = _cross_namespace_affinity(spec)
    return holds if operator == "Exists" else not holds


def quota_matches_pod(quota_spec: Mapping[str, Any] | None, pod: Mapping[str, Any]) -> bool:
    """True when every scope and scopeSelector requirement of a ResourceQuota spec holds for the pod."""
    quota_spec = quota_spec or {}
    requirements: list[tuple[str, str, list[str]]] = [
        (s, "Exists", []) for s in quota_spec.get("scopes") or []
    ]
    for expression in (quota_spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        requirements.append(
            (
                expression.get("scopeName", ""),
                expression.get("operator", ""),
                list(expression.get("values") or []),
            )
        )
    for scope, operator, values in requirements:
        if scope not in _SCOPES:
            raise SelectorError(f'unsupported scope: "{scope}"')
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise SelectorError(f'not a valid selector operator: "{operator}"')
        if operator in ("In", "NotIn") and scope != "PriorityClass":
            raise SelectorError(f"operator {operator} is only allowed with the PriorityClass scope")
        if not _scope_holds(scope, operator, values, pod):
            return False
    return True
