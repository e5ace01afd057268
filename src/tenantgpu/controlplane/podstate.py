"""Small readings of pod objects that every control-plane service needs."""

from __future__ import annotations

from typing import Any

DEFAULT_SCHEDULER = "default-scheduler"


def pod_key(pod: dict[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def is_terminal(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def node_name(pod: dict[str, Any]) -> str:
    return (pod.get("spec") or {}).get("nodeName") or ""


def wants_default_scheduler(pod: dict[str, Any]) -> bool:
    """Unbound, alive, and naming the default scheduler (or none, which the API server defaults to it)."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    return (
        not spec.get("nodeName")
        and (spec.get("schedulerName") or DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
        and not meta.get("deletionTimestamp")
        and not is_terminal(pod)
    )


def is_ready(pod: dict[str, Any]) -> bool:
    """The pod's Ready condition is True."""
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )
