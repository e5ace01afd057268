"""Kamaji's CoreDNS and kube-proxy add-ons: kubeadm's manifests written into the tenant when the TCP asks
for them (`spec.addons.coreDNS`, `spec.addons.kubeProxy`), and Kamaji's objects removed when it stops.

Upstream facts these tests pin (clastix/kamaji internal/resources/addons/coredns.go, kube_proxy.go,
internal/kubeadm/addon.go; kubeadm 1.36 cmd/kubeadm/app/phases/addons/dns/manifests.go,
proxy/manifests.go, proxy/proxy.go, componentconfigs/kubeproxy.go, images/images.go, constants.go):

- kubeadm's CoreDNS version is v1.14.2 and its image `registry.k8s.io/coredns/coredns`. Kamaji copies
  `imageTag` into kubeadm's options under `if len(ImageRepository) > 0`, so a tag without a repository is
  not used; kube-proxy's options default the repository to registry.k8s.io and the tag to the TCP's
  version.
- kubeadm's DNS Service takes the 10th address of the first service subnet; with more than one
  `dnsServiceIPs` Kamaji sets them all as the Service's clusterIPs with PreferDualStack.
- kube-proxy's `config.conf` is kubeadm's component config marshalled without kube-proxy's defaulting:
  the documents real kubeadm clusters carry, with `maxPerCore: null` and `qps: 0`.
- Kamaji controls every object but the ClusterRoleBinding (and kube-proxy's ConfigMap) from the
  add-on's ClusterRoleBinding, labels them `kamaji.clastix.io/project: kamaji`, and on clean-up deletes
  only what carries that label.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import kubernetes
import yaml

from kamaji_wire import admin_api, eventually, found, patch_tcp, tcp_matching
from tenantgpu.kamaji import model
from tenantgpu.kamaji.inprocess import InProcessHost
from tenantgpu.kamaji.kubeadmaddons import (
    coredns_image,
    coredns_objects,
    corefile,
    kube_proxy_objects,
)
from tenantgpu.kamaji.kubeadmconfig import KubeadmParameters
from tenantgpu.kamaji.plane import ManagementPlane

Obj = dict[str, Any]


def _params(**kw: Any) -> KubeadmParameters:
    return KubeadmParameters(
        name="tenant-a", namespace="default", version="v1.33.1", address="127.0.0.1", **kw
    )


async def _kamaji_writes_done(plane: ManagementPlane, uid: str, limit: float = 30.0) -> None:
    """Waits until the management plane has written what a TCP change asks of the tenant (the TCP's
    `uid`): kubeadm's phases with the add-ons and the soot controllers' rewrite. A test that edits those
    objects by hand afterwards races none of it."""
    host = plane.host
    assert isinstance(host, InProcessHost)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        running = host._running.get(uid)
        assert running is not None
        pending = {t for t in (running.kubeadm_task, running.rewrite_task) if t is not None and not t.done()}
        if not pending and not running.rewrite_again:
            return
        await asyncio.wait(pending or {asyncio.ensure_future(asyncio.sleep(0.05))}, timeout=1.0)
    raise AssertionError(f"the management plane still writing into {uid} after {limit:g} s")


def _by_kind(objects: list[tuple[str, Obj]]) -> dict[str, Obj]:
    return {obj["kind"]: obj for _, obj in objects}


def test_coredns_is_kubeadms_manifests_in_kamajis_order_with_its_label() -> None:
    objects = coredns_objects(_params(coredns=("", "")))
    assert [(r, o["metadata"]["name"]) for r, o in objects] == [
        ("clusterrolebindings", "system:coredns"),
        ("deployments", "coredns"),
        ("configmaps", "coredns"),
        ("services", "kube-dns"),
        ("clusterroles", "system:coredns"),
        ("serviceaccounts", "coredns"),
    ]
    assert all(o["metadata"]["labels"]["kamaji.clastix.io/project"] == "kamaji" for _, o in objects)
    kinds = _by_kind(objects)
    deployment = kinds["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical" and pod["dnsPolicy"] == "Default"
    assert pod["tolerations"][1] == {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    (container,) = pod["containers"]
    assert container["image"] == "registry.k8s.io/coredns/coredns:v1.14.2"
    assert container["args"] == ["-conf", "/etc/coredns/Corefile"]
    service = kinds["Service"]
    assert service["spec"]["clusterIP"] == "10.96.0.10"
    assert [(p["name"], p["port"], p["protocol"]) for p in service["spec"]["ports"]] == [
        ("dns", 53, "UDP"),
        ("dns-tcp", 53, "TCP"),
        ("metrics", 9153, "TCP"),
    ]
    assert service["metadata"]["labels"]["kubernetes.io/name"] == "CoreDNS"
    assert kinds["ClusterRoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}
    ]


def test_the_coredns_image_follows_kamajis_options_and_its_tag_needs_a_repository() -> None:
    assert coredns_image("", "") == "registry.k8s.io/coredns/coredns:v1.14.2"
    assert coredns_image("mirror.example/dns", "v1.12.1") == "mirror.example/dns/coredns:v1.12.1"
    assert coredns_image("mirror.example/dns", "") == "mirror.example/dns/coredns:v1.14.2"
    # Kamaji tests the repository's length before it copies the tag
    assert coredns_image("", "v1.12.1") == "registry.k8s.io/coredns/coredns:v1.14.2"
    # kubeadm moves its default repository to the coredns path, however it was given
    assert coredns_image("registry.k8s.io", "v1.12.1") == "registry.k8s.io/coredns/coredns:v1.12.1"


def test_the_corefile_is_kubeadms_for_the_cluster_domain() -> None:
    text = corefile("cluster.local")
    assert text.startswith(".:53 {\n    errors\n    health {\n       lameduck 5s\n    }\n    ready\n")
    assert "    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n" in text
    assert (
        "    cache 30 {\n       disable success cluster.local\n       disable denial cluster.local\n    }\n"
        "    loop\n    reload\n    loadbalance\n}\n"
    ) in text
    assert "    cache 30\n    loop\n" in corefile("")


def test_the_dns_service_sits_on_the_tenants_service_network() -> None:
    service = _by_kind(coredns_objects(_params(coredns=("", ""), service_cidrs=("10.100.0.0/16",))))[
        "Service"
    ]
    assert service["spec"]["clusterIP"] == "10.100.0.10" and "clusterIPs" not in service["spec"]
    dual = _by_kind(
        coredns_objects(
            _params(
                coredns=("", ""),
                service_cidrs=("10.96.0.0/16", "fd00::/108"),
                dns_service_ips=("10.96.0.10", "fd00::a"),
            )
        )
    )["Service"]["spec"]
    assert dual["clusterIP"] == "10.96.0.10" and dual["clusterIPs"] == ["10.96.0.10", "fd00::a"]
    assert dual["ipFamilies"] == ["IPv4", "IPv6"] and dual["ipFamilyPolicy"] == "PreferDualStack"


def test_kube_proxy_gets_kubeadms_undefaulted_configuration_and_a_kubeconfig_for_the_endpoint() -> None:
    objects = kube_proxy_objects(_params(kube_proxy=("", ""), pod_cidrs=("10.32.0.0/16",)), "127.0.0.1:6443")
    assert [(r, o["metadata"]["name"]) for r, o in objects] == [
        ("clusterrolebindings", "kubeadm:node-proxier"),
        ("daemonsets", "kube-proxy"),
        ("configmaps", "kube-proxy"),
        ("rolebindings", "kube-proxy"),
        ("roles", "kube-proxy"),
        ("serviceaccounts", "kube-proxy"),
    ]
    kinds = _by_kind(objects)
    data = kinds["ConfigMap"]["data"]
    assert kinds["ConfigMap"]["metadata"]["labels"] == {
        "app": "kube-proxy",
        "kamaji.clastix.io/project": "kamaji",
    }
    config = data["config.conf"]
    # the Go serializer's document: sorted keys, nulls for unset pointers, and no final newline (`|-`)
    assert config.startswith(
        "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nbindAddress: 0.0.0.0\nbindAddressHardFail: false\n"
        'clientConnection:\n  acceptContentTypes: ""\n  burst: 0\n  contentType: ""\n'
        "  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\n  qps: 0\nclusterCIDR: 10.32.0.0/16\n"
        "configSyncPeriod: 0s\nconntrack:\n  maxPerCore: null\n  min: null\n"
    )
    assert config.endswith('  rootHnsEndpointName: ""\n  sourceVip: ""')
    parsed = yaml.safe_load(config)
    assert list(parsed) == sorted(parsed)
    assert parsed["kind"] == "KubeProxyConfiguration" and parsed["mode"] == ""
    assert parsed["logging"]["options"]["json"] == {"infoBufferSize": "0"}
    assert "featureGates" not in parsed  # kubeadm's empty map is left out
    kubeconfig = yaml.safe_load(data["kubeconfig.conf"])
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert kubeconfig["users"][0]["user"] == {
        "tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"
    }
    assert not data["kubeconfig.conf"].endswith("\n")
    pod = kinds["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["tolerations"] == [{"operator": "Exists"}]
    assert pod["containers"][0]["image"] == "registry.k8s.io/kube-proxy:v1.33.1"
    assert pod["containers"][0]["command"] == [
        "/usr/local/bin/kube-proxy",
        "--config=/var/lib/kube-proxy/config.conf",
        "--hostname-override=$(NODE_NAME)",
    ]
    assert kinds["RoleBinding"]["subjects"] == [
        {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Group",
            "name": "system:bootstrappers:kubeadm:default-node-token",
        }
    ]
    assert kinds["ClusterRoleBinding"]["roleRef"]["name"] == "system:node-proxier"


def test_kube_proxys_image_takes_the_repository_and_tag_or_the_tenants_version() -> None:
    def image(params: KubeadmParameters) -> str:
        ds = _by_kind(kube_proxy_objects(params, "127.0.0.1:6443"))["DaemonSet"]
        return str(ds["spec"]["template"]["spec"]["containers"][0]["image"])

    assert image(_params(kube_proxy=("mirror.example", ""))) == "mirror.example/kube-proxy:v1.33.1"
    assert image(_params(kube_proxy=("", "v1.33.0"))) == "registry.k8s.io/kube-proxy:v1.33.0"
    plus = KubeadmParameters(
        name="t", namespace="default", version="v1.33.1+k3s1", address="127.0.0.1", kube_proxy=("", "")
    )
    assert image(plus) == "registry.k8s.io/kube-proxy:v1.33.1_k3s1"


def test_the_tcp_model_reads_the_addons_as_kamaji_does() -> None:
    tcp = model.tenant_control_plane("tenant-a", version="v1.33.1")
    assert model.kubeadm_parameters(tcp, None).coredns is None
    tcp["spec"]["addons"]["coreDNS"] = {}
    tcp["spec"]["addons"]["kubeProxy"] = {"imageRepository": "mirror.example", "imageTag": "v1.33.0"}
    params = model.kubeadm_parameters(tcp, None)
    assert params.coredns == ("", "") and params.kube_proxy == ("mirror.example", "v1.33.0")
    assert KubeadmParameters.from_json(params.to_json()) == params  # as it travels to a DataStore's process


# ---- over the wire: the management plane's controller writes into a real tenant API server


async def test_the_addons_come_into_the_tenant_follow_the_tcp_and_leave_with_kamajis_label(
    plane: ManagementPlane,
) -> None:
    tcp = model.tenant_control_plane("tenant-a", version="v1.33.1")
    tcp["spec"]["addons"].update(coreDNS={}, kubeProxy={})
    await plane.client.create(model.TENANT_CONTROL_PLANES, tcp)
    ready = await tcp_matching(
        plane,
        lambda t: (
            model.version_status(t) == "Ready"
            and t["status"]["addons"]["coreDNS"].get("enabled") is True
            and t["status"]["addons"]["kubeProxy"].get("enabled") is True
        ),
    )
    assert ready["status"]["addons"]["coreDNS"]["lastUpdate"].endswith("Z")
    api = await admin_api(plane)
    apps, core = kubernetes.client.AppsV1Api(api), kubernetes.client.CoreV1Api(api)
    rbac = kubernetes.client.RbacAuthorizationV1Api(api)

    deployment = await eventually(
        lambda: found(lambda: apps.read_namespaced_deployment("coredns", "kube-system")),
        "CoreDNS's Deployment",
    )
    binding = await asyncio.to_thread(rbac.read_cluster_role_binding, "system:coredns")
    (owner,) = deployment.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "ClusterRoleBinding",
        "system:coredns",
        binding.metadata.uid,
        True,
    )
    service = await eventually(
        lambda: found(lambda: core.read_namespaced_service("kube-dns", "kube-system")), "the kube-dns Service"
    )
    assert service.spec.cluster_ip == "10.96.0.10"
    config = await eventually(
        lambda: found(lambda: core.read_namespaced_config_map("kube-proxy", "kube-system")),
        "kube-proxy's config",
    )
    assert config.metadata.owner_references is None  # Kamaji sets no owner on kube-proxy's ConfigMap
    endpoint = ready["status"]["controlPlaneEndpoint"]
    assert f"server: https://{endpoint}\n" in config.data["kubeconfig.conf"]
    daemon_set = await eventually(
        lambda: found(lambda: apps.read_namespaced_daemon_set("kube-proxy", "kube-system")), "kube-proxy"
    )
    assert daemon_set.spec.template.spec.containers[0].image == "registry.k8s.io/kube-proxy:v1.33.1"

    # An operator scales CoreDNS; a new image repository on the TCP rewrites the Deployment with Kamaji's
    # server-side apply, which takes the replicas back.
    await asyncio.to_thread(
        apps.patch_namespaced_deployment_scale, "coredns", "kube-system", {"spec": {"replicas": 5}}
    )
    await patch_tcp(plane, {"spec": {"addons": {"coreDNS": {"imageRepository": "mirror.example"}}}})

    def rewritten() -> Any:
        d = apps.read_namespaced_deployment("coredns", "kube-system")
        return d if d.spec.template.spec.containers[0].image == "mirror.example/coredns:v1.14.2" else None

    again = await eventually(rewritten, "the Deployment with the new image")
    assert again.spec.replicas == 2
    managers = {m.manager for m in again.metadata.managed_fields or []}
    assert "kamaji" in managers

    # Switched off: what carries Kamaji's label goes; an object whose label the operator removed stays.
    # The phases still running for the last TCP change merge Kamaji's label back, as Kamaji does: the
    # label is taken off once they are done.
    await _kamaji_writes_done(plane, ready["metadata"]["uid"])

    def unlabelled() -> bool:
        unlabel = {"metadata": {"labels": {"kamaji.clastix.io/project": None}}}
        core.patch_namespaced_config_map("kube-proxy", "kube-system", unlabel)
        time.sleep(0.3)
        labels = core.read_namespaced_config_map("kube-proxy", "kube-system").metadata.labels or {}
        return "kamaji.clastix.io/project" not in labels

    await eventually(unlabelled, "kube-proxy's ConfigMap without Kamaji's label")
    await _kamaji_writes_done(plane, ready["metadata"]["uid"])
    labels = (
        await asyncio.to_thread(core.read_namespaced_config_map, "kube-proxy", "kube-system")
    ).metadata.labels
    assert "kamaji.clastix.io/project" not in (labels or {})
    await patch_tcp(
        plane,
        [
            {"op": "remove", "path": "/spec/addons/coreDNS"},
            {"op": "remove", "path": "/spec/addons/kubeProxy"},
        ],
        patch_type="json",
    )
    await eventually(
        lambda: (
            found(lambda: apps.read_namespaced_deployment("coredns", "kube-system")) is None
            and found(lambda: apps.read_namespaced_daemon_set("kube-proxy", "kube-system")) is None
            and found(lambda: rbac.read_cluster_role_binding("kubeadm:node-proxier")) is None
            and found(lambda: rbac.read_cluster_role("system:coredns")) is None
            and found(lambda: core.read_namespaced_service("kube-dns", "kube-system")) is None
            and found(lambda: core.read_namespaced_service_account("kube-proxy", "kube-system")) is None
        ),
        "the add-ons' objects gone",
    )
    kept = await asyncio.to_thread(
        found, lambda: core.read_namespaced_config_map("kube-proxy", "kube-system")
    )
    assert kept is not None
    off = await tcp_matching(plane, lambda t: t["status"]["addons"]["coreDNS"]["enabled"] is False)
    assert off["status"]["addons"]["kubeProxy"]["enabled"] is False
    assert off["status"]["addons"]["kubeProxy"]["lastUpdate"].endswith("Z")
