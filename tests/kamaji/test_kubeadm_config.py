"""Kamaji's kubeadm phases inside a tenant: the `kubeadm-config` and `kubelet-config` documents it uploads.

Facts checked here, read from Kamaji (internal/kubeadm/configuration.go, uploadconfig.go,
controllers/resources.go) and the Kubernetes 1.36 packages it builds on (kubeadm's v1beta4 defaults and
uploadconfig phase, the kubelet's SetDefaults_KubeletConfiguration and kube_features.go):

- the ClusterConfiguration's certSANs start with 127.0.0.1, localhost, the TCP's name and its two Service
  names and the address, then the TCP's own; the API server gets `etcd-compaction-interval=0s` and
  `etcd-prefix=/<name>`; a non-etcd DataStore is reached through kine at 127.0.0.1:2379 with empty file
  names, an https etcd endpoint with kubeadm's client certificate paths;
- the kubelet's configuration has the kubelet's defaults, Kamaji's CA file, static pod path and
  `rotateCertificates`, no `resolvConf` (kamaji#581), and no `cgroupDriver` at all when the TCP sets no
  `cgroupfs` (Kamaji writes the empty value over the default); 1.36 turns on the crash-loop back-off cap
  (5m0s) and the pulled-image credential check (`NeverVerifyPreloadedImages`);
- `configurationJSONPatches` apply to the JSON, which is then read back into the Go type: unknown keys
  are dropped, and a struct-valued field that a patch removes is written at its zero value.
"""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from tenantgpu.kamaji import model
from tenantgpu.kamaji.host import ControlPlaneInstance
from tenantgpu.kamaji.kubeadmconfig import (
    KubeadmParameters,
    KubeletConfigurationError,
    cluster_configuration,
    go_yaml,
    kubelet_configuration,
)
from tenantgpu.kamaji.kubeadmphases import (
    cluster_admin_rbac_phase,
    upload_config_kubeadm_phase,
    upload_config_kubelet_phase,
)
from tenantgpu.kamaji.pki import KeyPair

PARAMS = KubeadmParameters(
    name="team-c",
    namespace="tenants",
    version="v1.33.0",
    address="192.168.32.240",
    service_cidrs=("10.100.0.0/16",),
    dns_service_ips=("10.100.0.10",),
    cert_sans=("team-c.example.com",),
)


def test_the_cluster_configuration_is_kamajis_on_kubeadms_defaults() -> None:
    text = go_yaml(cluster_configuration(PARAMS, "192.168.32.240:6443"))
    config = yaml.safe_load(text)
    assert config["apiVersion"] == "kubeadm.k8s.io/v1beta4" and config["kind"] == "ClusterConfiguration"
    assert config["apiServer"]["certSANs"] == [
        "127.0.0.1",
        "localhost",
        "team-c",
        "team-c.tenants.svc",
        "team-c.tenants.svc.cluster.local",
        "192.168.32.240",
        "team-c.example.com",
    ]
    assert config["apiServer"]["extraArgs"] == [
        {"name": "etcd-compaction-interval", "value": "0s"},
        {"name": "etcd-prefix", "value": "/team-c"},
    ]
    assert config["etcd"] == {
        "external": {"caFile": "", "certFile": "", "endpoints": ["127.0.0.1:2379"], "keyFile": ""}
    }
    assert config["networking"] == {
        "dnsDomain": "cluster.local",
        "podSubnet": "10.244.0.0/16",
        "serviceSubnet": "10.100.0.0/16",
    }
    assert (config["clusterName"], config["kubernetesVersion"], config["controlPlaneEndpoint"]) == (
        "team-c",
        "v1.33.0",
        "192.168.32.240:6443",
    )
    assert config["certificateValidityPeriod"] == "8760h0m0s"
    assert config["caCertificateValidityPeriod"] == "87600h0m0s"
    assert config["encryptionAlgorithm"] == "RSA-2048"
    for empty in ("controllerManager", "dns", "proxy", "scheduler"):
        assert config[empty] == {}
    # as Go's YAML serializer writes it: keys sorted, empty strings in double quotes
    keys = [line.split(":")[0] for line in text.splitlines() if line and not line.startswith((" ", "-"))]
    assert keys == sorted(keys)
    assert '    caFile: ""' in text.splitlines()


def test_an_etcd_datastore_over_tls_gets_kubeadms_client_certificate_paths() -> None:
    params = dataclasses.replace(PARAMS, etcd_endpoints=("https://etcd-0:2379", "https://etcd-1:2379"))
    etcd = cluster_configuration(params, "x:6443")["etcd"]["external"]
    assert etcd == {
        "caFile": "/etc/kubernetes/pki/etcd/ca.crt",
        "certFile": "/etc/kubernetes/pki/apiserver-etcd-client.crt",
        "endpoints": ["https://etcd-0:2379", "https://etcd-1:2379"],
        "keyFile": "/etc/kubernetes/pki/apiserver-etcd-client.key",
    }


def test_the_kubelet_configuration_is_the_kubelets_defaults_with_kamajis_values() -> None:
    config = yaml.safe_load(go_yaml(kubelet_configuration(PARAMS)))
    assert (
        config["apiVersion"] == "kubelet.config.k8s.io/v1beta1" and config["kind"] == "KubeletConfiguration"
    )
    assert config["authentication"]["x509"] == {"clientCAFile": "/etc/kubernetes/pki/ca.crt"}
    assert config["authentication"]["anonymous"] == {"enabled": False}
    assert config["authorization"]["mode"] == "Webhook"
    assert (config["clusterDNS"], config["clusterDomain"]) == (["10.100.0.10"], "cluster.local")
    assert config["staticPodPath"] == "/etc/kubernetes/manifests" and config["rotateCertificates"] is True
    assert "resolvConf" not in config and "cgroupDriver" not in config
    assert (config["maxPods"], config["podPidsLimit"], config["oomScoreAdj"]) == (110, -1, -999)
    assert config["containerRuntimeEndpoint"] == "unix:///run/containerd/containerd.sock"
    assert config["crashLoopBackOff"] == {"maxContainerRestartPeriod": "5m0s"}
    assert config["imagePullCredentialsVerificationPolicy"] == "NeverVerifyPreloadedImages"
    assert config["failCgroupV1"] is True and config["memoryThrottlingFactor"] == 0.9
    # struct-valued fields are written even when zero
    assert config["imageMaximumGCAge"] == "0s" and config["memorySwap"] == {}
    assert config["logging"]["options"] == {"json": {"infoBufferSize": "0"}, "text": {"infoBufferSize": "0"}}
    systemd = kubelet_configuration(dataclasses.replace(PARAMS, cgroup_driver="systemd"))
    assert systemd["cgroupDriver"] == "systemd"


def test_the_tcps_json_patches_are_read_back_into_the_kubelets_type() -> None:
    patches = (
        {"op": "replace", "path": "/maxPods", "value": 50},
        {"op": "add", "path": "/notAKubeletField", "value": 1},
        {"op": "remove", "path": "/enableServer"},
        {"op": "remove", "path": "/shutdownGracePeriod"},
        {"op": "replace", "path": "/seccompDefault", "value": True},
        {"op": "add", "path": "/podsPerCore", "value": 0},
    )
    config = kubelet_configuration(dataclasses.replace(PARAMS, kubelet_patches=patches))
    assert config["maxPods"] == 50 and config["seccompDefault"] is True
    assert "notAKubeletField" not in config
    assert "enableServer" not in config  # a pointer left nil
    assert config["shutdownGracePeriod"] == "0s"  # a struct comes back at its zero value
    assert "podsPerCore" not in config  # omitempty drops an int32's zero
    unpatched = kubelet_configuration(PARAMS)
    assert {k: v for k, v in config.items() if k not in ("maxPods", "seccompDefault", "enableServer")} == {
        k: v for k, v in unpatched.items() if k not in ("maxPods", "seccompDefault", "enableServer")
    }


def test_a_patch_that_does_not_apply_fails_the_kubelet_phase_alone() -> None:
    bad = dataclasses.replace(
        PARAMS, kubelet_patches=({"op": "replace", "path": "/noSuchField", "value": 1},)
    )
    with pytest.raises(
        KubeletConfigurationError, match="unable to apply JSON patching to KubeletConfiguration"
    ):
        upload_config_kubelet_phase(bad)
    assert upload_config_kubeadm_phase(bad, "x:6443")  # the other phases do not depend on it


def test_the_phases_write_kubeadms_names_keys_and_rbac() -> None:
    kubeadm = dict((body["kind"], body) for _, body in upload_config_kubeadm_phase(PARAMS, "x:6443"))
    assert kubeadm["ConfigMap"]["metadata"] == {"name": "kubeadm-config", "namespace": "kube-system"}
    assert set(kubeadm["ConfigMap"]["data"]) == {"ClusterConfiguration"}
    assert kubeadm["Role"]["metadata"]["name"] == "kubeadm:nodes-kubeadm-config"
    assert kubeadm["Role"]["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["kubeadm-config"],
            "verbs": ["get"],
        }
    ]
    assert [s["name"] for s in kubeadm["RoleBinding"]["subjects"]] == [
        "system:bootstrappers:kubeadm:default-node-token",
        "system:nodes",
    ]
    kubelet = dict((body["kind"], body) for _, body in upload_config_kubelet_phase(PARAMS))
    assert kubelet["ConfigMap"]["metadata"] == {"name": "kubelet-config", "namespace": "kube-system"}
    assert set(kubelet["ConfigMap"]["data"]) == {"kubelet"}
    assert kubelet["Role"]["rules"][0]["resourceNames"] == ["kubelet-config"]
    assert [s["name"] for s in kubelet["RoleBinding"]["subjects"]] == [
        "system:nodes",
        "system:bootstrappers:kubeadm:default-node-token",
    ]
    [(resource, admins)] = cluster_admin_rbac_phase()
    assert resource == "clusterrolebindings" and admins["metadata"]["name"] == "kubeadm:cluster-admins"
    assert admins["roleRef"]["name"] == "cluster-admin"
    assert (
        admins["subjects"][0]["kind"] == "Group" and admins["subjects"][0]["name"] == "kubeadm:cluster-admins"
    )


def test_a_tcp_without_network_profile_gets_the_crds_defaults() -> None:
    tcp = model.tenant_control_plane("tenant-a", version="v1.31.4")
    tcp["metadata"]["uid"] = "u1"
    params = model.kubeadm_parameters(tcp, None)
    assert params.service_cidrs == ("10.96.0.0/16",) and params.pod_cidrs == ("10.244.0.0/16",)
    assert params.dns_service_ips == ("10.96.0.10",) and params.cluster_domain == "cluster.local"
    assert params.etcd_endpoints == ("127.0.0.1:2379",) and params.cgroup_driver == ""


def test_the_plural_cidrs_win_and_dns_ips_follow_them() -> None:
    tcp = model.tenant_control_plane("tenant-a", version="v1.31.4")
    tcp["spec"]["networkProfile"] = {
        "serviceCidr": "10.96.0.0/16",
        "serviceCidrs": ["10.112.0.0/16", "fd00:10:96::/112"],
        "podCidrs": ["10.244.0.0/16", "fd00:10:244::/56"],
        "clusterDomain": "corp.internal",
    }
    tcp["spec"]["kubernetes"]["kubelet"] = {
        "cgroupfs": "cgroupfs",
        "configurationJSONPatches": [{"op": "replace", "path": "/maxPods", "value": 50}],
    }
    store = model.datastore("etcd-store", driver="etcd", endpoint="https://etcd-0:2379")
    params = model.kubeadm_parameters(tcp, store)
    assert params.service_cidrs == ("10.112.0.0/16", "fd00:10:96::/112")
    assert params.dns_service_ips == ("10.112.0.10", "fd00:10:96::10")
    config = cluster_configuration(params, "x:6443")
    assert config["networking"] == {
        "dnsDomain": "corp.internal",
        "podSubnet": "10.244.0.0/16,fd00:10:244::/56",
        "serviceSubnet": "10.112.0.0/16,fd00:10:96::/112",
    }
    assert config["etcd"]["external"]["endpoints"] == ["https://etcd-0:2379"]
    assert kubelet_configuration(params)["maxPods"] == 50
    assert kubelet_configuration(params)["cgroupDriver"] == "cgroupfs"


def test_the_parameters_travel_to_a_control_plane_process() -> None:
    pair = KeyPair(b"cert", b"key")
    params = dataclasses.replace(
        PARAMS, kubelet_patches=({"op": "replace", "path": "/maxPods", "value": 50},)
    )
    instance = ControlPlaneInstance(
        key="u1", namespace="tenants", name="team-c", schema="s", address="192.168.32.240", port=0,
        kubernetes_version="v1.33.0", ca=pair, serving=pair, service_account=pair, kubeadm=params,
    )  # fmt: skip
    again = ControlPlaneInstance.from_json(instance.to_json())
    assert again == instance and again.kubeadm_parameters() == params
    bare = dataclasses.replace(instance, kubeadm=None, service_cidr="10.112.0.0/16")
    assert ControlPlaneInstance.from_json(bare.to_json()).kubeadm_parameters().dns_service_ips == (
        "10.112.0.10",
    )
