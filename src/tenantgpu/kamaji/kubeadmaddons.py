"""Kamaji's CoreDNS and kube-proxy add-ons inside a tenant (`spec.addons.coreDNS`, `spec.addons.kubeProxy`).

Kamaji renders both with kubeadm's own manifests (internal/kubeadm/addon.go calls kubeadm's
`EnsureDNSAddon` and `EnsureProxyAddon` in their print mode) and writes the objects into the tenant from
its soot manager (internal/resources/addons/coredns.go, kube_proxy.go). Facts read there and in kubeadm
1.36 (cmd/kubeadm/app/phases/addons/dns, proxy; componentconfigs/kubeproxy.go; images/images.go):

- CoreDNS: Deployment `coredns` (2 replicas, `k8s-app: kube-dns`, `system-cluster-critical`, a preferred
  anti-affinity per host, tolerating `CriticalAddonsOnly` and the control-plane taint), ConfigMap `coredns`
  with kubeadm's Corefile for the cluster domain, Service `kube-dns` on the 10th address of the first
  service CIDR (ports dns/53 UDP, dns-tcp/53 TCP, metrics/9153), ClusterRole and ClusterRoleBinding
  `system:coredns`, ServiceAccount `coredns`. The image is `registry.k8s.io/coredns/coredns:v1.14.2`;
  `imageRepository` replaces `registry.k8s.io/coredns`, and `imageTag` counts only together with an
  `imageRepository` (Kamaji copies the tag under a test of the repository's length).
- kube-proxy: ServiceAccount `kube-proxy`, ClusterRoleBinding `kubeadm:node-proxier` (ClusterRole
  `system:node-proxier`), Role and RoleBinding `kube-proxy` (get ConfigMap kube-proxy, for the bootstrap
  token's group), ConfigMap `kube-proxy` (label `app: kube-proxy`) with `kubeconfig.conf` (the service
  account's CA and token, the server at the tenant's endpoint) and `config.conf` (kubeadm's
  KubeProxyConfiguration, which kube-proxy's own defaulting never saw: zero values and nulls but for the
  bind address, the pod CIDR and the kubeconfig path), and DaemonSet `kube-proxy` (host network, privileged,
  `system-node-critical`, tolerating everything). The image is `<imageRepository or registry.k8s.io>/
  kube-proxy:<imageTag or the tenant's version>`.
- Every object carries `kamaji.clastix.io/project: kamaji`; all but the ClusterRoleBinding, and for
  kube-proxy the ConfigMap, are controlled by the add-on's ClusterRoleBinding (an owner reference with
  `controller: true`). The workload and CoreDNS's Service are created once and then server-side applied
  with the field manager `kamaji`, forcing; the rest is created or updated (labels merged, data, rules,
  subjects and the role set).
- Switched off (spec gone, status enabled), Kamaji deletes the objects that carry its label, in the order
  ServiceAccount, ClusterRoleBinding, ClusterRole or Role and RoleBinding, Service, ConfigMap, workload.
"""

from __future__ import annotations

import copy
import ipaddress
import logging
from typing import Any

from tenantgpu.apiserver.validation import is_ip
from tenantgpu.kamaji.konnectivityagent import PROJECT, PROJECT_LABEL, delete_if_kamajis, kamaji_owned
from tenantgpu.kamaji.kubeadmconfig import KubeadmParameters, go_yaml
from tenantgpu.kubeclient import KubeClient
from tenantgpu.kubeclient.ensure import read_or_create

log = logging.getLogger(__name__)

Obj = dict[str, Any]

KUBE_SYSTEM = "kube-system"
DEFAULT_REPOSITORY = "registry.k8s.io"
COREDNS_VERSION = "v1.14.2"
COREDNS = "coredns"
COREDNS_SERVICE = "kube-dns"
COREDNS_BINDING = "system:coredns"
KUBE_PROXY = "kube-proxy"
KUBE_PROXY_BINDING = "kubeadm:node-proxier"
KUBE_PROXY_CONFIG_KEY = "config.conf"
KUBE_PROXY_KUBECONFIG = "/var/lib/kube-proxy/kubeconfig.conf"
BOOTSTRAP_GROUP = "system:bootstrappers:kubeadm:default-node-token"
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"
FIELD_MANAGER = "kamaji"
RBAC = "rbac.authorization.k8s.io/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# Kamaji's names for the add-ons, as in the TCP's spec and status
COREDNS_ADDON = "coreDNS"
KUBE_PROXY_ADDON = "kubeProxy"


def _labels(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**(extra or {}), PROJECT_LABEL: PROJECT}


def coredns_image(repository: str, tag: str) -> str:
    """kubeadm's DNS image for Kamaji's options: the tag is taken only with a repository (Kamaji's copy
    of `imageTag` tests the repository's length), and kubeadm's default repository moves to its
    `coredns` path."""
    repo = repository or DEFAULT_REPOSITORY
    if repo == DEFAULT_REPOSITORY:
        repo = f"{DEFAULT_REPOSITORY}/coredns"
    return f"{repo}/coredns:{(tag if repository else '') or COREDNS_VERSION}"


def kube_proxy_image(repository: str, tag: str, version: str) -> str:
    """kubeadm's kube-proxy image, its tag made image-safe as kubeadm does (`+` becomes `_`)."""
    return f"{repository or DEFAULT_REPOSITORY}/kube-proxy:{(tag or version).replace('+', '_')}"


def dns_service_ip(service_cidrs: tuple[str, ...]) -> str:
    """kubeadm's DNS IP: the 10th address of the first service CIDR."""
    network = ipaddress.ip_network(service_cidrs[0], strict=False)
    return str(network.network_address + 10)


def corefile(domain: str) -> str:
    """kubeadm's Corefile for the cluster domain."""
    return (
        ".:53 {\n"
        "    errors\n"
        "    health {\n"
        "       lameduck 5s\n"
        "    }\n"
        "    ready\n"
        f"    kubernetes {domain} in-addr.arpa ip6.arpa {{\n"
        "       pods insecure\n"
        "       fallthrough in-addr.arpa ip6.arpa\n"
        "       ttl 30\n"
        "    }\n"
        "    prometheus :9153\n"
        "    forward . /etc/resolv.conf {\n"
        "       max_concurrent 1000\n"
        "    }\n"
        "    cache 30"
        + (f" {{\n       disable success {domain}\n       disable denial {domain}\n    }}" if domain else "")
        + "\n"
        "    loop\n"
        "    reload\n"
        "    loadbalance\n"
        "}\n"
    )


def coredns_objects(params: KubeadmParameters) -> list[tuple[str, Obj]]:
    """CoreDNS's objects as (resource, object), in the order Kamaji writes them."""
    repository, tag = params.coredns or ("", "")
    selector = {"k8s-app": COREDNS_SERVICE}
    deployment: Obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": COREDNS, "namespace": KUBE_SYSTEM, "labels": _labels(selector)},
        "spec": {
            "replicas": 2,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "selector": {"matchLabels": dict(selector)},
            "template": {
                "metadata": {"labels": dict(selector)},
                "spec": {
                    "priorityClassName": "system-cluster-critical",
                    "serviceAccountName": COREDNS,
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "podAffinityTerm": {
                                        "labelSelector": {
                                            "matchExpressions": [
                                                {
                                                    "key": "k8s-app",
                                                    "operator": "In",
                                                    "values": [COREDNS_SERVICE],
                                                }
                                            ]
                                        },
                                        "topologyKey": "kubernetes.io/hostname",
                                    },
                                }
                            ]
                        }
                    },
                    "tolerations": [
                        {"key": "CriticalAddonsOnly", "operator": "Exists"},
                        {"key": CONTROL_PLANE_TAINT, "effect": "NoSchedule"},
                    ],
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "containers": [
                        {
                            "name": COREDNS,
                            "image": coredns_image(repository, tag),
                            "imagePullPolicy": "IfNotPresent",
                            "resources": {
                                "limits": {"memory": "170Mi"},
                                "requests": {"cpu": "100m", "memory": "70Mi"},
                            },
                            "args": ["-conf", "/etc/coredns/Corefile"],
                            "volumeMounts": [
                                {"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": True}
                            ],
                            "ports": [
                                {"containerPort": 53, "name": "dns", "protocol": "UDP"},
                                {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"},
                                {"containerPort": 9153, "name": "metrics", "protocol": "TCP"},
                                {"containerPort": 8080, "name": "liveness-probe", "protocol": "TCP"},
                                {"containerPort": 8181, "name": "readiness-probe", "protocol": "TCP"},
                            ],
                            "livenessProbe": {
                                "httpGet": {"path": "/health", "port": "liveness-probe", "scheme": "HTTP"},
                                "initialDelaySeconds": 60,
                                "timeoutSeconds": 5,
                                "successThreshold": 1,
                                "failureThreshold": 5,
                            },
                            "readinessProbe": {
                                "httpGet": {"path": "/ready", "port": "readiness-probe", "scheme": "HTTP"}
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
                                "readOnlyRootFilesystem": True,
                            },
                        }
                    ],
                    "dnsPolicy": "Default",
                    "volumes": [
                        {
                            "name": "config-volume",
                            "configMap": {
                                "name": COREDNS,
                                "items": [{"key": "Corefile", "path": "Corefile"}],
                            },
                        }
                    ],
                },
            },
        },
    }
    service_spec: Obj = {
        "clusterIP": dns_service_ip(params.service_cidrs),
        "ports": [
            {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
            {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153},
        ],
        "selector": dict(selector),
    }
    if len(params.dns_service_ips) > 1:
        # Kamaji's dual-stack DNS: every DNS IP on the Service, each with its family
        service_spec["clusterIP"] = params.dns_service_ips[0]
        service_spec["clusterIPs"] = list(params.dns_service_ips)
        service_spec["ipFamilies"] = [
            "IPv4" if ipaddress.ip_address(ip).version == 4 else "IPv6" for ip in params.dns_service_ips
        ]
        service_spec["ipFamilyPolicy"] = "PreferDualStack"
    # kubeadm's manifest also carries `resourceVersion: "0"`, which the API server reads as "no
    # precondition"; leaving it out means the same.
    service: Obj = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": COREDNS_SERVICE,
            "namespace": KUBE_SYSTEM,
            "labels": _labels(
                {
                    "k8s-app": COREDNS_SERVICE,
                    "kubernetes.io/cluster-service": "true",
                    "kubernetes.io/name": "CoreDNS",
                }
            ),
            "annotations": {"prometheus.io/port": "9153", "prometheus.io/scrape": "true"},
        },
        "spec": service_spec,
    }
    return [
        (
            "clusterrolebindings",
            {
                "apiVersion": RBAC,
                "kind": "ClusterRoleBinding",
                "metadata": {"name": COREDNS_BINDING, "labels": _labels()},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": COREDNS_BINDING},
                "subjects": [{"kind": "ServiceAccount", "name": COREDNS, "namespace": KUBE_SYSTEM}],
            },
        ),
        ("deployments", deployment),
        (
            "configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": COREDNS, "namespace": KUBE_SYSTEM, "labels": _labels()},
                "data": {"Corefile": corefile(params.cluster_domain)},
            },
        ),
        ("services", service),
        (
            "clusterroles",
            {
                "apiVersion": RBAC,
                "kind": "ClusterRole",
                "metadata": {"name": COREDNS_BINDING, "labels": _labels()},
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["endpoints", "services", "pods", "namespaces"],
                        "verbs": ["list", "watch"],
                    },
                    {
                        "apiGroups": ["discovery.k8s.io"],
                        "resources": ["endpointslices"],
                        "verbs": ["list", "watch"],
                    },
                ],
            },
        ),
        (
            "serviceaccounts",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": COREDNS, "namespace": KUBE_SYSTEM, "labels": _labels()},
            },
        ),
    ]


def kube_proxy_configuration(params: KubeadmParameters) -> Obj:
    """kubeadm's KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) as the Go type writes it: kubeadm
    sets only the bind address, the cluster CIDR and the kubeconfig path; the rest stays at Go's zero
    values (pointers as null), since kube-proxy's defaulting runs in kube-proxy, not in kubeadm."""
    ipv4 = ipaddress.ip_address(params.address).version == 4 if is_ip(params.address) else True
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "bindAddress": "0.0.0.0" if ipv4 else "::",
        "bindAddressHardFail": False,
        "clientConnection": {
            "acceptContentTypes": "",
            "burst": 0,
            "contentType": "",
            "kubeconfig": KUBE_PROXY_KUBECONFIG,
            "qps": 0,
        },
        "clusterCIDR": ",".join(params.pod_cidrs),
        "configSyncPeriod": "0s",
        "conntrack": {
            "maxPerCore": None,
            "min": None,
            "tcpBeLiberal": False,
            "tcpCloseWaitTimeout": None,
            "tcpEstablishedTimeout": None,
            "udpStreamTimeout": "0s",
            "udpTimeout": "0s",
        },
        "detectLocal": {"bridgeInterface": "", "interfaceNamePrefix": ""},
        "detectLocalMode": "",
        "enableProfiling": False,
        "healthzBindAddress": "",
        "hostnameOverride": "",
        "iptables": {
            "localhostNodePorts": None,
            "masqueradeAll": False,
            "masqueradeBit": None,
            "minSyncPeriod": "0s",
            "syncPeriod": "0s",
        },
        "ipvs": {
            "excludeCIDRs": None,
            "minSyncPeriod": "0s",
            "scheduler": "",
            "strictARP": False,
            "syncPeriod": "0s",
            "tcpFinTimeout": "0s",
            "tcpTimeout": "0s",
            "udpTimeout": "0s",
        },
        "kind": "KubeProxyConfiguration",
        "logging": {
            "flushFrequency": 0,
            "options": {"json": {"infoBufferSize": "0"}, "text": {"infoBufferSize": "0"}},
            "verbosity": 0,
        },
        "metricsBindAddress": "",
        "mode": "",
        "nftables": {
            "masqueradeAll": False,
            "masqueradeBit": None,
            "minSyncPeriod": "0s",
            "syncPeriod": "0s",
        },
        "nodePortAddresses": None,
        "oomScoreAdj": None,
        "portRange": "",
        "showHiddenMetricsForVersion": "",
        "winkernel": {
            "enableDSR": False,
            "forwardHealthCheckVip": False,
            "networkName": "",
            "rootHnsEndpointName": "",
            "sourceVip": "",
        },
    }


def kube_proxy_kubeconfig(server: str) -> str:
    """kube-proxy's kubeconfig: the pod's service-account CA and token against the tenant's endpoint."""
    return (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        "- cluster:\n"
        f"    certificate-authority: {SA_DIR}/ca.crt\n"
        f"    server: {server}\n"
        "  name: default\n"
        "contexts:\n"
        "- context:\n"
        "    cluster: default\n"
        "    namespace: default\n"
        "    user: default\n"
        "  name: default\n"
        "current-context: default\n"
        "users:\n"
        "- name: default\n"
        "  user:\n"
        f"    tokenFile: {SA_DIR}/token"
    )


def kube_proxy_objects(params: KubeadmParameters, endpoint: str) -> list[tuple[str, Obj]]:
    """kube-proxy's objects as (resource, object), in the order Kamaji writes them; `endpoint` is the
    tenant's `host:port`."""
    repository, tag = params.kube_proxy or ("", "")
    selector = {"k8s-app": KUBE_PROXY}
    daemon_set: Obj = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": KUBE_PROXY, "namespace": KUBE_SYSTEM, "labels": _labels(selector)},
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": dict(selector)},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "containers": [
                        {
                            "name": KUBE_PROXY,
                            "image": kube_proxy_image(repository, tag, params.version),
                            "imagePullPolicy": "IfNotPresent",
                            "command": [
                                "/usr/local/bin/kube-proxy",
                                f"--config=/var/lib/kube-proxy/{KUBE_PROXY_CONFIG_KEY}",
                                "--hostname-override=$(NODE_NAME)",
                            ],
                            "securityContext": {"privileged": True},
                            "volumeMounts": [
                                {"mountPath": "/var/lib/kube-proxy", "name": KUBE_PROXY},
                                {"mountPath": "/run/xtables.lock", "name": "xtables-lock"},
                                {"mountPath": "/lib/modules", "name": "lib-modules", "readOnly": True},
                            ],
                            "env": [
                                {
                                    "name": "NODE_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                                }
                            ],
                        }
                    ],
                    "hostNetwork": True,
                    "serviceAccountName": KUBE_PROXY,
                    "volumes": [
                        {"name": KUBE_PROXY, "configMap": {"name": KUBE_PROXY}},
                        {
                            "name": "xtables-lock",
                            "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"},
                        },
                        {"name": "lib-modules", "hostPath": {"path": "/lib/modules"}},
                    ],
                    "tolerations": [{"operator": "Exists"}],
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                },
            },
        },
    }
    return [
        (
            "clusterrolebindings",
            {
                "apiVersion": RBAC,
                "kind": "ClusterRoleBinding",
                "metadata": {"name": KUBE_PROXY_BINDING, "labels": _labels()},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "system:node-proxier"},
                "subjects": [{"kind": "ServiceAccount", "name": KUBE_PROXY, "namespace": KUBE_SYSTEM}],
            },
        ),
        ("daemonsets", daemon_set),
        (
            "configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": KUBE_PROXY,
                    "namespace": KUBE_SYSTEM,
                    "labels": _labels({"app": KUBE_PROXY}),
                },
                "data": {
                    "kubeconfig.conf": kube_proxy_kubeconfig(f"https://{endpoint}"),
                    KUBE_PROXY_CONFIG_KEY: go_yaml(kube_proxy_configuration(params)).rstrip("\n"),
                },
            },
        ),
        (
            "rolebindings",
            {
                "apiVersion": RBAC,
                "kind": "RoleBinding",
                "metadata": {"name": KUBE_PROXY, "namespace": KUBE_SYSTEM, "labels": _labels()},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": KUBE_PROXY},
                "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": BOOTSTRAP_GROUP}],
            },
        ),
        (
            "roles",
            {
                "apiVersion": RBAC,
                "kind": "Role",
                "metadata": {"name": KUBE_PROXY, "namespace": KUBE_SYSTEM, "labels": _labels()},
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["configmaps"],
                        "resourceNames": [KUBE_PROXY],
                        "verbs": ["get"],
                    }
                ],
            },
        ),
        (
            "serviceaccounts",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": KUBE_PROXY, "namespace": KUBE_SYSTEM, "labels": _labels()},
            },
        ),
    ]


# What the owner reference to the add-on's ClusterRoleBinding is left off (Kamaji sets none on them).
_UNOWNED = {
    (COREDNS_ADDON, "clusterrolebindings"),
    (KUBE_PROXY_ADDON, "clusterrolebindings"),
    (KUBE_PROXY_ADDON, "configmaps"),
}
_APPLIED = frozenset({"deployments", "daemonsets", "services"})
# Kamaji's clean-up order
_CLEAN_UP_ORDER = {
    COREDNS_ADDON: (
        "serviceaccounts",
        "clusterrolebindings",
        "clusterroles",
        "services",
        "configmaps",
        "deployments",
    ),
    KUBE_PROXY_ADDON: (
        "serviceaccounts",
        "clusterrolebindings",
        "roles",
        "rolebindings",
        "configmaps",
        "daemonsets",
    ),
}


def addon_objects(addon: str, params: KubeadmParameters, endpoint: str) -> list[tuple[str, Obj]]:
    return coredns_objects(params) if addon == COREDNS_ADDON else kube_proxy_objects(params, endpoint)


async def apply_addons(client: KubeClient, params: KubeadmParameters, endpoint: str) -> None:
    """Write the add-ons the TCP asks for; remove Kamaji's objects of the others."""
    for addon, image in ((COREDNS_ADDON, params.coredns), (KUBE_PROXY_ADDON, params.kube_proxy)):
        if image is not None:
            await _apply(client, addon, addon_objects(addon, params, endpoint))
        else:
            await remove_addon(client, addon, params, endpoint)


async def _apply(client: KubeClient, addon: str, objects: list[tuple[str, Obj]]) -> None:
    owner: Obj | None = None
    for resource, desired in objects:
        if (addon, resource) not in _UNOWNED:
            assert owner is not None, "the ClusterRoleBinding comes first"
            desired = _owned_by(desired, owner)
        written = await _write(client, resource, desired)
        if resource == "clusterrolebindings":
            owner = written


def _owned_by(obj: Obj, binding: Obj) -> Obj:
    """controller-runtime's SetControllerReference: the binding becomes the object's controller."""
    meta = binding["metadata"]
    ref = {
        "apiVersion": RBAC,
        "kind": "ClusterRoleBinding",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    out = copy.deepcopy(obj)
    out["metadata"]["ownerReferences"] = [ref]  # the objects built here have none of their own
    return out


def _upsert_reference(refs: list[Obj], ref: Obj) -> list[Obj]:
    group = ref["apiVersion"].split("/")[0]
    for i, current in enumerate(refs):
        if (current.get("apiVersion", "").split("/")[0], current.get("kind"), current.get("name")) == (
            group,
            ref["kind"],
            ref["name"],
        ):
            return [*refs[:i], ref, *refs[i + 1 :]]
    return [*refs, ref]


async def _write(client: KubeClient, resource: str, desired: Obj) -> Obj:
    meta = desired["metadata"]
    namespace = meta.get("namespace")
    current, created = await read_or_create(client, resource, desired)
    if created:
        return current
    if resource in _APPLIED:
        return await client.patch(
            resource,
            meta["name"],
            desired,
            namespace,
            patch_type="apply",
            field_manager=FIELD_MANAGER,
            force=True,
        )
    updated = _mutated(current, desired)
    if updated == current:
        return current
    return await client.update(resource, updated)


def _mutated(current: Obj, desired: Obj) -> Obj:
    """Kamaji's mutate functions: labels and annotations merged, owner reference set, and the kind's
    own fields (data, rules, subjects and role) replaced."""
    out = copy.deepcopy(current)
    meta, wanted = out.setdefault("metadata", {}), desired["metadata"]
    for key in ("labels", "annotations"):
        merged = {**(meta.get(key) or {}), **(wanted.get(key) or {})}
        if merged:
            meta[key] = merged
    if wanted.get("ownerReferences"):
        refs = meta.get("ownerReferences") or []
        for ref in wanted["ownerReferences"]:
            refs = _upsert_reference(refs, ref)
        meta["ownerReferences"] = refs
    for key in ("data", "rules", "subjects", "roleRef"):
        if key in desired:
            out[key] = copy.deepcopy(desired[key])
    return out


async def remove_addon(client: KubeClient, addon: str, params: KubeadmParameters, endpoint: str) -> None:
    """Kamaji's clean-up of a switched-off add-on: its objects that carry Kamaji's label go. Kamaji looks
    when the TCP's status says the add-on was enabled; the lab looks when the add-on's ClusterRoleBinding
    or its workload (deleted last, so a clean-up cut short is finished) is Kamaji's: two reads per add-on
    for a tenant that never had it."""
    names = {resource: obj["metadata"] for resource, obj in addon_objects(addon, params, endpoint)}
    workload = _CLEAN_UP_ORDER[addon][-1]
    for resource in ("clusterrolebindings", workload):
        meta = names[resource]
        if kamaji_owned(await client.get_if_found(resource, meta["name"], meta.get("namespace"))):
            break
    else:
        return
    for resource in _CLEAN_UP_ORDER[addon]:
        meta = names[resource]
        await delete_if_kamajis(client, resource, meta["name"], meta.get("namespace"))
    log.info("tenant %s: removed the %s add-on", params.name, addon)
