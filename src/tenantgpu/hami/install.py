"""Install HAMi into a tenant's API like its Helm chart (release `hami` in kube-system): its service
accounts and RBAC, webhook configuration, Service, ConfigMaps, TLS Secret, and its two workloads, the
Deployment `hami-scheduler` and the DaemonSet `hami-device-plugin`.

The objects are built here from the facts of the chart's templates and default values at v2.10.0
(Project-HAMi/HAMi `charts/hami/templates/scheduler/{deployment,configmap,device-configmap}.yaml`,
`templates/device-plugin/{daemonsetnvidia,configmap}.yaml`, `_helpers.tpl`, `values.yaml`), rendered as
`helm install hami charts/hami -n kube-system` would, with the lab file's HAMi settings as values.

Simulation boundary: the tenant's own controllers make the workloads' pods, its default scheduler places
them and the simulated kubelet runs their containers like any others (the chart's commands are unknown
to it, so they simply keep running). What HAMi does is done by the lab's in-process scheduler, webhook
and device plugin in the worker process, under the chart's service accounts; the pods are what the
cluster shows of them, and the Service's Endpoints follow the scheduler pod."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

import yaml

from tenantgpu.gpushare.config import SharingConfig
from tenantgpu.hami.tls import ServingCert
from tenantgpu.kubeclient import ApiError, KubeClient
from tenantgpu.kubeclient.ensure import ensure

NAMESPACE = "kube-system"
SERVICE = "hami-scheduler"
WEBHOOK_CONFIGURATION = "hami-webhook"  # the chart's "<fullname>-webhook"
WEBHOOK_NAME = "vgpu.hami.io"
WEBHOOK_PATH = "/webhook"
WEBHOOK_IGNORE_LABEL = "hami.io/webhook"
CHART_LABELS = {"app.kubernetes.io/name": "hami", "app.kubernetes.io/instance": "hami"}
CHART_VERSION = "2.10.0"
# The chart's common labels (`hami-vgpu.labels`), as `helm install hami` renders them.
RELEASE_LABELS = {
    "helm.sh/chart": f"hami-{CHART_VERSION}",
    **CHART_LABELS,
    "app.kubernetes.io/version": CHART_VERSION,
    "app.kubernetes.io/managed-by": "Helm",
}
SCHEDULER_ACCOUNT = "hami-scheduler"
# HAMi's scheduler labels its own pod leader and other replicas follower; the Service selects the leader
SCHEDULER_ROLE_LABEL = "hami.io/scheduler-role"
SCHEDULER_LEADER = "leader"
SCHEDULER_FOLLOWER = "follower"
DEVICE_PLUGIN_ACCOUNT = "hami-device-plugin"
# The chart names its scheduler's objects (Deployment, ConfigMap, account) and its device plugin's
# (DaemonSet, node ConfigMap, account) after the release: "<release>-scheduler", "<release>-device-plugin".
SCHEDULER = "hami-scheduler"
DEVICE_PLUGIN = "hami-device-plugin"
# the containers that run HAMi's own code (beside kube-scheduler and vgpu-monitor)
EXTENDER_CONTAINER = "vgpu-scheduler-extender"
DEVICE_PLUGIN_CONTAINER = "device-plugin"
SCHEDULER_CONFIG = SCHEDULER  # KubeSchedulerConfiguration of the pod's kube-scheduler
DEVICE_CONFIG = f"{SCHEDULER}-device"  # device-config.yaml, read by the extender and the device plugin
NODE_CONFIG = DEVICE_PLUGIN  # the device plugin's per-node config.json
TLS_SECRET = f"{SCHEDULER}-tls"  # the webhook's serving certificate (the chart's certgen job writes it)
HAMI_IMAGE = f"docker.io/projecthami/hami:v{CHART_VERSION}"
# The chart's kubeScheduler.image with no tag: the tag is the cluster's version (`strippedKubeVersion`).
KUBE_SCHEDULER_REPOSITORY = "registry.cn-hangzhou.aliyuncs.com/google_containers/kube-scheduler"
GPU_NODE_SELECTOR = {"gpu": "on"}  # devicePlugin.nvidiaNodeSelector; the lab's GPU workers carry it
PRIORITY_CLASS = "system-node-critical"
HOOK_PATH = "/usr/local"  # global.gpuHookPath
METRICS_PORT = 9395  # scheduler.metricsBindAddress ":9395"
WEBHOOK_CONTAINER_PORT = 443  # the extender's `https` port, the Service's httpTargetPort
MONITOR_PORT = 9394


def webhook_configuration(
    ca_bundle: bytes, *, url: str | None = None, service_port: int = 443, failure_policy: str = "Ignore"
) -> dict[str, Any]:
    """HAMi's MutatingWebhookConfiguration: rules, selectors, failurePolicy, timeout as in the chart."""
    client_config: dict[str, Any] = {"caBundle": base64.b64encode(ca_bundle).decode()}
    if url:
        client_config["url"] = url  # the chart's customURL mode
    else:
        client_config["service"] = {
            "name": SERVICE,
            "namespace": NAMESPACE,
            "path": WEBHOOK_PATH,
            "port": service_port,
        }
    not_ignored = {
        "matchExpressions": [{"key": WEBHOOK_IGNORE_LABEL, "operator": "NotIn", "values": ["ignore"]}]
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_CONFIGURATION, "labels": dict(CHART_LABELS)},
        "webhooks": [
            {
                "name": WEBHOOK_NAME,
                "admissionReviewVersions": ["v1beta1"],
                "clientConfig": client_config,
                "failurePolicy": failure_policy,
                "matchPolicy": "Equivalent",
                "namespaceSelector": not_ignored,
                "objectSelector": not_ignored,
                "reinvocationPolicy": "Never",
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                        "scope": "*",
                    }
                ],
                "sideEffects": "None",
                "timeoutSeconds": 10,
            }
        ],
    }


def scheduler_service() -> dict[str, Any]:
    """Service `kube-system/hami-scheduler` as the chart makes it: NodePort, the webhook's `http` 443 (node
    port 31998) and the extender's `monitor` 31993 on its metrics port 9395, selecting the scheduler pod
    that leads (`hami.io/scheduler-role: leader`, which HAMi's scheduler sets on its own pod). The API
    server reaches the webhook by the service's name through the tunnel, and `services/…/proxy` the
    metrics at the Endpoints' pod address."""
    labels = {"app.kubernetes.io/component": "hami-scheduler", **RELEASE_LABELS}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "type": "NodePort",
            "selector": {
                "app.kubernetes.io/component": "hami-scheduler",
                SCHEDULER_ROLE_LABEL: SCHEDULER_LEADER,
                **CHART_LABELS,
            },
            "ports": [
                {
                    "name": "http",
                    "port": 443,
                    "targetPort": WEBHOOK_CONTAINER_PORT,
                    "nodePort": 31998,
                    "protocol": "TCP",
                },
                {
                    "name": "monitor",
                    "port": 31993,
                    "targetPort": METRICS_PORT,
                    "nodePort": 31993,
                    "protocol": "TCP",
                },
            ],
        },
    }


def device_plugin_monitor_service() -> dict[str, Any]:
    """Service `kube-system/hami-device-plugin-monitor` as the chart makes it: NodePort 31992 to the vGPU
    monitor's 9394 on every device plugin pod."""
    labels = {"app.kubernetes.io/component": DEVICE_PLUGIN, **RELEASE_LABELS}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{DEVICE_PLUGIN}-monitor", "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "type": "NodePort",
            "selector": {"app.kubernetes.io/component": DEVICE_PLUGIN, **CHART_LABELS},
            "ports": [
                {
                    "name": "monitorport",
                    "port": 31992,
                    "targetPort": MONITOR_PORT,
                    "nodePort": 31992,
                    "protocol": "TCP",
                }
            ],
        },
    }


def _rule(resources: str, verbs: str, group: str = "") -> dict[str, Any]:
    return {"apiGroups": [group], "resources": resources.split(), "verbs": verbs.split()}


def _binding(kind: str, name: str, role_kind: str, role: str, account: str) -> dict[str, Any]:
    component = "hami-device-plugin" if account == DEVICE_PLUGIN_ACCOUNT else "hami-scheduler"
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"app.kubernetes.io/component": component, **RELEASE_LABELS},
    }
    if kind == "RoleBinding":
        meta["namespace"] = NAMESPACE
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}],
    }


def rbac_objects() -> list[tuple[str, dict[str, Any]]]:
    """The chart's identities, as (resource, object): the scheduler's and the device plugin's service
    accounts, their ClusterRoles (`hami-scheduler`; the device plugin's `hami-device-plugin-monitor`), the
    scheduler's bindings to them and to kube's `system:kube-scheduler` and `system:volume-scheduler` (its
    pod also runs kube-scheduler), and its Role for leader-election leases in its namespace."""
    scheduler = {"app.kubernetes.io/component": "hami-scheduler", **RELEASE_LABELS}
    plugin = {"app.kubernetes.io/component": "hami-device-plugin", **RELEASE_LABELS}
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        (
            "serviceaccounts",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": SCHEDULER_ACCOUNT, "namespace": NAMESPACE, "labels": scheduler},
            },
        ),
        (
            "serviceaccounts",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": DEVICE_PLUGIN_ACCOUNT, "namespace": NAMESPACE, "labels": plugin},
            },
        ),
        (
            "clusterroles",
            {
                "apiVersion": rbac,
                "kind": "ClusterRole",
                "metadata": {"name": SCHEDULER_ACCOUNT, "labels": scheduler},
                "rules": [
                    _rule("pods configmaps", "get list watch patch"),
                    _rule("pods/binding", "create"),
                    _rule("nodes", "get list patch watch"),
                    _rule("events", "create get list"),
                    _rule("resourcequotas", "get list watch"),
                ],
            },
        ),
        (
            "clusterroles",
            {
                "apiVersion": rbac,
                "kind": "ClusterRole",
                # the device plugin's template names it without the component labels
                "metadata": {"name": f"{DEVICE_PLUGIN_ACCOUNT}-monitor"},
                "rules": [
                    _rule("pods", "get create watch list update patch"),
                    _rule("nodes", "get update list patch"),
                    _rule("events", "list create update"),
                ],
            },
        ),
        (
            "clusterrolebindings",
            _binding(
                "ClusterRoleBinding",
                f"{SCHEDULER_ACCOUNT}-kube",
                "ClusterRole",
                "system:kube-scheduler",
                SCHEDULER_ACCOUNT,
            ),
        ),
        (
            "clusterrolebindings",
            _binding(
                "ClusterRoleBinding",
                f"{SCHEDULER_ACCOUNT}-volume",
                "ClusterRole",
                "system:volume-scheduler",
                SCHEDULER_ACCOUNT,
            ),
        ),
        (
            "clusterrolebindings",
            _binding(
                "ClusterRoleBinding", SCHEDULER_ACCOUNT, "ClusterRole", SCHEDULER_ACCOUNT, SCHEDULER_ACCOUNT
            ),
        ),
        (
            "roles",
            {
                "apiVersion": rbac,
                "kind": "Role",
                "metadata": {"name": SCHEDULER_ACCOUNT, "namespace": NAMESPACE, "labels": scheduler},
                "rules": [_rule("leases", "create list watch get update patch", "coordination.k8s.io")],
            },
        ),
        (
            "rolebindings",
            _binding("RoleBinding", SCHEDULER_ACCOUNT, "Role", SCHEDULER_ACCOUNT, SCHEDULER_ACCOUNT),
        ),
        (
            "clusterrolebindings",
            _binding(
                "ClusterRoleBinding",
                DEVICE_PLUGIN_ACCOUNT,
                "ClusterRole",
                f"{DEVICE_PLUGIN_ACCOUNT}-monitor",
                DEVICE_PLUGIN_ACCOUNT,
            ),
        ),
    ]


async def install_identities(client: KubeClient) -> None:
    """The chart's service accounts and RBAC (`rbac_objects`), written before its components start, as
    `helm install` writes them before their pods run."""
    await _ensure_namespace(client)
    for resource, body in rbac_objects():
        await _apply(client, resource, body)


async def _ensure_namespace(client: KubeClient) -> None:
    try:
        await client.create("namespaces", {"metadata": {"name": NAMESPACE}})
    except ApiError as err:
        if err.reason != "AlreadyExists":
            raise


def runtime_class(name: str) -> dict[str, Any]:
    """The RuntimeClass HAMi's chart creates with `devicePlugin.createRuntimeClass` (a pre-install hook):
    named by `devicePlugin.runtimeClassName`, with the NVIDIA container toolkit's handler."""
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": name, "annotations": {"helm.sh/hook": "pre-install,pre-upgrade"}},
        "handler": "nvidia",
    }


def kube_scheduler_tag(git_version: str) -> str:
    """The chart's `strippedKubeVersion`: the server's version without a distribution's suffix
    (`v1.31.1+k3s1` and `v1.31.1-eks-2d5f260` give `v1.31.1`)."""
    match = re.match(r"v\d+\.\d+\.\d+", git_version)
    return match.group(0) if match else git_version


def _number(value: float) -> float | int:
    """A chart value as Helm prints it: `1`, not `1.0`."""
    return int(value) if float(value).is_integer() else value


def _component_labels(component: str) -> dict[str, str]:
    """What the chart's selectors match: the component and `hami-vgpu.selectorLabels`."""
    return {"app.kubernetes.io/component": component, **CHART_LABELS}


def _config_map(name: str, component: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/component": component, **RELEASE_LABELS},
        },
        "data": data,
    }


def _managed_resources(sharing: SharingConfig) -> list[dict[str, Any]]:
    """The extender's managedResources, which kube-scheduler leaves to it. The chart also lists every
    other vendor's resources; the lab has NVIDIA cards only, so only HAMi's NVIDIA resources are named."""
    names = (
        sharing.resource_count_name,
        sharing.resource_memory_name,
        sharing.resource_core_name,
        sharing.resource_memory_percentage_name,
        sharing.resource_priority_name,
    )
    return [{"name": name, "ignoredByScheduler": True} for name in names]


def scheduler_config_map(sharing: SharingConfig) -> dict[str, Any]:
    """ConfigMap `hami-scheduler`: the KubeSchedulerConfiguration (v1, the lab's releases are all past
    1.25) of the pod's kube-scheduler, a profile of HAMi's scheduler name whose extender is the pod's
    other container, over HTTPS on 127.0.0.1:443 (the admission webhook is on)."""
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {
            "leaderElect": True,
            "resourceName": sharing.scheduler_name,
            "resourceNamespace": NAMESPACE,
        },
        "profiles": [{"schedulerName": sharing.scheduler_name}],
        "extenders": [
            {
                "urlPrefix": "https://127.0.0.1:443",
                "enableHTTPS": True,
                "tlsConfig": {"insecure": True},
                "filterVerb": "filter",
                "bindVerb": "bind",
                "nodeCacheCapable": True,
                "weight": 1,
                "httpTimeout": "30s",
                "managedResources": _managed_resources(sharing),
            }
        ],
    }
    return _config_map(SCHEDULER_CONFIG, SCHEDULER, {"config.yaml": yaml.safe_dump(config, sort_keys=False)})


def device_config_map(sharing: SharingConfig) -> dict[str, Any]:
    """ConfigMap `hami-scheduler-device`: `device-config.yaml` with the NVIDIA settings the lab file
    gives (resource names, defaults, split count, scaling). The chart's file has sections for other
    vendors and NVIDIA's MIG profiles too, which no simulated card uses."""
    nvidia = {
        "resourceCountName": sharing.resource_count_name,
        "resourceMemoryName": sharing.resource_memory_name,
        "resourceMemoryPercentageName": sharing.resource_memory_percentage_name,
        "resourceCoreName": sharing.resource_core_name,
        "resourcePriorityName": sharing.resource_priority_name,
        "overwriteEnv": sharing.overwrite_env,
        "defaultMemory": sharing.default_memory,
        "defaultCores": sharing.default_cores,
        "defaultGPUNum": sharing.default_gpu_num,
        "preConfiguredDeviceMemory": 0,
        "memoryFactor": sharing.memory_factor,
        "deviceSplitCount": sharing.device_split_count,
        "deviceMemoryScaling": _number(sharing.device_memory_scaling),
        "deviceCoreScaling": _number(sharing.device_core_scaling),
        "enableNumaTopology": False,
        "gpuCorePolicy": sharing.gpu_core_policy,
        "libCudaLogLevel": sharing.lib_cuda_log_level,
        "runtimeClassName": sharing.runtime_class_name,
    }
    text = yaml.safe_dump({"nvidia": nvidia}, sort_keys=False)
    return _config_map(DEVICE_CONFIG, SCHEDULER, {"device-config.yaml": text})


def node_config_map(sharing: SharingConfig) -> dict[str, Any]:
    """ConfigMap `hami-device-plugin`: the device plugin's per-node `config.json`, the chart's default
    (one entry for a node named `your-node-name`, which matches no node) with the lab's split count and
    memory scaling."""
    entry = {
        "name": "your-node-name",
        "operatingmode": "hami-core",
        "devicememoryscaling": _number(sharing.device_memory_scaling),
        "devicesplitcount": sharing.device_split_count,
        "preconfigureddevicememory": 0,
        "enablenumatopology": False,
        "migstrategy": "none",
        "filterdevices": {"uuid": [], "index": []},
        "enablegetpreferredallocation": False,
    }
    text = json.dumps({"nodeconfig": [entry]}, indent=2) + "\n"
    return _config_map(NODE_CONFIG, DEVICE_PLUGIN, {"config.json": text})


def tls_secret(cert: ServingCert) -> dict[str, Any]:
    """Secret `hami-scheduler-tls`, which the chart's certgen job creates before the scheduler starts:
    the webhook's serving certificate and key (the names the chart asks for) and the CA of its
    caBundle. In the lab it holds the certificate the in-process webhook serves with."""

    def encode(pem: bytes) -> str:
        return base64.b64encode(pem).decode()

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": TLS_SECRET, "namespace": NAMESPACE},
        "type": "Opaque",
        "data": {
            "ca": encode(cert.ca_pem),
            "tls.crt": encode(cert.cert_pem),
            "tls.key": encode(cert.key_pem),
        },
    }


def _checksums(scheduler_config: dict[str, Any], device_config: dict[str, Any]) -> dict[str, str]:
    """The pod templates' `checksum/…` annotations, from the two ConfigMaps: a changed configuration
    rolls the pods, as with `helm upgrade`. (Helm hashes the rendered YAML; these hash the objects.)"""

    def digest(obj: dict[str, Any]) -> str:
        return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()

    return {
        "checksum/hami-scheduler-config": digest(scheduler_config),
        "checksum/hami-scheduler-device-config": digest(device_config),
    }


def _checksums_of(sharing: SharingConfig) -> dict[str, str]:
    return _checksums(scheduler_config_map(sharing), device_config_map(sharing))


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _https_probe(path: str) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "https", "scheme": "HTTPS"},
        "initialDelaySeconds": 10,
        "periodSeconds": 10,
        "failureThreshold": 3,
        "timeoutSeconds": 5,
    }


def scheduler_deployment(
    sharing: SharingConfig, kube_version: str, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """Deployment `kube-system/hami-scheduler`: one pod (leader election on, one replica) of the chart's
    kube-scheduler (image tagged with the cluster's version) and HAMi's scheduler extender, which also
    serves the admission webhook on 443. Its pod template carries the Service's selector labels and
    `hami.io/webhook: ignore`, so HAMi's webhook leaves it alone. The chart's readiness probe is kept; the
    simulated kubelet runs no probes."""
    name = sharing.scheduler_name
    extender_args = [
        "scheduler",
        "--http_bind=0.0.0.0:443",
        "--cert_file=/tls/tls.crt",
        "--key_file=/tls/tls.key",
        f"--scheduler-name={name}",
        f"--metrics-bind-address=:{METRICS_PORT}",
        f"--node-scheduler-policy={sharing.node_policy}",
        f"--gpu-scheduler-policy={sharing.gpu_policy}",
        f"--force-overwrite-default-scheduler={str(sharing.force_overwrite_default_scheduler).lower()}",
        "--device-config-file=/device-config.yaml",
        "--leader-elect=true",
        f"--leader-elect-resource-name={name}",
        f"--leader-elect-resource-namespace={NAMESPACE}",
        "--debug",
        "-v=4",
    ]
    lock_minutes = sharing.node_lock_timeout_seconds / 60
    lock_expire = (
        f"{int(lock_minutes)}m"
        if lock_minutes.is_integer()
        else f"{_number(sharing.node_lock_timeout_seconds)}s"
    )
    pod_spec = {
        "serviceAccountName": SCHEDULER_ACCOUNT,
        "priorityClassName": PRIORITY_CLASS,
        "containers": [
            {
                "name": "kube-scheduler",
                "image": f"{KUBE_SCHEDULER_REPOSITORY}:{kube_scheduler_tag(kube_version)}",
                "imagePullPolicy": "IfNotPresent",
                "command": ["kube-scheduler", "--config=/config/config.yaml", "-v=4"],
                "resources": {},
                "volumeMounts": [{"name": "scheduler-config", "mountPath": "/config"}],
            },
            {
                "name": EXTENDER_CONTAINER,
                "image": HAMI_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "env": [
                    _field_env("POD_NAME", "metadata.name"),
                    _field_env("POD_NAMESPACE", "metadata.namespace"),
                    {"name": "HAMI_NODELOCK_EXPIRE", "value": lock_expire},
                ],
                "command": extender_args,
                "ports": [
                    {"name": "https", "containerPort": WEBHOOK_CONTAINER_PORT, "protocol": "TCP"},
                    {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
                ],
                "resources": {},
                "volumeMounts": [
                    {
                        "name": "device-config",
                        "mountPath": "/device-config.yaml",
                        "subPath": "device-config.yaml",
                    },
                    {"name": "tls-config", "mountPath": "/tls"},
                ],
                "readinessProbe": _https_probe("/readyz"),
            },
        ],
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {
                                "matchExpressions": [
                                    {
                                        "key": "app.kubernetes.io/component",
                                        "operator": "In",
                                        "values": [SCHEDULER],
                                    }
                                ]
                            },
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        },
        "volumes": [
            {"name": "tls-config", "secret": {"secretName": TLS_SECRET}},
            {"name": "scheduler-config", "configMap": {"name": SCHEDULER_CONFIG}},
            {"name": "device-config", "configMap": {"name": DEVICE_CONFIG}},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": SCHEDULER,
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/component": SCHEDULER, **RELEASE_LABELS},
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": _component_labels(SCHEDULER)},
            "template": {
                "metadata": {
                    "labels": {**_component_labels(SCHEDULER), WEBHOOK_IGNORE_LABEL: "ignore"},
                    "annotations": annotations if annotations is not None else _checksums_of(sharing),
                },
                "spec": pod_spec,
            },
        },
    }


def _host_path(name: str, path: str, kind: str = "") -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path, **({"type": kind} if kind else {})}}


def device_plugin_daemon_set(
    sharing: SharingConfig, runtime_class_name: str = "", annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """DaemonSet `kube-system/hami-device-plugin`: on every node labelled `gpu: "on"`, HAMi's device
    plugin and its vGPU monitor, privileged with the host's PID namespace and the host paths they read,
    rolled one node at a time. Its pods run under the chart's runtime class when one is set. The
    simulated kubelet mounts nothing from the host, so the hostPath volumes are only shown."""
    monitor_security = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]},
    }
    plugin_security = {**monitor_security, "privileged": True, "allowPrivilegeEscalation": True}
    node_name = _field_env("NODE_NAME", "spec.nodeName")
    containers = [
        {
            "name": DEVICE_PLUGIN_CONTAINER,
            "image": HAMI_IMAGE,
            "imagePullPolicy": "IfNotPresent",
            "lifecycle": {
                "postStart": {
                    "exec": {"command": ["/bin/sh", "-c", f"/k8s-vgpu/bin/vgpu-init.sh {HOOK_PATH}/vgpu/"]}
                }
            },
            "command": [
                "nvidia-device-plugin",
                "--config-file=/device-config.yaml",
                "--mig-strategy=none",
                "--disable-core-limit=false",
                "-v=4",
            ],
            "env": [
                node_name,
                {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"},
                {"name": "DEVICE_LIST_STRATEGY", "value": "envvar"},
                {"name": "HOOK_PATH", "value": HOOK_PATH},
                {"name": "PASS_DEVICE_SPECS", "value": "false"},
            ],
            "securityContext": plugin_security,
            "resources": {},
            "volumeMounts": [
                {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
                {"name": "lib", "mountPath": f"{HOOK_PATH}/vgpu"},
                {"name": "usrbin", "mountPath": "/usrbin"},
                {"name": "deviceconfig", "mountPath": "/config"},
                {"name": "hosttmp", "mountPath": "/tmp"},
                {
                    "name": "device-config",
                    "mountPath": "/device-config.yaml",
                    "subPath": "device-config.yaml",
                },
                {"name": "cdi-root", "mountPath": "/var/run/cdi"},
            ],
        },
        {
            "name": "vgpu-monitor",
            "image": HAMI_IMAGE,
            "imagePullPolicy": "IfNotPresent",
            "command": ["vGPUmonitor", "-v=4"],
            "securityContext": monitor_security,
            "env": [
                node_name,
                {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"},
                {"name": "HOOK_PATH", "value": f"{HOOK_PATH}/vgpu"},
                {"name": "HAMI_RESYNC_INTERVAL", "value": "5m"},
            ],
            "ports": [{"name": "metrics", "containerPort": MONITOR_PORT, "protocol": "TCP"}],
            "resources": {},
            "volumeMounts": [
                {"name": "ctrs", "mountPath": f"{HOOK_PATH}/vgpu/containers"},
                {"name": "dockers", "mountPath": "/run/docker"},
                {"name": "containerds", "mountPath": "/run/containerd"},
                {"name": "sysinfo", "mountPath": "/sysinfo"},
                {"name": "hostvar", "mountPath": "/hostvar"},
                {"name": "hosttmp", "mountPath": "/tmp"},
            ],
        },
    ]
    pod_spec: dict[str, Any] = {
        "serviceAccountName": DEVICE_PLUGIN_ACCOUNT,
        "priorityClassName": PRIORITY_CLASS,
        "hostPID": True,
        "hostNetwork": False,
        "containers": containers,
        "volumes": [
            _host_path("ctrs", f"{HOOK_PATH}/vgpu/containers"),
            _host_path("hosttmp", "/tmp"),
            _host_path("dockers", "/run/docker"),
            _host_path("containerds", "/run/containerd"),
            _host_path("device-plugin", "/var/lib/kubelet/device-plugins"),
            _host_path("lib", f"{HOOK_PATH}/vgpu"),
            _host_path("cdi-root", "/var/run/cdi", "DirectoryOrCreate"),
            _host_path("usrbin", "/usr/bin"),
            _host_path("sysinfo", "/sys"),
            _host_path("hostvar", "/var"),
            {"name": "deviceconfig", "configMap": {"name": NODE_CONFIG}},
            {"name": "device-config", "configMap": {"name": DEVICE_CONFIG}},
        ],
        "nodeSelector": dict(GPU_NODE_SELECTOR),
    }
    if runtime_class_name:
        pod_spec = {"runtimeClassName": runtime_class_name, **pod_spec}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": DEVICE_PLUGIN,
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/component": DEVICE_PLUGIN, **RELEASE_LABELS},
        },
        "spec": {
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "selector": {"matchLabels": _component_labels(DEVICE_PLUGIN)},
            "template": {
                "metadata": {
                    "labels": {**_component_labels(DEVICE_PLUGIN), WEBHOOK_IGNORE_LABEL: "ignore"},
                    "annotations": annotations if annotations is not None else _checksums_of(sharing),
                },
                "spec": pod_spec,
            },
        },
    }


def chart_workloads(
    sharing: SharingConfig,
    kube_version: str,
    *,
    cert: ServingCert | None = None,
    runtime_class_name: str = "",
) -> list[tuple[str, dict[str, Any]]]:
    """The chart's ConfigMaps, TLS Secret (given the webhook's certificate) and workloads, as (resource,
    object), in the order `helm install` creates those kinds."""
    objects: list[tuple[str, dict[str, Any]]] = []
    if cert is not None:
        objects.append(("secrets", tls_secret(cert)))
    scheduler_config, device_config = scheduler_config_map(sharing), device_config_map(sharing)
    annotations = _checksums(scheduler_config, device_config)  # each ConfigMap rendered once
    objects += [
        ("configmaps", node_config_map(sharing)),
        ("configmaps", scheduler_config),
        ("configmaps", device_config),
        ("daemonsets", device_plugin_daemon_set(sharing, runtime_class_name, annotations)),
        ("deployments", scheduler_deployment(sharing, kube_version, annotations)),
    ]
    return objects


def _keeping_service_spec(wanted: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    # a Service keeps what the API server allocated (clusterIP, ipFamilies, …) under the chart's fields
    body = {
        **wanted,
        "metadata": {**wanted["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]},
    }
    body["spec"] = {**current.get("spec", {}), **wanted["spec"]}
    return body


async def _apply(client: KubeClient, resource: str, body: dict[str, Any]) -> dict[str, Any]:
    """Create, or replace an existing object that differs (keeping its resourceVersion); an object that
    already says what the chart says is left alone, as `helm upgrade` leaves it."""
    if resource == "services":
        return await ensure(client, resource, body, merge=_keeping_service_spec)
    return await ensure(client, resource, body)


async def install_hami(
    client: KubeClient,
    ca_bundle: bytes,
    *,
    webhook_url: str | None = None,
    sharing: SharingConfig | None = None,
    cert: ServingCert | None = None,
    runtime_class_name: str = "",
) -> None:
    """Create HAMi's objects in the tenant: with `runtime_class_name` the chart's RuntimeClass first (its
    `createRuntimeClass` pre-install hook), then `chart_workloads` (the TLS Secret when `cert` is given,
    the ConfigMaps, DaemonSet `hami-device-plugin` and Deployment `hami-scheduler`, configured from
    `sharing`), Services `kube-system/hami-scheduler` and `hami-device-plugin-monitor` (their Endpoints
    are the endpoints controller's, from the pods) and MWC `hami-webhook` (webhook `vgpu.hami.io`). As `helm install` without
    `--wait`, it returns without waiting for the pods. The kube-scheduler container's tag is the
    server's version, as the chart reads it from the cluster.

    With `webhook_url` the configuration dials that URL (the chart's customURL); otherwise it names the
    service, which the API server reaches through its egress (the tunnel).
    """
    await _ensure_namespace(client)
    if runtime_class_name:
        await _apply(client, "runtimeclasses", runtime_class(runtime_class_name))
    version = await client.request("GET", "/version")
    workloads = chart_workloads(
        sharing or SharingConfig(),
        str(version.get("gitVersion", "")),
        cert=cert,
        runtime_class_name=runtime_class_name,
    )
    for resource, body in workloads:
        await _apply(client, resource, body)
    await _apply(client, "services", scheduler_service())
    await _apply(client, "services", device_plugin_monitor_service())
    await _apply(client, "mutatingwebhookconfigurations", webhook_configuration(ca_bundle, url=webhook_url))
