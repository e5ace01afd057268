"""A tenant's API server runs with its release's feature-gate defaults, as Kamaji starts kube-apiserver
without `--feature-gates`: a field the release knows but whose gate is off there is taken without a
word and not stored (kube's dropDisabledFields), and a field an object already stores survives an
update. Through the real kubectl and the official Python client; facts in
tests/apiserver/test_disabledfields.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from apiserver_harness import (
    BackgroundLoop,
    Kubectl,
    RunningAPIServer,
    release_server,
    start_server,
    wait_for,
)
from kubernetes import client, config

from tenantgpu.apiserver.storage import SQLiteDatastore
from tenantgpu.controlplane import ControlPlaneServices
from tenantgpu.kubeclient import KubeClient

pytestmark = pytest.mark.slow  # drives real kubectl binaries

GATED_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: gated}
spec:
  hostUsers: false
  volumes:
  - {name: model, image: {reference: "registry.example/model:1"}}
  - {name: scratch, emptyDir: {}}
  containers:
  - name: main
    image: busybox
    resizePolicy: [{resourceName: cpu, restartPolicy: NotRequired}]
    securityContext: {procMount: Unmasked}
    volumeMounts:
    - {name: model, mountPath: /model}
    - {name: scratch, mountPath: /scratch}
"""


def test_a_1_31_tenant_stores_a_pod_without_the_fields_whose_gates_are_off(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    """On v1.31, InPlacePodVerticalScaling, UserNamespacesSupport, ImageVolume and ProcMountType are
    off: kubectl apply (strict validation) succeeds without a warning, and the stored pod has no
    resizePolicy, no hostUsers, no image volume nor its mount, and procMount Default."""
    manifest = tmp_path / "gated.yaml"
    manifest.write_text(GATED_POD)
    applied = kubectl("apply", "-f", str(manifest), version="1.31")
    assert "Warning" not in applied.stderr, applied.stderr
    pod = json.loads(kubectl("get", "pod", "gated", "-o", "json", version="1.31").stdout)
    spec = pod["spec"]
    main = spec["containers"][0]
    assert "hostUsers" not in spec and "resizePolicy" not in main
    # the service account admission adds its token volume
    assert [volume["name"] for volume in spec["volumes"] if not volume["name"].startswith("kube-api")] == [
        "scratch"
    ]
    assert [
        mount["mountPath"] for mount in main["volumeMounts"] if not mount["name"].startswith("kube-api")
    ] == ["/scratch"]
    assert main["securityContext"] == {"procMount": "Default"}
    kubectl("delete", "pod", "gated", "--wait=false", version="1.31")


def test_the_python_client_s_job_and_service_follow_the_1_31_gates(apiserver: RunningAPIServer) -> None:
    """JobManagedBy is alpha (off) in 1.31, JobPodReplacementPolicy and ServiceTrafficDistribution beta
    (on)."""
    api = config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    try:
        batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
        job = batch.create_namespaced_job(
            "default",
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "gated"},
                "spec": {
                    "managedBy": "kueue.x-k8s.io/multikueue",
                    "podReplacementPolicy": "Failed",
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "busybox"}],
                        }
                    },
                },
            },
        )
        assert job.spec.managed_by is None
        assert job.spec.pod_replacement_policy == "Failed"
        service = core.create_namespaced_service(
            "default",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "gated"},
                "spec": {"ports": [{"port": 80}], "trafficDistribution": "PreferClose"},
            },
        )
        assert service.spec.traffic_distribution == "PreferClose"
        batch.delete_namespaced_job("gated", "default", propagation_policy="Background")
        core.delete_namespaced_service("gated", "default")
    finally:
        api.close()


def test_a_field_stored_while_its_gate_was_on_survives_an_update_after_a_downgrade(
    kubectl: Kubectl, background_loop: BackgroundLoop, tmp_path: Path
) -> None:
    """A v1.33 tenant stores a pod's resizePolicy (InPlacePodVerticalScaling on); the same datastore
    served as v1.31 keeps it through `kubectl label` (the stored pod uses the gate), while a pod created
    there loses it."""
    manifest = tmp_path / "resizable.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: resizable}\nspec:\n  containers:\n"
        "  - {name: main, image: busybox, resizePolicy: [{resourceName: memory, restartPolicy: RestartContainer}]}\n"
    )
    state = tmp_path / "tenant"
    newer = start_server(background_loop, state, "tenant-down", kubernetes_version="v1.33.1")
    try:
        kubectl("apply", "-f", str(manifest), kubeconfig=newer.kubeconfig, version="1.33")
    finally:
        background_loop.run(newer.server.stop())
        newer.datastore.close()
    older = start_server(
        background_loop,
        state,
        "tenant-down",
        datastore=SQLiteDatastore(state / "state.db"),
        kubernetes_version="v1.31.4",
    )
    try:
        kubectl("label", "pod", "resizable", "tier=gpu", kubeconfig=older.kubeconfig, version="1.31")
        pod = json.loads(
            kubectl(
                "get", "pod", "resizable", "-o", "json", kubeconfig=older.kubeconfig, version="1.31"
            ).stdout
        )
        assert pod["metadata"]["labels"] == {"tier": "gpu"}
        assert pod["spec"]["containers"][0]["resizePolicy"] == [
            {"resourceName": "memory", "restartPolicy": "RestartContainer"}
        ]
        fresh = manifest.read_text().replace("name: resizable", "name: fresh")
        kubectl("apply", "-f", "-", input=fresh, kubeconfig=older.kubeconfig, version="1.31")
        created = json.loads(
            kubectl("get", "pod", "fresh", "-o", "json", kubeconfig=older.kubeconfig, version="1.31").stdout
        )
        assert "resizePolicy" not in created["spec"]["containers"][0]
    finally:
        background_loop.run(older.server.stop())
        older.datastore.close()


def _job(name: str, managed_by: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": managed_by,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
            },
        },
    }


def test_from_1_32_a_job_managed_by_another_controller_is_left_to_it(
    background_loop: BackgroundLoop, tmp_path: Path
) -> None:
    """JobManagedBy is beta and on in 1.32: the tenant stores `spec.managedBy`, and the Job controller
    creates pods only for the Job that names it (`kubernetes.io/job-controller`), as kube's syncJob
    skips one managed elsewhere (MultiKueue's)."""
    with release_server(background_loop, tmp_path / "v133", "v1.33.1") as kubeconfig:

        async def up() -> ControlPlaneServices:
            plane = ControlPlaneServices(KubeClient.from_kubeconfig(kubeconfig))
            await plane.start()
            return plane

        plane = background_loop.run(up())
        api = config.new_client_from_config(config_file=str(kubeconfig))
        try:
            batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
            external = batch.create_namespaced_job("default", _job("external", "kueue.x-k8s.io/multikueue"))
            assert external.spec.managed_by == "kueue.x-k8s.io/multikueue"
            batch.create_namespaced_job("default", _job("ours", "kubernetes.io/job-controller"))

            def pods_of(job: str) -> list[Any]:
                selector = f"batch.kubernetes.io/job-name={job}"
                return core.list_namespaced_pod("default", label_selector=selector).items

            wait_for("the Job controller's own Job to get its pod", lambda: pods_of("ours"))
            wait_for("its status", lambda: batch.read_namespaced_job("ours", "default").status.active)
            assert pods_of("external") == []
            status = batch.read_namespaced_job("external", "default").status
            assert status.active is None and status.start_time is None
        finally:
            api.close()

            async def down() -> None:
                await plane.stop()
                await plane.client.close()

            background_loop.run(down())


ENV_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: relaxed-env}
spec:
  containers:
  - name: main
    image: busybox
    env: [{name: "MY VAR", value: "1"}]
"""


@pytest.mark.parametrize(("version", "accepted"), [("v1.31.4", False), ("v1.33.1", True)])
def test_env_var_names_follow_relaxed_environment_variable_validation(
    background_loop: BackgroundLoop, kubectl: Kubectl, tmp_path: Path, version: str, accepted: bool
) -> None:
    """RelaxedEnvironmentVariableValidation is on from 1.32: a name with a space is refused by a 1.31
    tenant with kube's message and taken by a 1.33 one (tests/apiserver/test_env_var_names.py)."""
    manifest = tmp_path / "env.yaml"
    manifest.write_text(ENV_POD)
    minor = version[1:5]
    with release_server(background_loop, tmp_path / "server", version) as kubeconfig:
        applied = kubectl("apply", "-f", str(manifest), kubeconfig=kubeconfig, version=minor, check=False)
        if accepted:
            assert applied.returncode == 0, applied.stderr
            pod = json.loads(kubectl("get", "pod", "relaxed-env", "-o", "json", kubeconfig=kubeconfig,
                                     version=minor).stdout)  # fmt: skip
            assert pod["spec"]["containers"][0]["env"] == [{"name": "MY VAR", "value": "1"}]
        else:
            assert applied.returncode == 1
            assert applied.stderr.strip().startswith(
                'The Pod "relaxed-env" is invalid: spec.containers[0].env[0].name: Invalid value: "MY VAR": '
                "a valid environment variable name must consist of alphabetic characters"
            ), applied.stderr


HOST_IPS_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: host-ips}
spec:
  containers:
  - name: main
    image: busybox
    env: [{name: IPS, valueFrom: {fieldRef: {fieldPath: status.hostIPs}}}]
"""


@pytest.mark.parametrize(("version", "accepted"), [("v1.28.15", False), ("v1.29.10", True)])
def test_status_host_ips_in_env_follows_the_pod_host_ips_gate(
    background_loop: BackgroundLoop, kubectl: Kubectl, tmp_path: Path, version: str, accepted: bool
) -> None:
    """PodHostIPs is off in 1.28 and on from 1.29: an env var from `status.hostIPs` is refused by a 1.28
    tenant with kube's words (validateDownwardAPIHostIPs) and taken by a 1.29 one."""
    manifest = tmp_path / "host-ips.yaml"
    manifest.write_text(HOST_IPS_POD)
    minor = version[1:5]
    with release_server(background_loop, tmp_path / "server", version) as kubeconfig:
        applied = kubectl("apply", "-f", str(manifest), kubeconfig=kubeconfig, version=minor, check=False)
        if accepted:
            assert applied.returncode == 0, applied.stderr
        else:
            assert applied.returncode == 1
            assert applied.stderr.strip() == (
                'The Pod "host-ips" is invalid: spec.containers[0].env[0].valueFrom.fieldRef: Forbidden: may '
                "not be set when feature gate 'PodHostIPs' is not enabled"
            ), applied.stderr


NEVER_RESTARTED_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: one-shot}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    resizePolicy: [{resourceName: memory, restartPolicy: RestartContainer}]
"""


@pytest.mark.parametrize(("version", "accepted"), [("v1.31.4", True), ("v1.33.1", False)])
def test_a_resize_policy_is_validated_where_its_gate_keeps_it(
    background_loop: BackgroundLoop, kubectl: Kubectl, tmp_path: Path, version: str, accepted: bool
) -> None:
    """A pod that never restarts may not ask for a restart on resize (tests/apiserver/
    test_resize_policy_validation.py). A 1.31 tenant drops the field before validating (its gate is off),
    so the pod is created without it; a 1.33 tenant refuses it with kube's message."""
    manifest = tmp_path / "one-shot.yaml"
    manifest.write_text(NEVER_RESTARTED_POD)
    minor = version[1:5]
    with release_server(background_loop, tmp_path / "server", version) as kubeconfig:
        applied = kubectl("apply", "-f", str(manifest), kubeconfig=kubeconfig, version=minor, check=False)
        if accepted:
            assert applied.returncode == 0, applied.stderr
            pod = json.loads(kubectl("get", "pod", "one-shot", "-o", "json", kubeconfig=kubeconfig,
                                     version=minor).stdout)  # fmt: skip
            assert "resizePolicy" not in pod["spec"]["containers"][0]
        else:
            assert applied.returncode == 1
            assert applied.stderr.strip() == (
                'The Pod "one-shot" is invalid: spec.containers[0].resizePolicy: Invalid value: '
                "\"RestartContainer\": must be 'NotRequired' when `restartPolicy` is 'Never'"
            ), applied.stderr
