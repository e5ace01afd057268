"""HAMi's chart objects as the lab installs them (chart v2.10.0, `helm install hami -n kube-system`): the
scheduler's Deployment and the device plugin's DaemonSet with the shapes a user of a real HAMi cluster
sees, and the ConfigMaps and Secret their pods mount."""

from __future__ import annotations

import base64
import json
from typing import Any

import yaml

from tenantgpu.gpushare.config import SharingConfig
from tenantgpu.hami.install import (
    RELEASE_LABELS,
    WEBHOOK_IGNORE_LABEL,
    chart_workloads,
    device_config_map,
    device_plugin_daemon_set,
    device_plugin_monitor_service,
    kube_scheduler_tag,
    node_config_map,
    scheduler_config_map,
    scheduler_deployment,
    scheduler_service,
    tls_secret,
    webhook_configuration,
)
from tenantgpu.hami.tls import ServingCert, service_hosts

SELECTOR = {"app.kubernetes.io/name": "hami", "app.kubernetes.io/instance": "hami"}


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector of matchLabels and In/NotIn expressions, as the API server evaluates it."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        value = labels.get(expression["key"])
        inside = value in expression["values"]
        if (expression["operator"] == "In") != inside:
            return False
    return True


def _container(pod_spec: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in pod_spec["containers"] if c["name"] == name)


def _volume_names(pod_spec: dict[str, Any]) -> set[str]:
    return {v["name"] for v in pod_spec["volumes"]}


def test_the_scheduler_deployment_selects_its_pods_and_the_service_selects_them_too() -> None:
    deployment = scheduler_deployment(SharingConfig(), "v1.31.4")
    meta, spec = deployment["metadata"], deployment["spec"]
    assert (deployment["kind"], meta["name"], meta["namespace"]) == (
        "Deployment",
        "hami-scheduler",
        "kube-system",
    )
    assert meta["labels"] == {"app.kubernetes.io/component": "hami-scheduler", **RELEASE_LABELS}
    assert spec["replicas"] == 1
    assert spec["selector"] == {"matchLabels": {"app.kubernetes.io/component": "hami-scheduler", **SELECTOR}}
    labels = spec["template"]["metadata"]["labels"]
    assert _matches(spec["selector"], labels)
    # the Service's Endpoints come from this pod once HAMi's scheduler has labelled it the leader
    selector = {"matchLabels": scheduler_service()["spec"]["selector"]}
    assert not _matches(selector, labels)
    assert _matches(selector, {**labels, "hami.io/scheduler-role": "leader"})
    assert not _matches(selector, {**labels, "hami.io/scheduler-role": "follower"})
    # HAMi's webhook leaves HAMi's own pods alone
    assert labels[WEBHOOK_IGNORE_LABEL] == "ignore"
    assert not _matches(webhook_configuration(b"ca")["webhooks"][0]["objectSelector"], labels)


def test_the_scheduler_pod_runs_kube_scheduler_and_the_extender_as_the_charts_account() -> None:
    pod = scheduler_deployment(SharingConfig(node_policy="spread", gpu_policy="binpack"), "v1.33.1+k3s1")[
        "spec"
    ]["template"]["spec"]
    assert pod["serviceAccountName"] == "hami-scheduler"
    assert pod["priorityClassName"] == "system-node-critical"
    assert [c["name"] for c in pod["containers"]] == ["kube-scheduler", "vgpu-scheduler-extender"]
    kube = _container(pod, "kube-scheduler")
    assert kube["image"].endswith("/kube-scheduler:v1.33.1")  # the cluster's version, as the chart reads it
    assert kube["command"][:2] == ["kube-scheduler", "--config=/config/config.yaml"]
    extender = _container(pod, "vgpu-scheduler-extender")
    assert extender["image"] == "docker.io/projecthami/hami:v2.10.0"
    assert extender["command"][0] == "scheduler"
    assert "--node-scheduler-policy=spread" in extender["command"]
    assert "--gpu-scheduler-policy=binpack" in extender["command"]
    assert "--scheduler-name=hami-scheduler" in extender["command"]
    assert {(p["name"], p["containerPort"]) for p in extender["ports"]} == {("https", 443), ("metrics", 9395)}
    assert {e["name"] for e in extender["env"]} == {"POD_NAME", "POD_NAMESPACE", "HAMI_NODELOCK_EXPIRE"}
    assert {"name": "HAMI_NODELOCK_EXPIRE", "value": "5m"} in extender["env"]
    mounted = {m["name"] for c in pod["containers"] for m in c["volumeMounts"]}
    assert mounted == _volume_names(pod) == {"tls-config", "scheduler-config", "device-config"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["tls-config"]["secret"]["secretName"] == "hami-scheduler-tls"
    assert volumes["scheduler-config"]["configMap"]["name"] == "hami-scheduler"
    assert volumes["device-config"]["configMap"]["name"] == "hami-scheduler-device"


def test_the_device_plugin_daemon_set_runs_on_gpu_nodes_one_node_at_a_time() -> None:
    ds = device_plugin_daemon_set(SharingConfig())
    meta, spec = ds["metadata"], ds["spec"]
    assert (ds["kind"], meta["name"], meta["namespace"]) == ("DaemonSet", "hami-device-plugin", "kube-system")
    assert meta["labels"] == {"app.kubernetes.io/component": "hami-device-plugin", **RELEASE_LABELS}
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"] == {
        "matchLabels": {"app.kubernetes.io/component": "hami-device-plugin", **SELECTOR}
    }
    assert _matches(spec["selector"], labels) and labels[WEBHOOK_IGNORE_LABEL] == "ignore"
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"gpu": "on"}
    assert pod["serviceAccountName"] == "hami-device-plugin"
    assert pod["priorityClassName"] == "system-node-critical"
    assert pod["hostPID"] is True and "runtimeClassName" not in pod
    assert [c["name"] for c in pod["containers"]] == ["device-plugin", "vgpu-monitor"]
    plugin, monitor = pod["containers"]
    assert plugin["command"][0] == "nvidia-device-plugin" and plugin["securityContext"]["privileged"] is True
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in plugin["env"]
    assert monitor["command"][0] == "vGPUmonitor"
    assert monitor["ports"] == [{"name": "metrics", "containerPort": 9394, "protocol": "TCP"}]
    mounted = {m["name"] for c in pod["containers"] for m in c["volumeMounts"]}
    assert mounted == _volume_names(pod)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["deviceconfig"]["configMap"]["name"] == "hami-device-plugin"
    assert volumes["device-config"]["configMap"]["name"] == "hami-scheduler-device"
    assert volumes["device-plugin"]["hostPath"]["path"] == "/var/lib/kubelet/device-plugins"

    under_class = device_plugin_daemon_set(SharingConfig(), "nvidia")["spec"]["template"]["spec"]
    assert under_class["runtimeClassName"] == "nvidia"


def test_the_mounted_configuration_follows_the_lab_files_settings() -> None:
    sharing = SharingConfig(device_split_count=20, default_memory=2048, device_memory_scaling=1.5)
    device = yaml.safe_load(device_config_map(sharing)["data"]["device-config.yaml"])["nvidia"]
    assert device["deviceSplitCount"] == 20 and device["defaultMemory"] == 2048
    assert device["deviceMemoryScaling"] == 1.5 and device["deviceCoreScaling"] == 1
    assert device["resourceMemoryName"] == "nvidia.com/gpumem"
    scheduler = yaml.safe_load(scheduler_config_map(sharing)["data"]["config.yaml"])
    assert scheduler["kind"] == "KubeSchedulerConfiguration"
    assert scheduler["profiles"] == [{"schedulerName": "hami-scheduler"}]
    [extender] = scheduler["extenders"]
    assert extender["urlPrefix"] == "https://127.0.0.1:443" and extender["bindVerb"] == "bind"
    assert {"name": "nvidia.com/gpu", "ignoredByScheduler": True} in extender["managedResources"]
    [node] = json.loads(node_config_map(sharing)["data"]["config.json"])["nodeconfig"]
    assert node["devicesplitcount"] == 20 and node["devicememoryscaling"] == 1.5
    # a changed configuration changes the pod templates, so `helm upgrade` would roll the pods
    before = scheduler_deployment(SharingConfig(), "v1.31.4")["spec"]["template"]["metadata"]["annotations"]
    after = scheduler_deployment(sharing, "v1.31.4")["spec"]["template"]["metadata"]["annotations"]
    assert set(before) == {"checksum/hami-scheduler-config", "checksum/hami-scheduler-device-config"}
    assert before != after
    assert (
        before
        == scheduler_deployment(SharingConfig(), "v1.31.4")["spec"]["template"]["metadata"]["annotations"]
    )


def test_the_tls_secret_holds_the_webhooks_certificate_and_everything_the_pods_mount_is_installed() -> None:
    cert = ServingCert.issue(service_hosts("hami-scheduler", "kube-system"))
    secret = tls_secret(cert)
    assert secret["metadata"] == {"name": "hami-scheduler-tls", "namespace": "kube-system"}
    assert base64.b64decode(secret["data"]["tls.crt"]) == cert.cert_pem
    assert base64.b64decode(secret["data"]["tls.key"]) == cert.key_pem

    objects = chart_workloads(SharingConfig(), "v1.31.4", cert=cert)
    named = {(resource, body["metadata"]["name"]) for resource, body in objects}
    for resource, body in objects:
        if resource not in ("deployments", "daemonsets"):
            continue
        for volume in body["spec"]["template"]["spec"]["volumes"]:
            if "configMap" in volume:
                assert ("configmaps", volume["configMap"]["name"]) in named
            if "secret" in volume:
                assert ("secrets", volume["secret"]["secretName"]) in named
    # what the pods mount comes before the workloads, as helm orders the kinds
    kinds = [resource for resource, _ in objects]
    assert kinds.index("deployments") > max(i for i, k in enumerate(kinds) if k in ("configmaps", "secrets"))
    assert "secrets" not in [r for r, _ in chart_workloads(SharingConfig(), "v1.31.4")]


def test_the_kube_scheduler_tag_is_the_servers_version_without_a_distributions_suffix() -> None:
    assert kube_scheduler_tag("v1.31.4") == "v1.31.4"
    assert kube_scheduler_tag("v1.31.1+k3s1") == "v1.31.1"
    assert kube_scheduler_tag("v1.30.8-eks-2d5f260") == "v1.30.8"


def test_the_charts_services_are_node_ports_to_the_webhook_the_extenders_and_the_monitors_metrics() -> None:
    scheduler, monitor = scheduler_service(), device_plugin_monitor_service()
    assert (scheduler["metadata"]["name"], scheduler["spec"]["type"]) == ("hami-scheduler", "NodePort")
    assert [(p["name"], p["port"], p["targetPort"], p["nodePort"]) for p in scheduler["spec"]["ports"]] == [
        ("http", 443, 443, 31998),
        ("monitor", 31993, 9395, 31993),
    ]
    assert (monitor["metadata"]["name"], monitor["spec"]["type"]) == (
        "hami-device-plugin-monitor",
        "NodePort",
    )
    assert [(p["name"], p["port"], p["targetPort"], p["nodePort"]) for p in monitor["spec"]["ports"]] == [
        ("monitorport", 31992, 9394, 31992)
    ]
    # the monitor's Service selects every device plugin pod, whose `vgpu-monitor` declares the port
    daemonset = device_plugin_daemon_set(SharingConfig())
    labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert _matches({"matchLabels": monitor["spec"]["selector"]}, labels)
    ports = [p for c in daemonset["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])]
    assert {"name": "metrics", "containerPort": 9394, "protocol": "TCP"} in ports
    assert all(s["metadata"]["labels"]["helm.sh/chart"] == "hami-2.10.0" for s in (scheduler, monitor))
