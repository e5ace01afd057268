"""Pods the checks create, and how to read what became of them (phase, placement, reasons, env)."""

from __future__ import annotations

from typing import Any

from tenantgpu.validate import hami
from tenantgpu.validate.cluster import JSON, Cluster
from tenantgpu.validate.context import CheckContext
from tenantgpu.validate.outcome import CheckFailed

# What a real container would print; the lab's simulated kubelet shows the injected env as its log.
_PRINT_ENV = "env | grep -E '^(CUDA_|NVIDIA_VISIBLE)' | sort; sleep 3600"


def gpu_pod(
    name: str,
    *,
    labels: dict[str, str],
    gpus: int | None = 1,
    gpumem: int | None = None,
    gpumem_percentage: int | None = None,
    gpucores: int | None = None,
    annotations: dict[str, str] | None = None,
    node: str | None = None,
) -> JSON:
    """A one-container pod asking for a GPU slice with HAMi's resources (only those given)."""
    limits: dict[str, str] = {}
    if gpus is not None:
        limits[hami.RESOURCE_GPU] = str(gpus)
    if gpumem is not None:
        limits[hami.RESOURCE_MEM] = str(gpumem)
    if gpumem_percentage is not None:
        limits[hami.RESOURCE_MEM_PERCENTAGE] = str(gpumem_percentage)
    if gpucores is not None:
        limits[hami.RESOURCE_CORES] = str(gpucores)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "cuda",
                "image": "busybox:1.36",
                "command": ["sh", "-c", _PRINT_ENV],
                "resources": {"limits": limits},
            }
        ],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(labels), "annotations": dict(annotations or {})},
        "spec": spec,
    }


def phase(pod: JSON | None) -> str:
    return ((pod or {}).get("status") or {}).get("phase") or "Unknown"


def annotations(obj: JSON | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("annotations") or {})


def node_of(pod: JSON) -> str:
    return (pod.get("spec") or {}).get("nodeName") or ""


def state(pod: JSON | None) -> str:
    """One line on where a pod stands: phase, node, scheduler, bind phase, the scheduling condition."""
    if pod is None:
        return "pod not found"
    spec = pod.get("spec") or {}
    notes = annotations(pod)
    parts = [phase(pod)]
    parts.append(f"node={spec.get('nodeName') or '-'}")
    parts.append(f"schedulerName={spec.get('schedulerName') or '-'}")
    if hami.BIND_PHASE in notes:
        parts.append(f"bind-phase={notes[hami.BIND_PHASE]}")
    if hami.DEVICES_ALLOCATED in notes:
        parts.append(f"allocated={notes[hami.DEVICES_ALLOCATED]}")
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("status") != "True" and condition.get("message"):
            parts.append(f"{condition.get('type')}: {condition.get('message')}")
    reason = (pod.get("status") or {}).get("reason")
    if reason:
        parts.append(f"reason={reason}")
    return ", ".join(parts)


def pending_reasons(cluster: Cluster, namespace: str, name: str) -> str:
    """Every scheduling complaint about a pod: its conditions' messages and its events, as one text."""
    texts: list[str] = []
    pod = cluster.get("Pod", name, namespace)
    for condition in ((pod or {}).get("status") or {}).get("conditions") or []:
        texts.append(f"{condition.get('reason') or ''} {condition.get('message') or ''}".strip())
    for event in cluster.list("Event", namespace):
        involved = event.get("involvedObject") or {}
        if involved.get("name") == name:
            texts.append(f"{event.get('reason') or ''}: {event.get('message') or ''}")
    return " | ".join(t for t in texts if t)


def wait_running(ctx: CheckContext, namespace: str, name: str, cluster: Cluster | None = None) -> JSON:
    """Wait until the pod runs; fail with its last state and a describe command."""
    target = cluster or ctx.cluster
    last: dict[str, JSON | None] = {"pod": None}

    def probe() -> JSON | None:
        pod = target.get("Pod", name, namespace)
        last["pod"] = pod
        if phase(pod) in ("Failed", "Succeeded"):
            return pod
        return pod if phase(pod) == "Running" else None

    pod = ctx.wait_for(
        probe,
        what=f"pod {namespace}/{name} Running",
        seen=lambda: state(last["pod"]) + _reasons_suffix(target, namespace, name),
        command=ctx.kubectl(f"-n {namespace} describe pod {name}", target),
    )
    if phase(pod) != "Running":
        raise CheckFailed(
            f"pod {namespace}/{name} ended {phase(pod)} instead of running",
            expected="Running",
            seen=state(pod) + _reasons_suffix(target, namespace, name),
            command=ctx.kubectl(f"-n {namespace} describe pod {name}", target),
        )
    return pod


def wait_pending_with(
    ctx: CheckContext, namespace: str, name: str, reasons: tuple[str, ...], cluster: Cluster | None = None
) -> str:
    """Wait until the pod is unscheduled with one of HAMi's `reasons` in its conditions or events."""
    target = cluster or ctx.cluster

    def probe() -> str | None:
        pod = target.get("Pod", name, namespace)
        if node_of(pod or {}) or phase(pod) != "Pending":
            raise CheckFailed(
                f"pod {namespace}/{name} was placed although it should not fit",
                expected=f"Pending with {' or '.join(reasons)}",
                seen=state(pod),
                command=ctx.kubectl(f"-n {namespace} describe pod {name}", target),
            )
        text = pending_reasons(target, namespace, name)
        return next((reason for reason in reasons if reason in text), None)

    return ctx.wait_for(
        probe,
        what=f"pod {namespace}/{name} Pending with {' or '.join(reasons)}",
        seen=lambda: state(target.get("Pod", name, namespace)) + _reasons_suffix(target, namespace, name),
        command=ctx.kubectl(f"-n {namespace} describe pod {name}", target),
        timeout=min(ctx.settings.timeout_seconds, 15.0),
    )


def env_from_log(log: str) -> dict[str, str]:
    """`KEY=value` lines of a container log (the env it printed)."""
    env: dict[str, str] = {}
    for line in log.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and " " not in key:
            env[key] = value
    return env


def _reasons_suffix(cluster: Cluster, namespace: str, name: str) -> str:
    try:
        text = pending_reasons(cluster, namespace, name)
    except Exception:
        return ""
    return f"; events: {text}" if text else ""
