"""Pod status as a kubelet writes it: ContainerCreating, Running, terminated, admission failure."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"


def rfc3339(ts: datetime | None = None) -> str:
    return (ts or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def container_id(pod_uid: str, container: str) -> str:
    return "tenantgpu://" + hashlib.sha256(f"{pod_uid}/{container}".encode()).hexdigest()


def _condition(
    kind: str, status: bool, when: str, reason: str | None = None, message: str | None = None
) -> dict[str, Any]:
    cond: dict[str, Any] = {
        "type": kind,
        "status": "True" if status else "False",
        "lastProbeTime": None,
        "lastTransitionTime": when,
    }
    if message:
        cond["message"] = message
    if reason:
        cond["reason"] = reason
    return cond


def unready_message(names: list[str]) -> str:
    """kube's status generator's message for Ready and ContainersReady: the unready containers, sidecars
    first, as Go prints a list of strings."""
    return f"containers with unready status: [{' '.join(names)}]"


def _unready(pod: dict[str, Any]) -> str:
    sidecars = [c.get("name", "") for c in _containers(pod, "initContainers") if is_sidecar(c)]
    return unready_message(sidecars + [c.get("name", "") for c in _containers(pod)])


def _containers(pod: dict[str, Any], kind: str = "containers") -> list[dict[str, Any]]:
    return list((pod.get("spec") or {}).get(kind) or [])


def _base_status(c: dict[str, Any], pod_uid: str) -> dict[str, Any]:
    status = {
        "name": c.get("name", ""),
        "image": c.get("image", ""),
        "imageID": "",
        "restartCount": 0,
        "containerID": container_id(pod_uid, c.get("name", "")),
    }
    if mounts := c.get("volumeMounts"):
        status["volumeMounts"] = [_mount_status(m) for m in mounts]
    return status


def _mount_status(mount: dict[str, Any]) -> dict[str, Any]:
    """A container status's copy of one of its mounts, as the kubelet of 1.31+ (RecursiveReadOnlyMounts)
    reports it: a read-only mount says whether it is recursively read-only. The simulated runtime can
    make it so, as containerd 2 on a kernel of 5.12 or later can, so `IfPossible` turns into `Enabled`."""
    status = {"name": mount.get("name", ""), "mountPath": mount.get("mountPath", "")}
    if mount.get("readOnly"):
        status["readOnly"] = True
        wanted = mount.get("recursiveReadOnly")
        status["recursiveReadOnly"] = "Enabled" if wanted in ("Enabled", "IfPossible") else "Disabled"
    return status


def is_sidecar(container: dict[str, Any]) -> bool:
    """A restartable init container (`restartPolicy: Always`), Kubernetes' native sidecar."""
    return container.get("restartPolicy") == "Always"


def _init_statuses(
    pod: dict[str, Any], pod_uid: str, started: str, ended: str | None = None
) -> list[dict[str, Any]]:
    # Init containers of simulated pods complete at once, as their start-up output is all they do. A
    # sidecar keeps running beside the app containers and is stopped when they end (`ended`), as the
    # kubelet of 1.29+ does; its exit status does not count towards the pod's phase.
    out = []
    for c in _containers(pod, "initContainers"):
        st = _base_status(c, pod_uid)
        if not is_sidecar(c):
            st.update(
                ready=True, started=False, state=terminated_state(0, started, st["containerID"], started)
            )
        elif ended is None:
            st.update(ready=True, started=True, state={"running": {"startedAt": started}})
        else:
            st.update(
                ready=False, started=False, state=terminated_state(0, started, st["containerID"], ended)
            )
        out.append(st)
    return out


def creating_status(pod: dict[str, Any], host_ip: str, now: datetime | None = None) -> dict[str, Any]:
    """Pending with containers waiting in ContainerCreating (after admission, before start)."""
    when = rfc3339(now)
    unready = _unready(pod)
    uid = (pod.get("metadata") or {}).get("uid", "")
    statuses = []
    for c in _containers(pod):
        st = _base_status(c, uid)
        st.pop("containerID")
        st.update(ready=False, started=False, state={"waiting": {"reason": "ContainerCreating"}})
        statuses.append(st)
    status: dict[str, Any] = {
        "phase": "Pending",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": when,
        "conditions": [
            _condition("PodReadyToStartContainers", False, when),
            _condition("Initialized", True, when),
            _condition("Ready", False, when, "ContainersNotReady", unready),
            _condition("ContainersReady", False, when, "ContainersNotReady", unready),
            _condition("PodScheduled", True, when),
        ],
        "containerStatuses": statuses,
    }
    if _containers(pod, "initContainers"):
        status["initContainerStatuses"] = _init_statuses(pod, uid, when)
    return status


def _placed(phase: str, host_ip: str, pod_ip: str, start_time: str) -> dict[str, Any]:
    """The head of the status of a pod whose sandbox is up: its phase, node and pod addresses, start."""
    return {
        "phase": phase,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": start_time,
    }


def config_error_status(
    pod: dict[str, Any],
    host_ip: str,
    pod_ip: str,
    start_time: str,
    failed: tuple[str, str],
    message: str,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Pending with the sandbox up (its IP given) while container `failed` (its spec group and name)
    cannot be configured: it waits in CreateContainerConfigError with `message`; the others wait in
    ContainerCreating, or in PodInitializing behind an init container that failed so."""
    when = rfc3339(now)
    unready = _unready(pod)
    uid = (pod.get("metadata") or {}).get("uid", "")
    group, name = failed
    in_init = group == "initContainers"
    error = {"waiting": {"reason": "CreateContainerConfigError", "message": message}}

    def waiting(c: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        st = _base_status(c, uid)
        st.pop("containerID")
        st.update(ready=False, started=False, state=state)
        return st

    apps = [
        waiting(c, error if c.get("name") == name and not in_init else
                {"waiting": {"reason": "PodInitializing" if in_init else "ContainerCreating"}})
        for c in _containers(pod)
    ]  # fmt: skip
    status: dict[str, Any] = {
        **_placed("Pending", host_ip, pod_ip, start_time),
        "conditions": [
            _condition("PodReadyToStartContainers", True, when),
            _condition("Initialized", True, when)
            if not in_init
            else _condition(
                "Initialized",
                False,
                when,
                "ContainersNotInitialized",
                f"containers with incomplete status: [{name}]",
            ),
            _condition("Ready", False, when, "ContainersNotReady", unready),
            _condition("ContainersReady", False, when, "ContainersNotReady", unready),
            _condition("PodScheduled", True, when),
        ],
        "containerStatuses": apps,
    }
    inits = _containers(pod, "initContainers")
    if inits:
        entries = _init_statuses(pod, uid, start_time)
        if in_init:
            at = next((i for i, c in enumerate(inits) if c.get("name") == name), len(inits))
            for i, c in enumerate(inits[at:], start=at):
                entries[i] = waiting(c, error if i == at else {"waiting": {"reason": "PodInitializing"}})
        status["initContainerStatuses"] = entries
    return status


def running_status(
    pod: dict[str, Any], host_ip: str, pod_ip: str, start_time: str, now: datetime | None = None
) -> dict[str, Any]:
    """Running and Ready: every container started at `now`."""
    when = rfc3339(now)
    uid = (pod.get("metadata") or {}).get("uid", "")
    statuses = []
    for c in _containers(pod):
        st = _base_status(c, uid)
        st.update(ready=True, started=True, state={"running": {"startedAt": when}})
        statuses.append(st)
    status: dict[str, Any] = {
        **_placed("Running", host_ip, pod_ip, start_time),
        "conditions": [
            _condition("PodReadyToStartContainers", True, when),
            _condition("Initialized", True, when),
            _condition("Ready", True, when),
            _condition("ContainersReady", True, when),
            _condition("PodScheduled", True, start_time),
        ],
        "containerStatuses": statuses,
    }
    if _containers(pod, "initContainers"):
        status["initContainerStatuses"] = _init_statuses(pod, uid, start_time)
    return status


def terminated_status(
    pod: dict[str, Any],
    host_ip: str,
    pod_ip: str | None,
    start_time: str,
    started_at: str,
    exit_codes: dict[str, int],
    now: datetime | None = None,
    *,
    phase: str | None = None,
) -> dict[str, Any]:
    """All containers terminated; phase Succeeded when every exit code is 0, else Failed."""
    when = rfc3339(now)
    uid = (pod.get("metadata") or {}).get("uid", "")
    statuses = []
    for c in _containers(pod):
        code = exit_codes.get(c.get("name", ""), 0)
        st = _base_status(c, uid)
        st.update(
            ready=False, started=False, state=terminated_state(code, started_at, st["containerID"], when)
        )
        statuses.append(st)
    succeeded = all(code == 0 for code in exit_codes.values())
    status: dict[str, Any] = {
        "phase": phase or ("Succeeded" if succeeded else "Failed"),
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": start_time,
        "conditions": [
            _condition("PodReadyToStartContainers", False, when),
            _condition("Initialized", True, start_time, "PodCompleted" if succeeded else None),
            _condition("Ready", False, when, "PodCompleted" if succeeded else "PodFailed"),
            _condition("ContainersReady", False, when, "PodCompleted" if succeeded else "PodFailed"),
            _condition("PodScheduled", True, start_time),
        ],
        "containerStatuses": statuses,
    }
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    if _containers(pod, "initContainers"):
        status["initContainerStatuses"] = _init_statuses(pod, uid, start_time, when)
    return status


def terminated_state(
    code: int, started_at: str, container: str, finished_at: str | None = None
) -> dict[str, Any]:
    """A container state after its process exited with `code` (at `finished_at`, or now)."""
    return {
        "terminated": {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": started_at,
            "finishedAt": finished_at or rfc3339(),
            "containerID": container,
        }
    }


def container_entry(
    spec: dict[str, Any],
    pod_uid: str,
    *,
    state: dict[str, Any],
    restarts: int,
    last: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One `containerStatuses` entry: ready and started only while running."""
    entry = _base_status(spec, pod_uid)
    running = "running" in state
    entry.update(ready=running, started=running, state=state, restartCount=restarts)
    if last is not None:
        entry["lastState"] = last
    return entry


def set_readiness(status: dict[str, Any], unready: list[str]) -> None:
    """Set the pod's Ready and ContainersReady conditions from its `unready` containers (reason
    ContainersNotReady and kube's message naming them, when there are any)."""
    when = rfc3339()
    for cond in status.get("conditions") or []:
        if cond["type"] in ("Ready", "ContainersReady"):
            cond.update(status="False" if unready else "True", lastTransitionTime=when)
            if unready:
                cond.update(reason="ContainersNotReady", message=unready_message(unready))
            else:
                cond.pop("reason", None)
                cond.pop("message", None)


def admission_failed_message(error: str) -> str:
    """The device manager's text for a failed Allocate (the admission package's unexpectedAdmissionError
    around the gRPC error a device plugin's plain error becomes); the kubelet's Warning event says this."""
    return f"Allocate failed due to rpc error: code = Unknown desc = {error}, which is unexpected"


def disruption_condition(reason: str, message: str, now: datetime | None = None) -> dict[str, Any]:
    """The DisruptionTarget condition the kubelet gives a pod it is about to stop for a reason of its
    own (a critical pod's preemption, node-pressure eviction, node shutdown)."""
    return _condition("DisruptionTarget", True, rfc3339(now), reason, message)


def rejected_status(reason: str, message: str, now: datetime | None = None) -> dict[str, Any]:
    """What a real kubelet reports for a pod one of its admit handlers refused (a device plugin's failed
    Allocate, OutOfcpu, …): its rejectPod prefixes the handler's message with `Pod was rejected: ` (since
    1.26, kubernetes#112644), and its status manager gives the pod a start time."""
    return {
        "phase": "Failed",
        "reason": reason,
        "message": f"Pod was rejected: {message}",
        "startTime": rfc3339(now),
    }


def admission_failed_status(error: str, now: datetime | None = None) -> dict[str, Any]:
    """The status of a pod whose device plugin's Allocate failed during admission."""
    return rejected_status(UNEXPECTED_ADMISSION_ERROR, admission_failed_message(error), now)
