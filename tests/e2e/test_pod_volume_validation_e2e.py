"""A pod whose volumes or env references kube would refuse is refused with kube's Invalid status, as the
real kubectl prints it and the official client reads it (the rules: tests/apiserver/test_pod_volume_validation.py)."""

from __future__ import annotations

import json

import kubernetes
import pytest
from apiserver_harness import Kubectl, RunningAPIServer

pytestmark = pytest.mark.slow  # drives real kubectl binaries

BROKEN_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: broken-volumes}
spec:
  volumes:
  - {name: settings, configMap: {}}
  - {name: scratch, emptyDir: {}, secret: {secretName: s}}
  containers:
  - name: main
    image: busybox
    env:
    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.containers}}}
    volumeMounts:
    - {name: settings, mountPath: /etc/settings}
"""


def test_kubectl_prints_each_volume_error_and_nothing_is_stored(
    kubectl: Kubectl, apiserver: RunningAPIServer
) -> None:
    applied = kubectl("apply", "-f", "-", input=BROKEN_POD, check=False)
    assert applied.returncode == 1
    # kubectl lists several causes one per line, each after a `* `
    lines = applied.stderr.strip().splitlines()
    assert lines[0].strip() == 'The Pod "broken-volumes" is invalid:'
    for expected in (
        "spec.volumes[0].configMap.name: Required value",
        "spec.volumes[1].secret: Forbidden: may not specify more than 1 volume type",
        'spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Invalid value: "spec.containers": error '
        "converting fieldPath: field label not supported: spec.containers",
        'spec.containers[0].volumeMounts[0].name: Not found: "settings"',
    ):
        assert f"* {expected}" in lines
    assert kubectl("get", "pod", "broken-volumes", check=False).returncode == 1


def test_the_python_client_reads_the_causes(apiserver: RunningAPIServer) -> None:
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(apiserver.kubeconfig), client_configuration=config)
    core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bad-projection"},
        "spec": {
            "containers": [{"name": "main", "image": "busybox"}],
            "volumes": [
                {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "/abs"}}]}}
            ],
        },
    }
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core.create_namespaced_pod("default", body)
    assert refused.value.status == 422
    status = json.loads(refused.value.body)
    assert status["reason"] == "Invalid"
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "/abs": must be a relative path',
            "field": "spec.volumes[0].projected.path",
        }
    ]
