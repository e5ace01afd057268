"""The kubelet's status at each lifecycle step looks like a real kubelet's."""

from __future__ import annotations

from datetime import UTC, datetime

from tenantgpu.node import podstatus

NOW = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
POD = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
    "spec": {"containers": [{"name": "a", "image": "img"}, {"name": "b", "image": "img"}]},
}


def _conds(status: dict) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


def test_container_creating_is_pending_and_not_ready() -> None:
    st = podstatus.creating_status(POD, "127.0.0.1", NOW)
    assert st["phase"] == "Pending" and st["startTime"] == "2026-11-29T20:00:00Z"
    assert [c["state"] for c in st["containerStatuses"]] == [{"waiting": {"reason": "ContainerCreating"}}] * 2
    assert _conds(st) == {
        "PodReadyToStartContainers": "False",
        "Initialized": "True",
        "Ready": "False",
        "ContainersReady": "False",
        "PodScheduled": "True",
    }


def test_running_is_ready_with_ip_and_start_times() -> None:
    st = podstatus.running_status(POD, "127.0.0.1", "10.244.1.2", "2026-11-29T19:59:59Z", NOW)
    assert st["phase"] == "Running" and st["podIP"] == "10.244.1.2"
    assert all(c["ready"] and c["state"]["running"]["startedAt"] == "2026-11-29T20:00:00Z"
               for c in st["containerStatuses"])  # fmt: skip
    assert _conds(st)["Ready"] == "True"
    assert st["containerStatuses"][0]["containerID"].startswith("tenantgpu://")


def test_terminated_phase_follows_exit_codes() -> None:
    ok = podstatus.terminated_status(POD, "h", "ip", "s", "s", {"a": 0, "b": 0}, NOW)
    assert ok["phase"] == "Succeeded"
    assert ok["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    bad = podstatus.terminated_status(POD, "h", "ip", "s", "s", {"a": 0, "b": 1}, NOW)
    assert bad["phase"] == "Failed"
    assert bad["containerStatuses"][1]["state"]["terminated"] == {
        "exitCode": 1,
        "reason": "Error",
        "startedAt": "s",
        "finishedAt": "2026-11-29T20:00:00Z",
        "containerID": podstatus.container_id("u1", "b"),
    }


def test_admission_failure_reads_like_the_kubelet() -> None:
    st = podstatus.admission_failed_status("no binding pod found on node w1", NOW)
    assert st["phase"] == "Failed" and st["reason"] == "UnexpectedAdmissionError"
    # kube's rejectPod prefixes the admission message (kubernetes#112644, 1.26); its Warning event does not
    assert st["message"] == (
        "Pod was rejected: Allocate failed due to rpc error: code = Unknown desc = "
        "no binding pod found on node w1, which is unexpected"
    )
    assert podstatus.admission_failed_message("no binding pod found on node w1") == (
        "Allocate failed due to rpc error: code = Unknown desc = "
        "no binding pod found on node w1, which is unexpected"
    )


WITH_SIDECAR = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
    "spec": {
        "initContainers": [
            {"name": "setup", "image": "img"},
            {"name": "proxy", "image": "img", "restartPolicy": "Always"},
        ],
        "containers": [{"name": "a", "image": "img"}],
    },
}


def test_a_sidecar_runs_with_the_pod_and_stops_when_it_ends() -> None:
    """Kubernetes' native sidecar (an init container with restartPolicy Always, on by default since
    1.29): a plain init container is terminated with exit 0, the sidecar stays running and ready beside
    the app containers; when they end it is terminated too, and its status leaves the phase alone."""
    running = podstatus.running_status(WITH_SIDECAR, "h", "10.244.1.2", "2026-11-29T19:59:59Z", NOW)
    setup, proxy = running["initContainerStatuses"]
    assert setup["state"]["terminated"]["reason"] == "Completed" and not setup["started"]
    assert proxy["state"] == {"running": {"startedAt": "2026-11-29T19:59:59Z"}}
    assert proxy["ready"] and proxy["started"]
    ended = podstatus.terminated_status(WITH_SIDECAR, "h", "ip", "2026-11-29T19:59:59Z", "s", {"a": 0}, NOW)
    assert ended["phase"] == "Succeeded"
    proxy = ended["initContainerStatuses"][1]
    assert proxy["state"]["terminated"]["finishedAt"] == "2026-11-29T20:00:00Z"
    assert not proxy["ready"] and not proxy["started"]
