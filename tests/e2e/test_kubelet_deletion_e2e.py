"""A deleted pod is removed by its kubelet even when the courtesy final status cannot be written, and the
kubelet tells of each container it stops as kube's does (`Killing`)."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime

import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer

from tenantgpu.gpushare import SharingConfig
from tenantgpu.kubeclient import ApiError, KubeClient
from tenantgpu.node.worker import Worker

pytestmark = pytest.mark.slow

# Every status write of a pod is refused with a 500: the webhook it must call cannot be reached.
_STATUS_BLOCKER = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "refuse-pod-status"},
    "webhooks": [
        {
            "name": "refuse.status.example.com",
            "clientConfig": {"url": "https://127.0.0.1:9/validate"},
            "rules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["UPDATE"],
                    "resources": ["pods/status"],
                }
            ],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 2,
        }
    ],
}


async def _phase(client: KubeClient, name: str) -> str | None:
    try:
        return (await client.get("pods", name, "default"))["status"].get("phase")
    except ApiError as err:
        if err.code == 404:
            return None
        raise


def test_pod_is_removed_although_its_final_status_is_refused(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop
) -> None:
    async def scenario() -> list[str | None]:
        seen: list[str | None] = []
        client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
        worker = Worker(client, "deleting-node", [], SharingConfig())
        await worker.start()
        try:
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "refused-status"},
                "spec": {"nodeName": "deleting-node", "containers": [{"name": "c", "image": "busybox"}]},
            }
            await client.create("pods", pod, "default")
            async with asyncio.timeout(20):
                while await _phase(client, "refused-status") != "Running":
                    await asyncio.sleep(0.1)
            seen.append("Running")
            await client.create("validatingwebhookconfigurations", _STATUS_BLOCKER)
            with pytest.raises(ApiError) as refused:
                await client.patch(
                    "pods", "refused-status", {"status": {"message": "x"}}, "default", subresource="status"
                )
            seen.append(str(refused.value.code))
            await client.delete("pods", "refused-status", "default")
            async with asyncio.timeout(20):
                while (phase := await _phase(client, "refused-status")) is not None:
                    await asyncio.sleep(0.1)
            seen.append(phase)
        finally:
            await client.delete("validatingwebhookconfigurations", "refuse-pod-status")
            await worker.stop()
            await client.close()
        return seen

    assert background_loop.run(scenario(), timeout=90) == ["Running", "500", None]


def test_deleting_a_running_pod_records_killing_for_each_container_it_stops(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, kubectl: Kubectl
) -> None:
    """kuberuntime's killContainer: `Stopping container <name>` on the container's field path, the app
    containers before the sidecars (these in reverse order); a container that already ended, like the
    plain init container, is not stopped."""
    client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
    worker = Worker(client, "stopping-node", [], SharingConfig())
    background_loop.run(worker.start())
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "stopped", "namespace": "default"},
        "spec": {
            "nodeName": "stopping-node",
            "initContainers": [
                {"name": "setup", "image": "busybox", "command": ["true"]},
                {"name": "log-shipper", "image": "busybox", "restartPolicy": "Always"},
                {"name": "proxy", "image": "busybox", "restartPolicy": "Always"},
            ],
            "containers": [{"name": "app", "image": "busybox"}, {"name": "metrics", "image": "busybox"}],
        },
    }
    try:
        kubectl("apply", "-f", "-", input=json.dumps(pod))
        for _ in range(200):
            if (
                json.loads(kubectl("get", "pod", "stopped", "-o", "json").stdout)["status"].get("phase")
                == "Running"
            ):
                break
            time.sleep(0.1)
        uid = json.loads(kubectl("get", "pod", "stopped", "-o", "json").stdout)["metadata"]["uid"]
        kubectl("delete", "pod", "stopped", "--wait=true", "--timeout=30s")
        events = json.loads(
            kubectl(
                "get",
                "events",
                "--field-selector",
                "involvedObject.name=stopped,reason=Killing",
                "-o",
                "json",
            ).stdout
        )["items"]
        events.sort(
            key=lambda e: (e["firstTimestamp"], e["metadata"]["creationTimestamp"], e["metadata"]["name"])
        )
        seen = [(e["involvedObject"]["fieldPath"], e["message"]) for e in events]
        assert sorted(seen[:2]) == [
            ("spec.containers{app}", "Stopping container app"),
            ("spec.containers{metrics}", "Stopping container metrics"),
        ]
        assert seen[2:] == [
            ("spec.initContainers{proxy}", "Stopping container proxy"),
            ("spec.initContainers{log-shipper}", "Stopping container log-shipper"),
        ]
        for event in events:
            assert event["type"] == "Normal"
            assert event["source"] == {"component": "kubelet", "host": "stopping-node"}
            assert event["involvedObject"]["uid"] == uid
        described = kubectl("get", "events", "--field-selector", "involvedObject.name=stopped").stdout
        assert "Killing" in described and "Stopping container app" in described
    finally:
        background_loop.run(worker.stop())
        background_loop.run(client.close())


def test_a_pod_past_its_active_deadline_is_failed_by_its_kubelet(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, kubectl: Kubectl
) -> None:
    """kube's activeDeadlineHandler: `activeDeadlineSeconds` after its start time the pod fails with
    reason DeadlineExceeded and kube's message, a Normal event says so, and its containers are stopped."""
    client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
    worker = Worker(client, "deadline-node", [], SharingConfig())
    background_loop.run(worker.start())
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bounded", "namespace": "default"},
        "spec": {
            "nodeName": "deadline-node",
            "activeDeadlineSeconds": 2,
            "containers": [{"name": "train", "image": "busybox", "command": ["sleep", "3600"]}],
        },
    }
    try:
        kubectl("apply", "-f", "-", input=json.dumps(pod))
        status: dict = {}
        for _ in range(100):
            status = json.loads(kubectl("get", "pod", "bounded", "-o", "json").stdout)["status"]
            if status.get("phase") == "Failed":
                break
            time.sleep(0.1)
        assert (status.get("phase"), status.get("reason"), status.get("message")) == (
            "Failed",
            "DeadlineExceeded",
            "Pod was active on the node longer than the specified deadline",
        )
        started = datetime.fromisoformat(status["startTime"].replace("Z", "+00:00"))
        terminated = status["containerStatuses"][0]["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (137, "Error")
        assert kubectl("get", "pod", "bounded", "--no-headers").stdout.split()[2] == "Error"
        finished = terminated["finishedAt"]
        assert (datetime.fromisoformat(finished.replace("Z", "+00:00")) - started).total_seconds() >= 2
        events = json.loads(
            kubectl("get", "events", "--field-selector", "involvedObject.name=bounded", "-o", "json").stdout
        )["items"]
        seen = {(e["type"], e["reason"], e["message"]) for e in events}
        assert (
            "Normal",
            "DeadlineExceeded",
            "Pod was active on the node longer than the specified deadline",
        ) in seen
        assert ("Normal", "Killing", "Stopping container train") in seen
    finally:
        kubectl("delete", "pod", "bounded", "--ignore-not-found", "--wait=false")
        background_loop.run(worker.stop())
        background_loop.run(client.close())


def test_a_force_deleted_pod_still_has_its_containers_stopped(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, kubectl: Kubectl
) -> None:
    """`kubectl delete --force --grace-period=0` removes the object at once; kube's kubelet then kills the
    containers all the same (HandlePodRemoves), and its `Killing` events outlive the pod."""
    client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
    worker = Worker(client, "forced-node", [], SharingConfig())
    background_loop.run(worker.start())
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "forced", "namespace": "default"},
        "spec": {"nodeName": "forced-node", "containers": [{"name": "app", "image": "busybox"}]},
    }
    try:
        kubectl("apply", "-f", "-", input=json.dumps(pod))
        for _ in range(100):
            if (
                json.loads(kubectl("get", "pod", "forced", "-o", "json").stdout)["status"].get("phase")
                == "Running"
            ):
                break
            time.sleep(0.1)
        kubectl("delete", "pod", "forced", "--force", "--grace-period=0")
        seen: list[tuple[str, str]] = []
        for _ in range(100):
            events = json.loads(
                kubectl(
                    "get",
                    "events",
                    "--field-selector",
                    "involvedObject.name=forced,reason=Killing",
                    "-o",
                    "json",
                ).stdout
            )["items"]
            seen = [(e["involvedObject"]["fieldPath"], e["message"]) for e in events]
            if seen:
                break
            time.sleep(0.1)
        assert seen == [("spec.containers{app}", "Stopping container app")]
        assert kubectl("get", "pod", "forced", "--ignore-not-found").stdout == ""
    finally:
        background_loop.run(worker.stop())
        background_loop.run(client.close())
