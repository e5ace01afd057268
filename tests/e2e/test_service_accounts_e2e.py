"""A tenant's pods and their service accounts, through the real kubectl and the official client.

A tenant API server runs kube's ServiceAccount admission plugin (kube-apiserver enables it by default,
and Kamaji's TenantControlPlanes list it): a pod runs as `default` unless it names another account, an
account that does not exist refuses the pod, and every container gets the projected
`kube-api-access-<5 characters>` volume at /var/run/secrets/kubernetes.io/serviceaccount. The kubelet
of a 1.31 tenant reports that mount in the container's status. The plugin's unit facts are in
tests/apiserver/test_serviceaccount_admission.py.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer, start_server

from tenantgpu.controlplane import ControlPlaneServices

pytestmark = pytest.mark.slow

TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.fixture(scope="module")
def apiserver(
    background_loop: BackgroundLoop, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningAPIServer]:
    """A tenant's API server: with the ServiceAccount plugin, as the lab starts every tenant."""
    running = start_server(
        background_loop, tmp_path_factory.mktemp("apiserver"), service_account_admission=True
    )
    yield running
    background_loop.run(running.server.stop())
    running.datastore.close()


@pytest.fixture(scope="module")
def core(apiserver: RunningAPIServer, services: ControlPlaneServices) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))


def _pod(name: str, **spec: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
        }
    )


def test_a_pod_gets_the_token_volume_kubectl_describes(
    kubectl: Kubectl, core: kubernetes.client.CoreV1Api
) -> None:
    kubectl("create", "namespace", "tokens")
    # Created the moment its namespace is: the plugin waits for the controller-manager's `default`
    # account instead of refusing the pod.
    kubectl("create", "-n", "tokens", "-f", "-", input=_pod("web"))
    pod = core.read_namespaced_pod("web", "tokens")
    assert pod.spec.service_account_name == "default"
    (volume,) = pod.spec.volumes
    assert re.fullmatch(r"kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}", volume.name)
    sources = volume.projected.sources
    assert volume.projected.default_mode == 420
    assert (sources[0].service_account_token.path, sources[0].service_account_token.expiration_seconds) == (
        "token",
        3607,
    )
    assert sources[1].config_map.name == "kube-root-ca.crt"
    assert sources[2].downward_api.items[0].field_ref.field_path == "metadata.namespace"
    (mount,) = pod.spec.containers[0].volume_mounts
    assert (mount.name, mount.mount_path, mount.read_only) == (volume.name, TOKEN_PATH, True)

    described = kubectl("describe", "pod", "web", "-n", "tokens").stdout
    assert f"{TOKEN_PATH} from {volume.name} (ro)" in described
    assert "Projected (a volume that contains injected data from multiple sources)" in described
    assert re.search(r"TokenExpirationSeconds:\s+3607", described)
    assert re.search(r"ConfigMapName:\s+kube-root-ca.crt", described)


def test_a_missing_account_is_refused_until_it_is_created(
    kubectl: Kubectl, core: kubernetes.client.CoreV1Api
) -> None:
    kubectl("create", "namespace", "builds")
    refused = kubectl(
        "create", "-n", "builds", "-f", "-", input=_pod("job", serviceAccountName="builder"), check=False
    )
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'Error from server (Forbidden): error when creating "STDIN": pods "job" is forbidden: '
        'error looking up service account builds/builder: serviceaccount "builder" not found'
    )
    with pytest.raises(kubernetes.client.ApiException) as caught:
        core.create_namespaced_pod("builds", json.loads(_pod("job", serviceAccountName="builder")))
    status = json.loads(caught.value.body)
    assert (caught.value.status, status["reason"], status["details"]) == (
        403,
        "Forbidden",
        {"name": "job", "kind": "pods"},
    )

    kubectl("create", "serviceaccount", "builder", "-n", "builds")
    kubectl(
        "patch",
        "serviceaccount",
        "builder",
        "-n",
        "builds",
        "-p",
        '{"imagePullSecrets":[{"name":"registry"}]}',
    )
    kubectl("create", "-n", "builds", "-f", "-", input=_pod("job", serviceAccountName="builder"))
    pod = core.read_namespaced_pod("job", "builds")
    assert pod.spec.service_account_name == "builder"
    assert [s.name for s in pod.spec.image_pull_secrets] == ["registry"]


def test_opting_out_and_the_deprecated_alias(kubectl: Kubectl, core: kubernetes.client.CoreV1Api) -> None:
    kubectl("create", "namespace", "optout")
    kubectl("create", "serviceaccount", "quiet", "-n", "optout")
    kubectl(
        "patch", "serviceaccount", "quiet", "-n", "optout", "-p", '{"automountServiceAccountToken":false}'
    )
    kubectl("create", "-n", "optout", "-f", "-", input=_pod("a", serviceAccount="quiet"))
    kubectl(
        "create",
        "-n",
        "optout",
        "-f",
        "-",
        input=_pod("b", serviceAccount="quiet", automountServiceAccountToken=True),
    )
    a, b = core.read_namespaced_pod("a", "optout"), core.read_namespaced_pod("b", "optout")
    assert (a.spec.service_account_name, a.spec.service_account) == ("quiet", "quiet")
    assert a.spec.volumes is None and a.spec.containers[0].volume_mounts is None
    assert b.spec.volumes[0].name.startswith("kube-api-access-")


def _wait_for(what: str, probe: Callable[[], Any], seconds: float = 20) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {seconds} s")


def _failure(conditions: list[Any] | None) -> Any:
    return next((c for c in conditions or [] if c.type == "ReplicaFailure"), None)


def test_a_deployment_whose_account_is_missing_says_so_until_it_exists(
    kubectl: Kubectl, core: kubernetes.client.CoreV1Api, apiserver: RunningAPIServer
) -> None:
    apps = kubernetes.client.AppsV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))
    kubectl("create", "namespace", "apps")
    kubectl("create", "deployment", "web", "--image=busybox", "-n", "apps")
    patch = '{"spec":{"template":{"spec":{"serviceAccountName":"ghost"}}}}'
    kubectl("patch", "deployment", "web", "-n", "apps", "-p", patch)
    events = _wait_for(
        "FailedCreate event",
        lambda: core.list_namespaced_event("apps", field_selector="reason=FailedCreate").items,
    )
    refusal = (
        r'pods "web-[a-z0-9]+-" is forbidden: error looking up service account apps/ghost: '
        r'serviceaccount "ghost" not found'
    )
    assert events[0].type == "Warning" and events[0].involved_object.kind == "ReplicaSet"
    assert re.fullmatch("Error creating: " + refusal, events[0].message)
    # The controller tries again and again; its recorder counts the repeats on the one event, as
    # client-go's does, and kubectl describe shows the count.
    counted = _wait_for(
        "the FailedCreate counted",
        lambda: [
            e
            for e in core.list_namespaced_event("apps", field_selector="reason=FailedCreate").items
            if e.count >= 3
        ],
    )
    assert len(core.list_namespaced_event("apps", field_selector="reason=FailedCreate").items) == 1
    described = kubectl("describe", "replicaset", counted[0].involved_object.name, "-n", "apps").stdout
    assert re.search(
        r"Warning\s+FailedCreate\s+\S+ \(x\d+ over \S+\)\s+replicaset-controller\s+Error creating:", described
    )
    # kube's ReplicaSet controller writes the refusal into a ReplicaFailure condition, and the
    # Deployment controller copies it, which is what `kubectl describe deployment` shows.
    rs_name = events[0].involved_object.name
    rs_failure = _wait_for(
        "ReplicaFailure on the ReplicaSet",
        lambda: _failure(apps.read_namespaced_replica_set(rs_name, "apps").status.conditions),
    )
    assert (rs_failure.status, rs_failure.reason) == ("True", "FailedCreate")
    assert re.fullmatch(refusal, rs_failure.message)
    deploy_failure = _wait_for(
        "ReplicaFailure on the Deployment",
        lambda: _failure(apps.read_namespaced_deployment("web", "apps").status.conditions),
    )
    assert (deploy_failure.reason, deploy_failure.message) == ("FailedCreate", rs_failure.message)
    assert re.search(
        r"ReplicaFailure\s+True\s+FailedCreate", kubectl("describe", "deployment", "web", "-n", "apps").stdout
    )

    kubectl("create", "serviceaccount", "ghost", "-n", "apps")
    _wait_for(
        "a pod running as ghost",
        lambda: [p for p in core.list_namespaced_pod("apps").items if p.spec.service_account_name == "ghost"],
    )
    _wait_for(
        "the ReplicaFailure gone",
        lambda: (
            _failure(apps.read_namespaced_replica_set(rs_name, "apps").status.conditions) is None
            and _failure(apps.read_namespaced_deployment("web", "apps").status.conditions) is None
        ),
    )


def test_a_daemonset_refused_for_a_missing_account_gets_its_pods_once_it_exists(
    kubectl: Kubectl, core: kubernetes.client.CoreV1Api, apiserver: RunningAPIServer
) -> None:
    """kube's DaemonSet controller queues the set again after a refused create (syncNodes returns the
    errors): a workload written before its ServiceAccount, as Kamaji writes its kube-proxy add-on,
    gets its pods once the account is there."""
    apps = kubernetes.client.AppsV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))
    core.create_node({"metadata": {"name": "ds-node", "labels": {"kubernetes.io/hostname": "ds-node"}}})
    kubectl("create", "namespace", "daemons")
    apps.create_namespaced_daemon_set(
        "daemons",
        {
            "metadata": {"name": "proxy"},
            "spec": {
                "selector": {"matchLabels": {"app": "proxy"}},
                "template": {
                    "metadata": {"labels": {"app": "proxy"}},
                    "spec": {
                        "serviceAccountName": "proxy",
                        "containers": [{"name": "main", "image": "proxy"}],
                    },
                },
            },
        },
    )
    refused = _wait_for(
        "FailedCreate event",
        lambda: core.list_namespaced_event("daemons", field_selector="reason=FailedCreate").items,
    )
    assert refused[0].involved_object.kind == "DaemonSet"
    assert refused[0].message == (
        'Error creating: pods "proxy-" is forbidden: error looking up service account daemons/proxy: '
        'serviceaccount "proxy" not found'
    )
    kubectl("create", "serviceaccount", "proxy", "-n", "daemons")
    pods = _wait_for("the daemon pod", lambda: core.list_namespaced_pod("daemons").items)
    assert pods[0].spec.service_account_name == "proxy"
