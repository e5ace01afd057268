"""A container's environment as kube's kubelet builds it (pkg/kubelet/kubelet_pods.go
makeEnvironmentVariables, third_party/forked/golang/expansion, pkg/kubelet/envvars, read for these facts)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tenantgpu.node.containerenv import (
    ContainerConfigError,
    PodRuntime,
    Sources,
    build,
    expand,
    expanded_command,
    references,
    service_variables,
)

POD: dict[str, Any] = {
    "metadata": {
        "name": "web",
        "namespace": "shop",
        "uid": "u-1",
        "labels": {"app": "web", "tier": "front"},
        "annotations": {"note": 'say "hi"'},
    },
    "spec": {"nodeName": "worker-1", "serviceAccountName": "builder"},
}
RUNTIME = PodRuntime(pod_ip="10.244.1.5", host_ip="192.168.0.7", allocatable={"cpu": "32", "memory": "256Gi"})


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("$(A)-$(B)", "1-2"),
        ("$(MISSING) stays", "$(MISSING) stays"),
        ("$$(A) is escaped", "$(A) is escaped"),
        ("$$ is one", "$ is one"),
        ("$(A", "$(A"),
        ("ends with $", "ends with $"),
        ("$x keeps", "$x keeps"),
        ("$(A)$(A)", "11"),
    ],
)
def test_expansion(text: str, expanded: str) -> None:
    assert expand(text, {"A": "1"}, {"B": "2"}) == expanded


def test_the_downward_api_fields() -> None:
    env = [
        {"name": n, "valueFrom": {"fieldRef": {"fieldPath": p}}}
        for n, p in [
            ("NAME", "metadata.name"),
            ("NS", "metadata.namespace"),
            ("UID", "metadata.uid"),
            ("APP", "metadata.labels['app']"),
            ("NONE", "metadata.labels['absent']"),
            ("LABELS", "metadata.labels"),
            ("NOTE", "metadata.annotations"),
            ("NODE", "spec.nodeName"),
            ("SA", "spec.serviceAccountName"),
            ("HOST", "status.hostIP"),
            ("IP", "status.podIP"),
            ("IPS", "status.podIPs"),
        ]
    ]
    got = build(POD, {"name": "c", "env": env}, RUNTIME, Sources()).variables
    assert got == {
        "NAME": "web",
        "NS": "shop",
        "UID": "u-1",
        "APP": "web",
        "NONE": "",
        "LABELS": 'app="web"\ntier="front"',
        "NOTE": 'note="say \\"hi\\""',
        "NODE": "worker-1",
        "SA": "builder",
        "HOST": "192.168.0.7",
        "IP": "10.244.1.5",
        "IPS": "10.244.1.5",
    }


def test_resources_in_divisor_units_rounded_up_unset_limits_are_the_nodes() -> None:
    container = {
        "name": "c",
        "resources": {"limits": {"cpu": "250m", "memory": "1500Mi"}, "requests": {"cpu": "100m"}},
        "env": [
            {"name": n, "valueFrom": {"resourceFieldRef": ref}}
            for n, ref in [
                ("CPU", {"resource": "limits.cpu"}),  # 0.25 core is 1 in whole cores, rounded up
                ("CPU_M", {"resource": "limits.cpu", "divisor": "1m"}),
                ("MEM_GI", {"resource": "limits.memory", "divisor": "1Gi"}),
                ("REQ_MEM", {"resource": "requests.memory"}),  # unset: 0
                ("REQ_CPU_M", {"resource": "requests.cpu", "divisor": "1m"}),
            ]
        ],
    }
    got = build(POD, container, RUNTIME, Sources()).variables
    assert got == {"CPU": "1", "CPU_M": "250", "MEM_GI": "2", "REQ_MEM": "0", "REQ_CPU_M": "100"}
    bare = {
        "name": "c",
        "env": [
            {"name": "M", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}}
        ],
    }
    assert build(POD, bare, RUNTIME, Sources()).variables == {"M": str(256 * 1024)}


def _config_map(**data: str) -> dict[str, Any]:
    return {"data": data}


def _secret(**data: str) -> dict[str, Any]:
    return {"data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def test_configmaps_secrets_envfrom_then_env_wins_then_services() -> None:
    sources = Sources(
        config_maps={"cfg": _config_map(mode="fast", SHARED="from-map", **{"1bad": "x"})},
        secrets={"creds": _secret(password="p@ss")},
    )
    container = {
        "name": "c",
        "envFrom": [{"configMapRef": {"name": "cfg"}}, {"prefix": "S_", "secretRef": {"name": "creds"}}],
        "env": [
            {"name": "SHARED", "value": "from-env"},
            {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
            {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
            {"name": "LINK", "value": "$(KUBERNETES_SERVICE_HOST):$(MODE)"},
            {"name": "EMPTY"},
        ],
    }
    runtime = PodRuntime(service_env={"KUBERNETES_SERVICE_HOST": "10.96.0.1", "SHARED": "svc"})
    env = build(POD, container, runtime, sources)
    assert env.variables == {
        "mode": "fast",
        "SHARED": "from-env",
        "S_password": "p@ss",
        "MODE": "fast",
        "PW": "p@ss",
        "LINK": "10.96.0.1:fast",
        "EMPTY": "",
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
    }
    assert "KUBERNETES_SERVICE_HOST" not in env.declared
    assert env.skipped == [("configMap", "shop/cfg", ["1bad"])]
    # from 1.32 (RelaxedEnvironmentVariableValidation) such a key is a variable
    relaxed = build(POD, container, PodRuntime(minor=32), sources)
    assert relaxed.variables["1bad"] == "x" and relaxed.skipped == []


@pytest.mark.parametrize(
    ("env", "error"),
    [
        (
            [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k"}}}],
            'configmap "gone" not found',
        ),
        (
            [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k"}}}],
            'secret "gone" not found',
        ),
        (
            [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "absent"}}}],
            "couldn't find key absent in ConfigMap shop/cfg",
        ),
        (
            [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "absent"}}}],
            "couldn't find key absent in Secret shop/creds",
        ),
    ],
)
def test_a_missing_reference_fails_the_container_in_kubes_words(
    env: list[dict[str, Any]], error: str
) -> None:
    sources = Sources(
        config_maps={"cfg": _config_map(a="1"), "gone": None}, secrets={"creds": _secret(a="1"), "gone": None}
    )
    with pytest.raises(ContainerConfigError) as caught:
        build(POD, {"name": "c", "env": env}, RUNTIME, sources)
    assert str(caught.value) == error
    for item in env:  # optional references are left out instead
        item["valueFrom"][next(iter(item["valueFrom"]))]["optional"] = True
    assert build(POD, {"name": "c", "env": env}, RUNTIME, sources).variables == {}


def test_references_and_the_expanded_command() -> None:
    container = {
        "name": "c",
        "envFrom": [{"configMapRef": {"name": "a"}}, {"secretRef": {"name": "s"}}],
        "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "b", "key": "k"}}}],
        "command": ["echo", "$(X)"],
        "args": ["$(Y)", "$$(X)"],
    }
    assert references(container) == ({"a", "b"}, {"s"})
    assert expanded_command(container, {"X": "1"}) == ["echo", "1", "$(Y)", "$(X)"]


def test_a_services_variables() -> None:
    kubernetes = {
        "metadata": {"name": "kubernetes"},
        "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]},
    }
    assert service_variables(kubernetes) == {
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "KUBERNETES_SERVICE_PORT_HTTPS": "443",
        "KUBERNETES_PORT": "tcp://10.96.0.1:443",
        "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443",
        "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
        "KUBERNETES_PORT_443_TCP_PORT": "443",
        "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
    }
    dns = {"metadata": {"name": "kube-dns"}, "spec": {"clusterIP": "10.96.0.10", "ports": [
        {"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}}  # fmt: skip
    got = service_variables(dns)
    assert got["KUBE_DNS_PORT"] == "udp://10.96.0.10:53"
    assert got["KUBE_DNS_SERVICE_PORT_DNS_TCP"] == "53"
    assert got["KUBE_DNS_PORT_53_TCP_PROTO"] == "tcp"
    assert (
        service_variables(
            {"metadata": {"name": "headless"}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}
        )
        == {}
    )
