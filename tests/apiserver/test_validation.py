"""Validation refuses what kube-apiserver refuses, in its words; defaulting fills what it fills."""

import base64
import copy
from typing import Any

import pytest

from tenantgpu.apiserver.validation import Cause, default, invalid_message, invalid_status, validate


def pod(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx:1.25"}]}
    base.update(spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": base,
    }


def messages(causes: list[Cause]) -> list[str]:
    return [str(c) for c in causes]


def test_a_plain_pod_is_valid_before_and_after_defaulting() -> None:
    obj = pod()
    assert validate("Pod", obj) == []
    default("Pod", obj)
    assert validate("Pod", obj) == []


def test_pod_without_containers_reads_like_kube() -> None:
    causes = validate("Pod", pod(containers=[]))
    assert causes == [Cause("FieldValueRequired", "Required value", "spec.containers")]
    assert invalid_message("Pod", "web", causes) == 'Pod "web" is invalid: spec.containers: Required value'


def test_several_causes_are_listed_in_brackets() -> None:
    causes = validate("Pod", pod(containers=[{"name": "Bad_Name"}]))
    text = invalid_message("Pod", "web", causes)
    assert text.startswith('Pod "web" is invalid: [spec.containers[0].name: Invalid value: "Bad_Name": ')
    assert "spec.containers[0].image: Required value" in text
    assert {c.reason for c in causes} == {"FieldValueInvalid", "FieldValueRequired"}


def test_container_names_must_be_unique_across_init_and_app_containers() -> None:
    obj = pod(initContainers=[{"name": "app", "image": "busybox"}])
    assert messages(validate("Pod", obj)) == ['spec.containers[0].name: Duplicate value: "app"']


def test_unsupported_restart_policy_lists_the_supported_values() -> None:
    (cause,) = validate("Pod", pod(restartPolicy="Sometimes"))
    assert cause.reason == "FieldValueNotSupported"
    assert str(cause) == (
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'
    )


def test_requests_above_limits_are_refused() -> None:
    ctr = {"name": "app", "image": "x", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1500m"}}}
    (cause,) = validate("Pod", pod(containers=[ctr]))
    assert str(cause) == (
        'spec.containers[0].resources.requests: Invalid value: "1500m": '
        "must be less than or equal to cpu limit of 1"
    )


def test_extended_resources_need_equal_whole_limits() -> None:
    gpu = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}
    ok = {"name": "app", "image": "x", "resources": {"limits": gpu}}
    assert validate("Pod", pod(containers=[ok])) == []
    unequal = {"name": "app", "image": "x", "resources": {"limits": gpu, "requests": {"nvidia.com/gpu": "2"}}}
    assert [
        "must be equal to nvidia.com/gpu limit of 1" in c.message
        for c in validate("Pod", pod(containers=[unequal]))
    ] == [True]
    request_only = {"name": "app", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "1"}}}
    assert messages(validate("Pod", pod(containers=[request_only]))) == [
        "spec.containers[0].resources.limits: Required value: "
        "Limit must be set for non overcommitable resources"
    ]
    fraction = {"name": "app", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "500m"}}}
    assert "must be an integer" in messages(validate("Pod", pod(containers=[fraction])))[0]


def test_bad_quantity_is_invalid() -> None:
    ctr = {"name": "app", "image": "x", "resources": {"limits": {"memory": "lots"}}}
    (cause,) = validate("Pod", pod(containers=[ctr]))
    assert cause.field == "spec.containers[0].resources.limits[memory]"
    assert "quantities must match the regular expression" in cause.message


def test_volume_mounts_must_name_a_volume() -> None:
    ctr = {"name": "app", "image": "x", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}
    assert messages(validate("Pod", pod(containers=[ctr]))) == [
        'spec.containers[0].volumeMounts[0].name: Not found: "data"'
    ]
    assert validate("Pod", pod(containers=[ctr], volumes=[{"name": "data", "emptyDir": {}}])) == []


def test_metadata_name_label_and_annotation_syntax() -> None:
    obj = pod()
    obj["metadata"] = {
        "name": "Web",
        "namespace": "default",
        "labels": {"app": "bad value", "-x": "y"},
        "annotations": {"big": "x" * 300_000},
    }
    causes = validate("Pod", obj)
    fields = [c.field for c in causes]
    assert fields.count("metadata.labels") == 2
    assert "metadata.name" in fields
    assert (
        Cause("FieldValueTooLong", "Too long: must have at most 262144 bytes", "metadata.annotations")
        in causes
    )


def test_missing_name_and_namespace_rules_follow_the_scope() -> None:
    obj = pod()
    del obj["metadata"]["name"]
    assert messages(validate("Pod", obj)) == [
        "metadata.name: Required value: name or generateName is required"
    ]
    obj["metadata"]["generateName"] = "web-"
    assert validate("Pod", obj) == []
    ns = {"metadata": {"name": "team-a", "namespace": "default"}}
    assert messages(validate("Namespace", ns)) == ["metadata.namespace: Forbidden: not allowed on this type"]
    # IsDNS1123Label: a name that would be a valid subdomain fails for its dots alone, and says so
    assert messages(validate("Namespace", {"metadata": {"name": "team.a"}})) == [
        'metadata.name: Invalid value: "team.a": must not contain dots'
    ]
    assert messages(validate("Namespace", {"metadata": {"name": "Team-A"}}))[0].startswith(
        'metadata.name: Invalid value: "Team-A": a lowercase RFC 1123 label'
    )


def test_pod_update_may_change_image_but_not_resources() -> None:
    old = pod()
    default("Pod", old)
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["image"] = "nginx:1.26"
    new["spec"]["tolerations"].append({"key": "gpu", "operator": "Exists"})
    new["metadata"]["labels"] = {"tier": "web"}
    assert validate("Pod", new, old=old) == []
    bad = copy.deepcopy(old)
    bad["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2"}}
    (cause,) = validate("Pod", bad, old=old)
    assert cause.field == "spec"
    assert cause.reason == "FieldValueForbidden"
    assert cause.message.startswith(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
    )
    assert '+  spec.containers[0].resources.limits: {"cpu":"2"}' in cause.message
    removed = copy.deepcopy(old)
    removed["spec"]["tolerations"] = []
    assert [c.field for c in validate("Pod", removed, old=old)] == ["spec"]


def test_update_checks_the_labels_and_annotations_it_adds() -> None:
    old = pod()
    old["metadata"]["labels"] = {"app": "web"}
    old["metadata"]["annotations"] = {"hami.io/vgpu-node": "node-a"}
    default("Pod", old)
    new = copy.deepcopy(old)
    new["metadata"]["annotations"]["hami.io/bind-phase"] = "allocating"
    assert validate("Pod", new, old=old) == []
    new["metadata"]["labels"]["app"] = "bad value"
    new["metadata"]["labels"]["-x"] = "y"
    new["metadata"]["annotations"]["bad key!"] = "v"
    fields = [c.field for c in validate("Pod", new, old=old)]
    assert fields.count("metadata.labels") == 2
    assert fields.count("metadata.annotations") == 1


def test_a_spec_change_is_still_refused_when_only_annotations_look_changed() -> None:
    old = pod()
    default("Pod", old)
    new = copy.deepcopy(old)
    new["metadata"]["annotations"] = {"a": "b"}
    new["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    assert [c.field for c in validate("Pod", new, old=old)] == ["spec"]


def test_rename_on_update_is_refused() -> None:
    old = pod()
    new = copy.deepcopy(old)
    new["metadata"]["name"] = "other"
    assert 'metadata.name: Invalid value: "other": field is immutable' in messages(
        validate("Pod", new, old=old)
    )


def test_service_ports() -> None:
    svc = {"metadata": {"name": "hami-scheduler", "namespace": "kube-system"}, "spec": {"ports": []}}
    assert messages(validate("Service", svc)) == ["spec.ports: Required value"]
    svc["spec"]["ports"] = [{"port": 443}, {"port": 443, "name": "b"}, {"port": 70000, "name": "c"}]
    got = messages(validate("Service", svc))
    assert "spec.ports[0].name: Required value" in got
    assert any(m.startswith("spec.ports[1]: Duplicate value") for m in got)
    assert "spec.ports[2].port: Invalid value: 70000: must be between 1 and 65535, inclusive" in got
    assert messages(
        validate(
            "Service", {"metadata": {"name": "1svc", "namespace": "x"}, "spec": {"ports": [{"port": 1}]}}
        )
    )[0].startswith('metadata.name: Invalid value: "1svc": a DNS-1035 label')


def test_resource_quota_hard_values() -> None:
    quota = {
        "metadata": {"name": "gpu", "namespace": "team-a"},
        "spec": {"hard": {"nvidia.com/gpu": "-1", "cpu": "x"}},
    }
    fields = sorted(c.field for c in validate("ResourceQuota", quota))
    assert fields == ["spec.hard[cpu]", "spec.hard[nvidia.com/gpu]"]


def test_secret_data_must_be_base64() -> None:
    good = base64.b64encode(b"hello").decode()
    secret = {"metadata": {"name": "s", "namespace": "default"}, "data": {"ok": good, "bad": "not base64!"}}
    assert [c.field for c in validate("Secret", secret)] == ["data[bad]"]
    assert (
        validate("Secret", {"metadata": {"name": "s", "namespace": "d"}, "data": {"a b": good}})[0].field
        == "data"
    )


def test_config_map_keys() -> None:
    cm = {"metadata": {"name": "c", "namespace": "d"}, "data": {"ok.key": "1", "no/slash": "2"}}
    assert [c.field for c in validate("ConfigMap", cm)] == ["data"]
    # kube's IsConfigMapKey: each rule its own message
    dots = {"metadata": {"name": "c", "namespace": "d"}, "data": {"..hidden": "1", "k" * 254: "2"}}
    assert messages(validate("ConfigMap", dots)) == [
        "data: Invalid value: \"..hidden\": must not start with '..'",
        f'data: Invalid value: "{"k" * 254}": must be no more than 253 characters',
    ]


def test_lease_and_event() -> None:
    lease = {"metadata": {"name": "l", "namespace": "kube-system"}, "spec": {"leaseDurationSeconds": 0}}
    assert messages(validate("Lease", lease)) == [
        "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"
    ]
    event = {"metadata": {"name": "e", "namespace": "default"}, "involvedObject": {"namespace": "other"}}
    assert [c.field for c in validate("Event", event)] == ["involvedObject.namespace"]


def webhook_config(**hook: Any) -> dict[str, Any]:
    base = {
        "name": "vgpu.hami.io",
        "clientConfig": {
            "service": {"namespace": "kube-system", "name": "hami-scheduler", "path": "/webhook"}
        },
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "rules": [
            {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
        ],
    }
    base.update(hook)
    return {"metadata": {"name": "hami-webhook"}, "webhooks": [base]}


def test_webhook_configuration_rules() -> None:
    assert validate("MutatingWebhookConfiguration", webhook_config()) == []
    both = webhook_config(clientConfig={"url": "https://x/y", "service": {"namespace": "a", "name": "b"}})
    assert messages(validate("MutatingWebhookConfiguration", both)) == [
        "webhooks[0].clientConfig: Required value: exactly one of url or service is required"
    ]
    hook = webhook_config()
    del hook["webhooks"][0]["sideEffects"]
    del hook["webhooks"][0]["admissionReviewVersions"]
    assert messages(validate("ValidatingWebhookConfiguration", hook)) == [
        "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
        "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
    ]
    http = webhook_config(clientConfig={"url": "http://127.0.0.1/x"})
    assert (
        "'https' is the only allowed URL scheme"
        in messages(validate("MutatingWebhookConfiguration", http))[0]
    )
    short = webhook_config(name="hook")
    assert any(
        "at least three segments" in m for m in messages(validate("MutatingWebhookConfiguration", short))
    )
    assert invalid_message(
        "MutatingWebhookConfiguration", "h", validate("MutatingWebhookConfiguration", short)
    ).startswith('MutatingWebhookConfiguration.admissionregistration.k8s.io "h" is invalid: ')


def test_pod_defaults_match_kube() -> None:
    obj = pod(
        containers=[
            {"name": "app", "image": "nginx", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}}},
            {"name": "side", "image": "registry:5000/tools:1.2", "ports": [{"containerPort": 80}]},
        ]
    )
    default("Pod", obj)
    spec = obj["spec"]
    assert spec["restartPolicy"] == "Always"
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["securityContext"] == {}
    assert spec["enableServiceLinks"] is True
    assert spec["priority"] == 0
    assert spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert {(t["key"], t["tolerationSeconds"]) for t in spec["tolerations"]} == {
        ("node.kubernetes.io/not-ready", 300),
        ("node.kubernetes.io/unreachable", 300),
    }
    app, side = spec["containers"]
    assert app["imagePullPolicy"] == "Always"
    assert side["imagePullPolicy"] == "IfNotPresent"
    assert app["terminationMessagePath"] == "/dev/termination-log"
    assert app["terminationMessagePolicy"] == "File"
    assert app["resources"]["requests"] == {"cpu": "1", "nvidia.com/gpu": "1"}
    assert side["ports"][0]["protocol"] == "TCP"
    assert obj["status"] == {"phase": "Pending", "qosClass": "Burstable"}


def test_probes_and_lifecycle_handlers_are_defaulted_as_kube_defaults_them() -> None:
    """Found by probing with kubectl: a readiness probe came back without the period, timeout and
    thresholds kube fills in (SetDefaults_Probe: 10 s, 1 s, 1, 3), an httpGet without path `/` and
    scheme HTTP, a gRPC probe without `service: ""`; what the user set is kept."""
    obj = pod(
        containers=[
            {
                "name": "app",
                "image": "nginx",
                "readinessProbe": {"httpGet": {"port": 8080}, "periodSeconds": 5},
                "livenessProbe": {"grpc": {"port": 9000}},
                "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/quit"}}},
            }
        ]
    )
    default("Pod", obj)
    app = obj["spec"]["containers"][0]
    assert app["readinessProbe"] == {
        "httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
        "periodSeconds": 5,
        "timeoutSeconds": 1,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    assert app["livenessProbe"]["grpc"] == {"port": 9000, "service": ""}
    assert app["livenessProbe"]["periodSeconds"] == 10
    assert app["lifecycle"]["preStop"]["httpGet"] == {"port": 80, "path": "/quit", "scheme": "HTTP"}


def test_defaulting_keeps_what_the_user_set() -> None:
    obj = pod(schedulerName="hami-scheduler", tolerations=[{"operator": "Exists"}])
    obj["spec"]["containers"][0]["imagePullPolicy"] = "Never"
    default("Pod", obj)
    assert obj["spec"]["schedulerName"] == "hami-scheduler"
    assert obj["spec"]["tolerations"] == [{"operator": "Exists"}]
    assert obj["spec"]["containers"][0]["imagePullPolicy"] == "Never"
    again = copy.deepcopy(obj)
    default("Pod", again)
    assert again == obj


@pytest.mark.parametrize(
    ("resources", "qos"),
    [
        ({}, "BestEffort"),
        ({"limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed"),
        ({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}, "Burstable"),
        ({"limits": {"nvidia.com/gpu": "1"}}, "BestEffort"),
    ],
)
def test_qos_class(resources: dict[str, Any], qos: str) -> None:
    obj = pod(containers=[{"name": "app", "image": "x", "resources": resources}])
    default("Pod", obj)
    assert obj["status"]["qosClass"] == qos


def test_other_kind_defaults() -> None:
    svc = {"metadata": {"name": "s", "namespace": "d"}, "spec": {"ports": [{"port": 443}]}}
    default("Service", svc)
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["sessionAffinity"] == "None"
    assert svc["spec"]["ports"] == [{"port": 443, "protocol": "TCP", "targetPort": 443}]
    ns = {"metadata": {"name": "team-a"}}
    default("Namespace", ns)
    assert ns["spec"] == {"finalizers": ["kubernetes"]}
    assert ns["status"] == {"phase": "Active"}
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a"}
    secret: dict[str, Any] = {"metadata": {"name": "s"}}
    default("Secret", secret)
    assert secret["type"] == "Opaque"
    mwc = webhook_config()
    default("MutatingWebhookConfiguration", mwc)
    hook = mwc["webhooks"][0]
    assert (
        hook["failurePolicy"],
        hook["matchPolicy"],
        hook["timeoutSeconds"],
        hook["reinvocationPolicy"],
    ) == (
        "Fail",
        "Equivalent",
        10,
        "Never",
    )
    assert hook["namespaceSelector"] == {} and hook["objectSelector"] == {}
    assert hook["rules"][0]["scope"] == "*"
    assert hook["clientConfig"]["service"]["port"] == 443
    vwc = webhook_config()
    default("ValidatingWebhookConfiguration", vwc)
    assert "reinvocationPolicy" not in vwc["webhooks"][0]
    sa: dict[str, Any] = {"metadata": {"name": "default"}}
    default("ServiceAccount", sa)
    assert sa == {"metadata": {"name": "default"}}


def test_invalid_status_is_what_kubectl_prints_from() -> None:
    causes = validate("Pod", pod(containers=[]))
    status = invalid_status("Pod", "web", causes)
    assert status["code"] == 422 and status["reason"] == "Invalid" and status["status"] == "Failure"
    assert status["message"] == 'Pod "web" is invalid: spec.containers: Required value'
    assert status["details"] == {
        "name": "web",
        "kind": "Pod",
        "causes": [{"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers"}],
    }
    hook = invalid_status("MutatingWebhookConfiguration", "h", causes)
    assert hook["details"]["group"] == "admissionregistration.k8s.io"


def test_binding_needs_a_node_target() -> None:
    binding = {"metadata": {"name": "web", "namespace": "default"}, "target": {"kind": "Node", "name": "w1"}}
    assert validate("Binding", binding) == []
    assert messages(validate("Binding", {**binding, "target": {}})) == ["target.name: Required value"]
    assert [c.field for c in validate("Binding", {**binding, "target": {"kind": "Pod", "name": "x"}})] == [
        "target.kind"
    ]


def test_scope_can_be_given_for_unknown_kinds() -> None:
    widget = {"metadata": {"name": "w"}}
    assert messages(validate("Widget", widget)) == ["metadata.namespace: Required value"]
    assert validate("Widget", widget, namespaced=False) == []
    assert validate("CustomResourceDefinition", {"metadata": {"name": "widgets.example.com"}}) == []


def test_access_reviews_need_exactly_one_kind_of_attributes() -> None:
    review = {"spec": {"resourceAttributes": {"verb": "create", "resource": "pods"}}}
    assert validate("SelfSubjectAccessReview", review) == []
    (cause,) = validate("SelfSubjectAccessReview", {"spec": {}})
    assert str(cause) == (
        'spec.resourceAttributes: Invalid value: "null": '
        "exactly one of nonResourceAttributes or resourceAttributes must be specified"
    )


def test_priority_follows_system_classes() -> None:
    critical = pod(priorityClassName="system-node-critical")
    default("Pod", critical)
    assert critical["spec"]["priority"] == 2000001000
    custom = pod(priorityClassName="team-high")
    default("Pod", custom)
    assert "priority" not in custom["spec"]


def test_secret_string_data_is_folded_into_data() -> None:
    secret = {"metadata": {"name": "s"}, "data": {"a": "eA=="}, "stringData": {"b": "hello", "a": "wins"}}
    default("Secret", secret)
    assert "stringData" not in secret
    assert secret["data"] == {
        "a": base64.b64encode(b"wins").decode(),
        "b": base64.b64encode(b"hello").decode(),
    }


def test_an_update_skips_only_what_it_keeps_of_name_namespace_and_node_amounts() -> None:
    """An update rechecks neither the stored name and namespace nor a node's unchanged capacity; a
    new value still gets every check (the node lock's updates change annotations only)."""
    old = pod()
    assert validate("Pod", copy.deepcopy(old), old=old) == []
    moved = copy.deepcopy(old)
    moved["metadata"]["namespace"] = "Not_A_Label"
    assert "metadata.namespace" in " ".join(messages(validate("Pod", moved, old=old)))
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"capacity": {"cpu": "8", "nvidia.com/gpu": "20"}, "allocatable": {"cpu": "8"}},
    }
    locked = copy.deepcopy(node)
    locked["metadata"]["annotations"] = {"hami.io/mutex.lock": "2026-11-30T12:00:00Z,default,p"}
    assert validate("Node", locked, old=node) == []
    broken = copy.deepcopy(node)
    broken["status"]["allocatable"]["cpu"] = "eight"
    assert any("status.allocatable[cpu]" in m for m in messages(validate("Node", broken, old=node)))


def _tcp(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "controlPlane": {"service": {"serviceType": "ClusterIP"}},
        "kubernetes": {"version": "v1.31.4", "kubelet": {}},
    }
    base.update(spec)
    return {"metadata": {"name": "tenant-a", "namespace": "default"}, "spec": base}


def _tcp_causes(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    return [(c.field, c.message) for c in validate("TenantControlPlane", obj, old=old)]


_CEL_SKIPPED = (
    "<nil>",
    'Invalid value: "null": some validation rules were not checked because the object was invalid; correct '
    "the existing errors to complete validation",
)


def test_a_tenant_control_plane_is_checked_against_kamaji_s_crd_schema() -> None:
    """A schema error that blocks the CEL rules (a missing required field, a value outside the enum)
    comes with apiextensions-apiserver's note that they were not checked."""
    assert _tcp_causes(_tcp()) == []
    assert _tcp_causes(_tcp(kubernetes={"kubelet": {}})) == [
        ("spec.kubernetes.version", "Required value"),
        _CEL_SKIPPED,
    ]
    assert _tcp_causes(_tcp(kubernetes={"version": "v1.31.4"})) == [
        ("spec.kubernetes.kubelet", "Required value"),
        _CEL_SKIPPED,
    ]
    assert _tcp_causes(_tcp(controlPlane={})) == [
        ("spec.controlPlane.service", "Required value"),
        _CEL_SKIPPED,
    ]
    assert _tcp_causes(_tcp(controlPlane={"service": {"serviceType": "Ingress"}})) == [
        (
            "spec.controlPlane.service.serviceType",
            'Unsupported value: "Ingress": supported values: "ClusterIP", "NodePort", "LoadBalancer"',
        ),
        _CEL_SKIPPED,
    ]
    # a bound of the schema does not block the CEL rules: both are reported
    probes = {"liveness": {"periodSeconds": 0}}
    assert _tcp_causes(
        _tcp(
            controlPlane={"service": {"serviceType": "ClusterIP"}, "deployment": {"probes": probes}},
            networkProfile={"podCidr": "nope"},
        )
    ) == [
        (
            "spec.controlPlane.deployment.probes.liveness.periodSeconds",
            "Invalid value: 0: spec.controlPlane.deployment.probes.liveness.periodSeconds in body should be"
            " greater than or equal to 1",
        ),
        ("spec.networkProfile.podCidr", 'Invalid value: "string": podCidr must be empty or a valid CIDR'),
    ]
    assert _tcp_causes(_tcp(networkProfile={"podCidrs": ["10.0.0.0/8", "10.1.0.0/16", "10.2.0.0/16"]})) == [
        ("spec.networkProfile.podCidrs", "Too many: 3: must have at most 2 items"),
        _CEL_SKIPPED,
    ]
    assert _tcp_causes(_tcp(kubernetes={"version": "v1.31.4", "kubelet": {"preferredAddressTypes": []}})) == [
        (
            "spec.kubernetes.kubelet.preferredAddressTypes",
            "Invalid value: 0: spec.kubernetes.kubelet.preferredAddressTypes in body should have at least 1 items",
        )
    ]
    # CEL rules read as kube-apiserver words them: the value shown by its type
    assert _tcp_causes(_tcp(networkProfile={"serviceCidr": "10.300.0.0/16"})) == [
        (
            "spec.networkProfile.serviceCidr",
            'Invalid value: "string": serviceCidr must be empty or a valid CIDR',
        )
    ]
    assert _tcp_causes(_tcp(networkProfile={"loadBalancerSourceRanges": ["10.0.0.0/8"]})) == [
        (
            "spec",
            'Invalid value: "object": LoadBalancer source ranges are supported only with LoadBalancer service type',
        )
    ]


def test_kamaji_s_crd_patterns_and_string_formats_are_matched() -> None:
    """Found by probing with kubectl: `cpu: abc` in a TCP's resources and `clusterDomain: nodots` were
    stored. Kamaji's CRD carries patterns (a quantity's, its own `.*\\..*`, Gateway API's) and string
    formats (`byte`), which kube-openapi checks; a pattern is an Invalid that leaves the CEL rules
    running, a format a TypeInvalid that stops them."""
    limits = {"cpu": "abc", "memory": "1Gi", "ephemeral-storage": 2}
    deployment = {"resources": {"apiServer": {"limits": limits}}}
    cpu = "spec.controlPlane.deployment.resources.apiServer.limits.cpu"
    quantity = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
    assert _tcp_causes(
        _tcp(
            controlPlane={"service": {"serviceType": "ClusterIP"}, "deployment": deployment},
            networkProfile={"clusterDomain": "nodots", "podCidr": "nope"},
        )
    ) == [
        (cpu, f"Invalid value: \"abc\": {cpu} in body should match '{quantity}'"),
        (
            "spec.networkProfile.clusterDomain",
            "Invalid value: \"nodots\": spec.networkProfile.clusterDomain in body should match '.*\\..*'",
        ),
        ("spec.networkProfile.podCidr", 'Invalid value: "string": podCidr must be empty or a valid CIDR'),
    ]
    # Go's `$` ends the text: a trailing newline does not slip through as it would in Python
    limits["cpu"] = "1\n"
    assert [
        c[0]
        for c in _tcp_causes(
            _tcp(controlPlane={"service": {"serviceType": "ClusterIP"}, "deployment": deployment})
        )
    ] == [cpu]
    gateway = {"hostname": "API.Example.com", "parentRefs": [{"name": "gw", "namespace": "Bad_NS"}]}
    assert [
        c[0]
        for c in _tcp_causes(_tcp(controlPlane={"service": {"serviceType": "ClusterIP"}, "gateway": gateway}))
    ] == [
        "spec.controlPlane.gateway.hostname",
        "spec.controlPlane.gateway.parentRefs[0].namespace",
    ]
    gateway = {"hostname": "*.api.example.com", "parentRefs": [{"name": "gw", "namespace": "infra"}]}
    assert _tcp_causes(_tcp(controlPlane={"service": {"serviceType": "ClusterIP"}, "gateway": gateway})) == []
    store = {
        "metadata": {"name": "tls"},
        "spec": {
            "driver": "PostgreSQL",
            "endpoints": ["db:5432"],
            "tlsConfig": {"certificateAuthority": {"certificate": {"content": "not base64!"}}},
        },
    }
    content = "spec.tlsConfig.certificateAuthority.certificate.content"
    assert (
        content,
        f'Invalid value: "not base64!": {content} in body must be of type byte: "not base64!"',
    ) in [(c.field, c.message) for c in validate("DataStore", store)]
    store["spec"]["tlsConfig"]["certificateAuthority"]["certificate"]["content"] = "LS0tLS1C\nRUdJTg=="
    assert not [c for c in validate("DataStore", store) if c.field == content]


def test_a_tenant_control_plane_keeps_its_datastore_schema_and_cluster_domain() -> None:
    old = _tcp(dataStore="default", dataStoreSchema="abc", networkProfile={"clusterDomain": "cluster.local"})
    changed = _tcp(dataStore="default", dataStoreSchema="xyz", networkProfile={"clusterDomain": "lab.local"})
    assert _tcp_causes(changed, old) == [
        ("spec.dataStoreSchema", 'Invalid value: "string": changing the dataStoreSchema is not supported'),
        (
            "spec.networkProfile.clusterDomain",
            'Invalid value: "string": changing the cluster domain is not supported',
        ),
    ]
    assert _tcp_causes(_tcp(dataStoreSchema="abc"), old) == [
        ("spec", 'Invalid value: "object": unsetting the dataStore is not supported')
    ]


def test_endpoint_slice_address_type_and_addresses() -> None:
    meta = {"name": "web-abc", "namespace": "default"}
    good = {"metadata": meta, "addressType": "IPv4", "endpoints": [{"addresses": ["10.244.0.5"]}]}
    assert validate("EndpointSlice", good) == []
    assert messages(validate("EndpointSlice", {"metadata": meta})) == ["addressType: Required value"]
    bad = {
        "metadata": meta,
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["fd00::1"]}, {"addresses": []}],
        "ports": [{"port": 80, "protocol": "HTTP"}],
    }
    assert messages(validate("EndpointSlice", bad)) == [
        'endpoints[0].addresses[0]: Invalid value: "fd00::1": must be a valid IPv4 address',
        "endpoints[1].addresses: Required value: must contain at least 1 address",
        'ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"',
    ]
    moved = {**good, "addressType": "IPv6", "endpoints": [{"addresses": ["fd00::1"]}]}
    assert messages(validate("EndpointSlice", moved, old=good)) == [
        'addressType: Invalid value: "IPv6": field is immutable'
    ]


def test_an_update_is_not_refused_for_what_it_left_as_it_was() -> None:
    """Found by probing: a TCP stored before the lab checked every field's type (`serviceAccountName: 3`)
    could not lose its finalizer, so it never went away and the lab's next start timed out. kube ratchets
    a custom resource's validation (on by default since 1.30): only what an update changes is checked."""
    stored = _tcp(
        controlPlane={"service": {"serviceType": "ClusterIP"}, "deployment": {"serviceAccountName": 3}}
    )
    stored["spec"]["networkProfile"] = {"serviceCidr": "nope"}
    del stored["spec"]["kubernetes"]["version"]
    stored["metadata"]["finalizers"] = ["finalizer.kamaji.clastix.io"]
    released = copy.deepcopy(stored)
    released["metadata"]["finalizers"] = []
    assert _tcp_causes(released, stored) == []
    changed = copy.deepcopy(released)
    changed["spec"]["controlPlane"]["deployment"]["serviceAccountName"] = 4
    path = "spec.controlPlane.deployment.serviceAccountName"
    assert _tcp_causes(changed, stored) == [
        (path, f'Invalid value: "integer": {path} in body must be of type string: "integer"'),
        _CEL_SKIPPED,
    ]
    cidr = copy.deepcopy(released)
    cidr["spec"]["networkProfile"]["serviceCidr"] = "still-nope"
    assert _tcp_causes(cidr, stored) == [
        (
            "spec.networkProfile.serviceCidr",
            'Invalid value: "string": serviceCidr must be empty or a valid CIDR',
        )
    ]
    assert _tcp_causes(released) != []  # created like that, it is refused
