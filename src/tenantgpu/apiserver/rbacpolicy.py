"""kube-apiserver's bootstrap RBAC policy (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy`): the default
ClusterRoles, ClusterRoleBindings, Roles and RoleBindings the `rbac/bootstrap-roles` post-start hook keeps
in every cluster, as kube 1.33 has them with its default feature gates, and what earlier releases of the
lab's range (1.27–1.32) had differently (`policy(minor)`).

Rules are written compactly: `_r(groups, resources, verbs[, names])` with the API groups separated by
commas (`""` is the core group) and resources, verbs and names by spaces; `_u(urls, verbs)` for
non-resource URLs. Each field's values are sorted, as kube's rule builder sorts them. A ClusterRole's
`aggregate_to` names the aggregated roles whose selectors pick it (`aggregate-to-<name>` labels),
`aggregate_from` the labels its own aggregation rule selects.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Any

from tenantgpu.apiserver.sharing import share

Obj = dict[str, Any]
Rule = dict[str, list[str]]

GROUP = "rbac.authorization.k8s.io"
AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
BOOTSTRAPPING = "kubernetes.io/bootstrapping"
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"
CONTROLLER_PREFIX = "system:controller:"

READ = "get list watch"
WRITE = "create delete deletecollection patch update"
READ_WRITE = "create delete deletecollection get list patch update watch"


def _r(groups: str, resources: str, verbs: str, names: str = "") -> Rule:
    rule = {"verbs": verbs.split(), "apiGroups": groups.split(","), "resources": resources.split()}
    if names:
        rule["resourceNames"] = names.split()
    return rule


def _u(urls: str, verbs: str) -> Rule:
    return {"verbs": verbs.split(), "nonResourceURLs": urls.split()}


@dataclass
class _Role:
    rules: list[Rule]
    aggregate_to: tuple[str, ...] = ()
    aggregate_from: tuple[str, ...] = ()


def _role(rules: list[Rule], aggregate_to: str = "", aggregate_from: str = "") -> _Role:
    return _Role(
        rules,
        tuple(aggregate_to.split(",")) if aggregate_to else (),
        tuple(aggregate_from.split(",")) if aggregate_from else (),
    )


# (roleRef kind, roleRef name, subjects): `u:<user>`, `g:<group>`, `sa:<namespace>:<name>`, space-separated
Binding = tuple[str, str, str]

CLUSTER_ROLES = {
    "admin": _role([], aggregate_from="admin"),
    "cluster-admin": _role(
        [
            _r("*", "*", "*"),
            _u("*", "*"),
        ]
    ),
    "edit": _role([], aggregate_to="admin", aggregate_from="edit"),
    "system:aggregate-to-admin": _role(
        [
            _r("authorization.k8s.io", "localsubjectaccessreviews", "create"),
            _r("rbac.authorization.k8s.io", "rolebindings roles", READ_WRITE),
        ],
        aggregate_to="admin",
    ),
    "system:aggregate-to-edit": _role(
        [
            _r("", "pods/attach pods/exec pods/portforward pods/proxy secrets services/proxy", READ),
            _r("", "serviceaccounts", "impersonate"),
            _r("", "pods pods/attach pods/exec pods/portforward pods/proxy", WRITE),
            _r("", "pods/eviction", "create"),
            _r(
                "",
                "configmaps endpoints events persistentvolumeclaims replicationcontrollers replicationcontrollers/scale secrets serviceaccounts services services/proxy",
                WRITE,
            ),
            _r("", "serviceaccounts/token", "create"),
            _r(
                "apps",
                "daemonsets deployments deployments/rollback deployments/scale replicasets replicasets/scale statefulsets statefulsets/scale",
                WRITE,
            ),
            _r("autoscaling", "horizontalpodautoscalers", WRITE),
            _r("batch", "cronjobs jobs", WRITE),
            _r(
                "extensions",
                "daemonsets deployments deployments/rollback deployments/scale ingresses networkpolicies replicasets replicasets/scale replicationcontrollers/scale",
                WRITE,
            ),
            _r("policy", "poddisruptionbudgets", WRITE),
            _r("networking.k8s.io", "ingresses networkpolicies", WRITE),
            _r("coordination.k8s.io", "leases", READ_WRITE),
        ],
        aggregate_to="edit",
    ),
    "system:aggregate-to-view": _role(
        [
            _r(
                "",
                "configmaps endpoints persistentvolumeclaims persistentvolumeclaims/status pods replicationcontrollers replicationcontrollers/scale serviceaccounts services services/status",
                READ,
            ),
            _r(
                "",
                "bindings events limitranges namespaces/status pods/log pods/status replicationcontrollers/status resourcequotas resourcequotas/status",
                READ,
            ),
            _r("", "namespaces", READ),
            _r("discovery.k8s.io", "endpointslices", READ),
            _r(
                "apps",
                "controllerrevisions daemonsets daemonsets/status deployments deployments/scale deployments/status replicasets replicasets/scale replicasets/status statefulsets statefulsets/scale statefulsets/status",
                READ,
            ),
            _r("autoscaling", "horizontalpodautoscalers horizontalpodautoscalers/status", READ),
            _r("batch", "cronjobs cronjobs/status jobs jobs/status", READ),
            _r(
                "extensions",
                "daemonsets daemonsets/status deployments deployments/scale deployments/status ingresses ingresses/status networkpolicies replicasets replicasets/scale replicasets/status replicationcontrollers/scale",
                READ,
            ),
            _r("policy", "poddisruptionbudgets poddisruptionbudgets/status", READ),
            _r("networking.k8s.io", "ingresses ingresses/status networkpolicies", READ),
        ],
        aggregate_to="view",
    ),
    "system:auth-delegator": _role(
        [
            _r("authentication.k8s.io", "tokenreviews", "create"),
            _r("authorization.k8s.io", "subjectaccessreviews", "create"),
        ]
    ),
    "system:basic-user": _role(
        [
            _r("authorization.k8s.io", "selfsubjectaccessreviews selfsubjectrulesreviews", "create"),
            _r("authentication.k8s.io", "selfsubjectreviews", "create"),
        ]
    ),
    "system:certificates.k8s.io:certificatesigningrequests:nodeclient": _role(
        [
            _r("certificates.k8s.io", "certificatesigningrequests/nodeclient", "create"),
        ]
    ),
    "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient": _role(
        [
            _r("certificates.k8s.io", "certificatesigningrequests/selfnodeclient", "create"),
        ]
    ),
    "system:certificates.k8s.io:kube-apiserver-client-approver": _role(
        [
            _r("certificates.k8s.io", "signers", "approve", "kubernetes.io/kube-apiserver-client"),
        ]
    ),
    "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver": _role(
        [
            _r("certificates.k8s.io", "signers", "approve", "kubernetes.io/kube-apiserver-client-kubelet"),
        ]
    ),
    "system:certificates.k8s.io:kubelet-serving-approver": _role(
        [
            _r("certificates.k8s.io", "signers", "approve", "kubernetes.io/kubelet-serving"),
        ]
    ),
    "system:certificates.k8s.io:legacy-unknown-approver": _role(
        [
            _r("certificates.k8s.io", "signers", "approve", "kubernetes.io/legacy-unknown"),
        ]
    ),
    "system:discovery": _role(
        [
            _u(
                "/api /api/* /apis /apis/* /healthz /livez /openapi /openapi/* /readyz /version /version/",
                "get",
            ),
        ]
    ),
    "system:heapster": _role(
        [
            _r("", "events namespaces nodes pods", READ),
            _r("extensions", "deployments", READ),
        ]
    ),
    "system:kube-aggregator": _role(
        [
            _r("", "endpoints services", READ),
        ]
    ),
    "system:kube-controller-manager": _role(
        [
            _r(",events.k8s.io", "events", "create patch update"),
            _r("coordination.k8s.io", "leases", "create"),
            _r("coordination.k8s.io", "leases", "get update", "kube-controller-manager"),
            _r("", "secrets serviceaccounts", "create"),
            _r("", "secrets", "delete"),
            _r("", "configmaps namespaces secrets serviceaccounts", "get"),
            _r("", "secrets serviceaccounts", "update"),
            _r("authentication.k8s.io", "tokenreviews", "create"),
            _r("authorization.k8s.io", "subjectaccessreviews", "create"),
            _r("*", "*", "list watch"),
            _r("", "serviceaccounts/token", "create"),
        ]
    ),
    "system:kube-dns": _role(
        [
            _r("", "endpoints services", "list watch"),
        ]
    ),
    "system:kube-scheduler": _role(
        [
            _r(",events.k8s.io", "events", "create patch update"),
            _r("coordination.k8s.io", "leases", "create"),
            _r("coordination.k8s.io", "leases", "get list update watch", "kube-scheduler"),
            _r("coordination.k8s.io", "leasecandidates", READ_WRITE),
            _r("", "nodes", READ),
            _r("", "pods", "delete get list watch"),
            _r("", "bindings pods/binding", "create"),
            _r("", "pods/status", "patch update"),
            _r("", "replicationcontrollers services", READ),
            _r("apps,extensions", "replicasets", READ),
            _r("apps", "statefulsets", READ),
            _r("policy", "poddisruptionbudgets", READ),
            _r("", "persistentvolumeclaims persistentvolumes", READ),
            _r("authentication.k8s.io", "tokenreviews", "create"),
            _r("authorization.k8s.io", "subjectaccessreviews", "create"),
            _r("storage.k8s.io", "csinodes", READ),
            _r("storage.k8s.io", "volumeattachments", READ),
            _r("", "namespaces", READ),
            _r("storage.k8s.io", "csidrivers", READ),
            _r("storage.k8s.io", "csistoragecapacities", READ),
        ]
    ),
    "system:kubelet-api-admin": _role(
        [
            _r("", "nodes", READ),
            _r("", "nodes", "proxy"),
            _r("", "nodes/log nodes/metrics nodes/proxy nodes/stats", "*"),
            _r("", "nodes/configz nodes/healthz nodes/pods", "*"),
        ]
    ),
    "system:monitoring": _role(
        [
            _u("/healthz /healthz/* /livez /livez/* /metrics /metrics/slis /readyz /readyz/*", "get"),
        ]
    ),
    "system:node": _role(
        [
            _r("authentication.k8s.io", "tokenreviews", "create"),
            _r("authorization.k8s.io", "localsubjectaccessreviews subjectaccessreviews", "create"),
            _r("", "services", READ),
            _r("", "nodes", "create get list watch"),
            _r("", "nodes/status", "patch update"),
            _r("", "nodes", "patch update"),
            _r("", "events", "create patch update"),
            _r("", "pods", READ),
            _r("", "pods", "create delete"),
            _r("", "pods/status", "patch update"),
            _r("", "pods/eviction", "create"),
            _r("", "configmaps secrets", READ),
            _r("", "persistentvolumeclaims persistentvolumes", "get"),
            _r("", "endpoints", "get"),
            _r("certificates.k8s.io", "certificatesigningrequests", "create get list watch"),
            _r("coordination.k8s.io", "leases", "create delete get patch update"),
            _r("storage.k8s.io", "volumeattachments", "get"),
            _r("", "serviceaccounts/token", "create"),
            _r("", "persistentvolumeclaims/status", "get patch update"),
            _r("storage.k8s.io", "csidrivers", READ),
            _r("storage.k8s.io", "csinodes", "create delete get patch update"),
            _r("node.k8s.io", "runtimeclasses", READ),
        ]
    ),
    "system:node-bootstrapper": _role(
        [
            _r("certificates.k8s.io", "certificatesigningrequests", "create get list watch"),
        ]
    ),
    "system:node-problem-detector": _role(
        [
            _r("", "nodes", "get"),
            _r("", "nodes/status", "patch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "system:node-proxier": _role(
        [
            _r("", "endpoints services", "list watch"),
            _r("", "nodes", READ),
            _r(",events.k8s.io", "events", "create patch update"),
            _r("networking.k8s.io", "servicecidrs", "list watch"),
            _r("discovery.k8s.io", "endpointslices", "list watch"),
        ]
    ),
    "system:persistent-volume-provisioner": _role(
        [
            _r("", "persistentvolumes", "create delete get list watch"),
            _r("", "persistentvolumeclaims", "get list update watch"),
            _r("storage.k8s.io", "storageclasses", READ),
            _r("", "events", "watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "system:public-info-viewer": _role(
        [
            _u("/healthz /livez /readyz /version /version/", "get"),
        ]
    ),
    "system:service-account-issuer-discovery": _role(
        [
            _u(
                "/.well-known/openid-configuration /.well-known/openid-configuration/ /openid/v1/jwks /openid/v1/jwks/",
                "get",
            ),
        ]
    ),
    "system:volume-scheduler": _role(
        [
            _r("", "persistentvolumes", "get list patch update watch"),
            _r("storage.k8s.io", "storageclasses", READ),
            _r("", "persistentvolumeclaims", "get list patch update watch"),
        ]
    ),
    "view": _role([], aggregate_to="edit", aggregate_from="view"),
}
CLUSTER_ROLE_BINDINGS = {
    "cluster-admin": ("ClusterRole", "cluster-admin", "g:system:masters"),
    "system:basic-user": ("ClusterRole", "system:basic-user", "g:system:authenticated"),
    "system:discovery": ("ClusterRole", "system:discovery", "g:system:authenticated"),
    "system:kube-controller-manager": (
        "ClusterRole",
        "system:kube-controller-manager",
        "u:system:kube-controller-manager",
    ),
    "system:kube-dns": ("ClusterRole", "system:kube-dns", "sa:kube-system:kube-dns"),
    "system:kube-scheduler": ("ClusterRole", "system:kube-scheduler", "u:system:kube-scheduler"),
    "system:monitoring": ("ClusterRole", "system:monitoring", "g:system:monitoring"),
    "system:node": ("ClusterRole", "system:node", ""),
    "system:node-proxier": ("ClusterRole", "system:node-proxier", "u:system:kube-proxy"),
    "system:public-info-viewer": (
        "ClusterRole",
        "system:public-info-viewer",
        "g:system:authenticated g:system:unauthenticated",
    ),
    "system:service-account-issuer-discovery": (
        "ClusterRole",
        "system:service-account-issuer-discovery",
        "g:system:serviceaccounts",
    ),
    "system:volume-scheduler": ("ClusterRole", "system:volume-scheduler", "u:system:kube-scheduler"),
}
NAMESPACE_ROLES = {
    ("kube-public", "system:controller:bootstrap-signer"): _role(
        [
            _r("", "configmaps", READ),
            _r("", "configmaps", "update", "cluster-info"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    ("kube-system", "extension-apiserver-authentication-reader"): _role(
        [
            _r("", "configmaps", READ, "extension-apiserver-authentication"),
        ]
    ),
    ("kube-system", "system::leader-locking-kube-controller-manager"): _role(
        [
            _r("", "configmaps", "watch"),
            _r("", "configmaps", "get update", "kube-controller-manager"),
            _r("coordination.k8s.io", "leases", "create get list update watch"),
            _r("coordination.k8s.io", "leasecandidates", "create get list update watch"),
        ]
    ),
    ("kube-system", "system::leader-locking-kube-scheduler"): _role(
        [
            _r("", "configmaps", "watch"),
            _r("", "configmaps", "get update", "kube-scheduler"),
            _r("coordination.k8s.io", "leases", "create get list update watch"),
            _r("coordination.k8s.io", "leasecandidates", "create get list update watch"),
        ]
    ),
    ("kube-system", "system:controller:bootstrap-signer"): _role(
        [
            _r("", "secrets", READ),
        ]
    ),
    ("kube-system", "system:controller:cloud-provider"): _role(
        [
            _r("", "configmaps", "create get list watch"),
        ]
    ),
    ("kube-system", "system:controller:token-cleaner"): _role(
        [
            _r("", "secrets", "delete get list watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
}
NAMESPACE_ROLE_BINDINGS = {
    ("kube-public", "system:controller:bootstrap-signer"): (
        "Role",
        "system:controller:bootstrap-signer",
        "sa:kube-system:bootstrap-signer",
    ),
    ("kube-system", "system::extension-apiserver-authentication-reader"): (
        "Role",
        "extension-apiserver-authentication-reader",
        "u:system:kube-controller-manager u:system:kube-scheduler",
    ),
    ("kube-system", "system::leader-locking-kube-controller-manager"): (
        "Role",
        "system::leader-locking-kube-controller-manager",
        "u:system:kube-controller-manager sa:kube-system:kube-controller-manager sa:kube-system:leader-election-controller",
    ),
    ("kube-system", "system::leader-locking-kube-scheduler"): (
        "Role",
        "system::leader-locking-kube-scheduler",
        "u:system:kube-scheduler sa:kube-system:kube-scheduler",
    ),
    ("kube-system", "system:controller:bootstrap-signer"): (
        "Role",
        "system:controller:bootstrap-signer",
        "sa:kube-system:bootstrap-signer",
    ),
    ("kube-system", "system:controller:cloud-provider"): (
        "Role",
        "system:controller:cloud-provider",
        "sa:kube-system:cloud-provider",
    ),
    ("kube-system", "system:controller:token-cleaner"): (
        "Role",
        "system:controller:token-cleaner",
        "sa:kube-system:token-cleaner",
    ),
}
CONTROLLER_ROLES = {
    "attachdetach-controller": _role(
        [
            _r("", "persistentvolumeclaims persistentvolumes", "list watch"),
            _r("", "nodes", READ),
            _r("", "nodes/status", "patch update"),
            _r("", "pods", "list watch"),
            _r(",events.k8s.io", "events", "create patch update"),
            _r("storage.k8s.io", "volumeattachments", "create delete get list watch"),
            _r("storage.k8s.io", "csidrivers", READ),
            _r("storage.k8s.io", "csinodes", READ),
        ]
    ),
    "certificate-controller": _role(
        [
            _r("certificates.k8s.io", "certificatesigningrequests", "delete get list watch"),
            _r(
                "certificates.k8s.io",
                "certificatesigningrequests/approval certificatesigningrequests/status",
                "update",
            ),
            _r("certificates.k8s.io", "signers", "approve", "kubernetes.io/kube-apiserver-client-kubelet"),
            _r(
                "certificates.k8s.io",
                "signers",
                "sign",
                "kubernetes.io/kube-apiserver-client kubernetes.io/kube-apiserver-client-kubelet kubernetes.io/kubelet-serving kubernetes.io/legacy-unknown",
            ),
            _r("authorization.k8s.io", "subjectaccessreviews", "create"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "clusterrole-aggregation-controller": _role(
        [
            _r("rbac.authorization.k8s.io", "clusterroles", "escalate get list patch update watch"),
        ]
    ),
    "cronjob-controller": _role(
        [
            _r("batch", "cronjobs", "get list update watch"),
            _r("batch", "jobs", "create delete get list patch update watch"),
            _r("batch", "cronjobs/status", "update"),
            _r("batch", "cronjobs/finalizers", "update"),
            _r("", "pods", "delete list watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "daemon-set-controller": _role(
        [
            _r("apps,extensions", "daemonsets", READ),
            _r("apps,extensions", "daemonsets/status", "update"),
            _r("apps,extensions", "daemonsets/finalizers", "update"),
            _r("", "nodes", "list watch"),
            _r("", "pods", "create delete list patch watch"),
            _r("", "pods/binding", "create"),
            _r("apps", "controllerrevisions", "create delete get list patch update watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "deployment-controller": _role(
        [
            _r("apps,extensions", "deployments", "get list update watch"),
            _r("apps,extensions", "deployments/status", "update"),
            _r("apps,extensions", "deployments/finalizers", "update"),
            _r("apps,extensions", "replicasets", "create delete get list patch update watch"),
            _r("", "pods", "get list update watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "disruption-controller": _role(
        [
            _r("apps,extensions", "deployments", READ),
            _r("apps,extensions", "replicasets", READ),
            _r("", "replicationcontrollers", READ),
            _r("policy", "poddisruptionbudgets", READ),
            _r("apps", "statefulsets", READ),
            _r("policy", "poddisruptionbudgets/status", "update"),
            _r("", "pods/status", "patch update"),
            _r("*", "*/scale", "get"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "endpoint-controller": _role(
        [
            _r("", "pods services", READ),
            _r("", "endpoints", "create delete get list update watch"),
            _r("", "endpoints/restricted", "create"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "endpointslice-controller": _role(
        [
            _r("", "nodes pods services", READ),
            _r("", "services/finalizers", "update"),
            _r("discovery.k8s.io", "endpointslices", "create delete get list update watch"),
            _r("discovery.k8s.io", "endpointslices/restricted", "create"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "endpointslicemirroring-controller": _role(
        [
            _r("", "endpoints services", READ),
            _r("", "services/finalizers", "update"),
            _r("", "endpoints/finalizers", "update"),
            _r("discovery.k8s.io", "endpointslices", "create delete get list update watch"),
            _r("discovery.k8s.io", "endpointslices/restricted", "create"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "ephemeral-volume-controller": _role(
        [
            _r("", "pods", READ),
            _r("", "pods/finalizers", "update"),
            _r("", "persistentvolumeclaims", "create get list watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "expand-controller": _role(
        [
            _r("", "persistentvolumes", "get list patch update watch"),
            _r("", "persistentvolumeclaims/status", "patch update"),
            _r("", "persistentvolumeclaims", READ),
            _r(",events.k8s.io", "events", "create patch update"),
            _r("", "services", "get"),
        ]
    ),
    "generic-garbage-collector": _role(
        [
            _r("*", "*", "delete get list patch update watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "horizontal-pod-autoscaler": _role(
        [
            _r("autoscaling", "horizontalpodautoscalers", READ),
            _r("autoscaling", "horizontalpodautoscalers/status", "update"),
            _r("*", "*/scale", "get update"),
            _r("", "pods", "list watch"),
            _r("metrics.k8s.io", "pods", "list watch"),
            _r("custom.metrics.k8s.io", "*", READ),
            _r("external.metrics.k8s.io", "*", READ),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "job-controller": _role(
        [
            _r("batch", "jobs", "get list patch update watch"),
            _r("batch", "jobs/status", "update"),
            _r("batch", "jobs/finalizers", "update"),
            _r("", "pods", "create delete list patch watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "legacy-service-account-token-cleaner": _role(
        [
            _r("", "configmaps", "get", "kube-apiserver-legacy-service-account-token-tracking"),
            _r("", "secrets", "delete patch"),
        ]
    ),
    "namespace-controller": _role(
        [
            _r("", "namespaces", "delete get list watch"),
            _r("", "namespaces/finalize namespaces/status", "update"),
            _r("*", "*", "delete deletecollection get list watch"),
        ]
    ),
    "node-controller": _role(
        [
            _r("", "nodes", "delete get list patch update watch"),
            _r("", "nodes/status", "patch update"),
            _r("", "pods/status", "patch update"),
            _r("", "pods", "delete get list watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "persistent-volume-binder": _role(
        [
            _r("", "persistentvolumes", "create delete get list update watch"),
            _r("", "persistentvolumes/status", "update"),
            _r("", "persistentvolumeclaims", "get list update watch"),
            _r("", "persistentvolumeclaims/status", "update"),
            _r("", "pods", "create delete get list watch"),
            _r("storage.k8s.io", "storageclasses", READ),
            _r("", "nodes", "list watch"),
            _r(",events.k8s.io", "events", "create patch update"),
            _r("", "events", "watch"),
            _r("", "services", "get"),
        ]
    ),
    "pod-garbage-collector": _role(
        [
            _r("", "pods", "delete list watch"),
            _r("", "nodes", READ),
            _r("", "pods/status", "patch"),
        ]
    ),
    "pv-protection-controller": _role(
        [
            _r("", "persistentvolumes", "get list update watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "pvc-protection-controller": _role(
        [
            _r("", "persistentvolumeclaims", "get list update watch"),
            _r("", "pods", READ),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "replicaset-controller": _role(
        [
            _r("apps,extensions", "replicasets", "get list update watch"),
            _r("apps,extensions", "replicasets/status", "update"),
            _r("apps,extensions", "replicasets/finalizers", "update"),
            _r("", "pods", "create delete list patch watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "replication-controller": _role(
        [
            _r("", "replicationcontrollers", "get list update watch"),
            _r("", "replicationcontrollers/status", "update"),
            _r("", "replicationcontrollers/finalizers", "update"),
            _r("", "pods", "create delete list patch watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "resourcequota-controller": _role(
        [
            _r("*", "*", "list watch"),
            _r("", "resourcequotas/status", "update"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "root-ca-cert-publisher": _role(
        [
            _r("", "configmaps", "create update"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "route-controller": _role(
        [
            _r("", "nodes", "list watch"),
            _r("", "nodes/status", "patch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "selinux-warning-controller": _role(
        [
            _r(",events.k8s.io", "events", "create patch update"),
            _r("", "persistentvolumes", READ),
            _r("", "persistentvolumeclaims", READ),
            _r("", "pods", READ),
            _r("storage.k8s.io", "csidrivers", READ),
        ]
    ),
    "service-account-controller": _role(
        [
            _r("", "serviceaccounts", "create"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "service-ca-cert-publisher": _role(
        [
            _r("", "configmaps", "create update"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "service-cidrs-controller": _role(
        [
            _r("networking.k8s.io", "servicecidrs", "get list patch update watch"),
            _r("networking.k8s.io", "servicecidrs/finalizers", "patch update"),
            _r("networking.k8s.io", "servicecidrs/status", "patch update"),
            _r("networking.k8s.io", "ipaddresses", READ),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "service-controller": _role(
        [
            _r("", "services", READ),
            _r("", "services/status", "patch update"),
            _r("", "nodes", "list watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "statefulset-controller": _role(
        [
            _r("", "pods", "list watch"),
            _r("apps", "statefulsets", READ),
            _r("apps", "statefulsets/status", "update"),
            _r("apps", "statefulsets/finalizers", "update"),
            _r("", "pods", "create delete get patch update"),
            _r("apps", "controllerrevisions", "create delete get list patch update watch"),
            _r("", "persistentvolumeclaims", "create get list watch"),
            _r(",events.k8s.io", "events", "create patch update"),
            _r("", "persistentvolumeclaims", "delete update"),
            _r("", "pods/finalizers", "update"),
        ]
    ),
    "ttl-after-finished-controller": _role(
        [
            _r("batch", "jobs", "delete get list watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "ttl-controller": _role(
        [
            _r("", "nodes", "list patch update watch"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
    "validatingadmissionpolicy-status-controller": _role(
        [
            _r("admissionregistration.k8s.io", "validatingadmissionpolicies", READ),
            _r("admissionregistration.k8s.io", "validatingadmissionpolicies/status", "get patch update"),
            _r(",events.k8s.io", "events", "create patch update"),
        ]
    ),
}


@dataclass
class Policy:
    """One release's bootstrap objects: ClusterRoles and ClusterRoleBindings by name, Roles and
    RoleBindings by (namespace, name)."""

    cluster_roles: dict[str, _Role]
    cluster_role_bindings: dict[str, Binding]
    roles: dict[tuple[str, str], _Role] = field(default_factory=dict)
    role_bindings: dict[tuple[str, str], Binding] = field(default_factory=dict)

    def drop_controller(self, name: str) -> None:
        self.cluster_roles.pop(CONTROLLER_PREFIX + name)
        self.cluster_role_bindings.pop(CONTROLLER_PREFIX + name)

    def _rules(self, name: str | tuple[str, str]) -> list[Rule]:
        if isinstance(name, tuple):
            return self.roles[name].rules
        return self.cluster_roles[name if name in self.cluster_roles else CONTROLLER_PREFIX + name].rules

    def replace(self, name: str | tuple[str, str], old: Rule, *new: Rule) -> None:
        """Puts `new` (none: nothing) where the role has `old`."""
        rules = self._rules(name)
        at = rules.index(old)
        rules[at : at + 1] = list(new)

    def move_to_end(self, name: str, rule: Rule, verbs: str = "") -> None:
        rules = self._rules(name)
        rules.remove(rule)
        rules.append({**rule, "verbs": verbs.split()} if verbs else rule)

    def insert_after(self, name: str | tuple[str, str], after: Rule, *new: Rule) -> None:
        rules = self._rules(name)
        at = rules.index(after) + 1
        rules[at:at] = list(new)


_EVENTS = _r(",events.k8s.io", "events", "create patch update")


def _release_edits(p: Policy, minor: int) -> None:
    """What the releases before 1.33 had differently, newest first: the policy's code of each release
    with that release's default feature gates."""
    if minor < 33:
        # MultiCIDRServiceAllocator, SELinuxChangePolicy and KubeletFineGrainedAuthz are on from 1.33
        p.drop_controller("service-cidrs-controller")
        p.drop_controller("selinux-warning-controller")
        p.replace("system:node-proxier", _r("networking.k8s.io", "servicecidrs", "list watch"))
        p.replace("system:kubelet-api-admin", _r("", "nodes/configz nodes/healthz nodes/pods", "*"))
    if minor < 32:
        # 1.32 gave the scheduler volumeattachments and many controllers `watch` where they list
        p.replace("system:kube-scheduler", _r("storage.k8s.io", "volumeattachments", READ))
        p.replace("cronjob-controller", _r("", "pods", "delete list watch"), _r("", "pods", "delete list"))
        p.replace(
            "endpoint-controller",
            _r("", "endpoints", "create delete get list update watch"),
            _r("", "endpoints", "create delete get list update"),
        )
        for name in ("endpointslice-controller", "endpointslicemirroring-controller"):
            p.replace(
                name,
                _r("discovery.k8s.io", "endpointslices", "create delete get list update watch"),
                _r("discovery.k8s.io", "endpointslices", "create delete get list update"),
            )
        p.replace(
            "expand-controller",
            _EVENTS,
            _r("storage.k8s.io", "storageclasses", READ),
            _r("", "endpoints services", "get"),
            _r("", "secrets", "get"),
            _EVENTS,
        )
        p.replace("expand-controller", _r("", "services", "get"))
        for old, new in (
            (_r("", "pods", "list watch"), _r("", "pods", "list")),
            (_r("metrics.k8s.io", "pods", "list watch"), _r("metrics.k8s.io", "pods", "list")),
            (_r("custom.metrics.k8s.io", "*", READ), _r("custom.metrics.k8s.io", "*", "get list")),
            (_r("external.metrics.k8s.io", "*", READ), _r("external.metrics.k8s.io", "*", "get list")),
        ):
            p.replace("horizontal-pod-autoscaler", old, new)
        p.replace(
            "namespace-controller",
            _r("*", "*", "delete deletecollection get list watch"),
            _r("*", "*", "delete deletecollection get list"),
        )
        p.replace(
            "node-controller",
            _r("", "nodes", "delete get list patch update watch"),
            _r("", "nodes", "delete get list patch update"),
        )
        p.replace(
            "node-controller", _r("", "pods", "delete get list watch"), _r("", "pods", "delete get list")
        )
        p.replace(
            "persistent-volume-binder",
            _r("", "nodes", "list watch"),
            _r("", "endpoints", "create delete get update"),
            _r("", "services", "create delete get"),
            _r("", "secrets", "get"),
            _r("", "nodes", "get list"),
        )
        p.replace("persistent-volume-binder", _EVENTS)
        p.replace("persistent-volume-binder", _r("", "services", "get"), _EVENTS)
        p.replace("pod-garbage-collector", _r("", "nodes", READ), _r("", "nodes", "get list"))
    if minor < 31:
        # 1.31: leader election by leases with candidates; PodDisruptionConditions rules in place
        p.replace(
            "system:kube-scheduler",
            _r("coordination.k8s.io", "leases", "get list update watch", "kube-scheduler"),
            _r("coordination.k8s.io", "leases", "get update", "kube-scheduler"),
        )
        p.replace("system:kube-scheduler", _r("coordination.k8s.io", "leasecandidates", READ_WRITE))
        for component in ("kube-controller-manager", "kube-scheduler"):
            key = ("kube-system", f"system::leader-locking-{component}")
            del p.roles[key].rules[2:]
        kind, role, subjects = p.role_bindings[
            ("kube-system", "system::leader-locking-kube-controller-manager")
        ]
        p.role_bindings[("kube-system", "system::leader-locking-kube-controller-manager")] = (
            kind,
            role,
            subjects.replace(" sa:kube-system:leader-election-controller", ""),
        )
        p.move_to_end("disruption-controller", _r("", "pods/status", "patch update"))
        p.replace("node-controller", _r("", "pods", "delete get list"), _r("", "pods", "delete list"))
        p.insert_after("node-controller", _EVENTS, _r("", "pods", "get"))
        p.replace(
            "statefulset-controller",
            _r("", "persistentvolumeclaims", "create get list watch"),
            _r("", "persistentvolumeclaims", "create get"),
        )
        p.replace("statefulset-controller", _r("", "pods/finalizers", "update"))
    if minor < 30:
        # ValidatingAdmissionPolicy is on from 1.30; node IPAM's ClusterCIDRs went in 1.30
        p.drop_controller("validatingadmissionpolicy-status-controller")
        p.insert_after(
            "node-controller",
            _r("", "pods", "delete list"),
            _r("networking.k8s.io", "clustercidrs", "create get list update"),
        )
    if minor < 29:
        # LegacyServiceAccountTokenCleanUp is on from 1.29
        p.drop_controller("legacy-service-account-token-cleaner")
    if minor < 28:
        # 1.27 elected leaders by endpoints too; PodDisruptionConditions' status rule was patch only
        for component in ("kube-controller-manager", "kube-scheduler"):
            p.insert_after(
                f"system:{component}",
                _r("coordination.k8s.io", "leases", "get update", component),
                _r("", "endpoints", "create"),
                _r("", "endpoints", "get update", component),
            )
        p.replace(
            "system:service-account-issuer-discovery",
            _u(
                "/.well-known/openid-configuration /.well-known/openid-configuration/ /openid/v1/jwks /openid/v1/jwks/",
                "get",
            ),
            _u("/.well-known/openid-configuration /openid/v1/jwks", "get"),
        )
        p.move_to_end("disruption-controller", _r("", "pods/status", "patch update"), "patch")


@functools.cache
def policy(minor: int) -> Policy:
    """The bootstrap policy of release 1.`minor` (1.33's for anything newer); shared, not to be changed."""
    cluster_roles = {name: copy.deepcopy(role) for name, role in CLUSTER_ROLES.items()}
    bindings = dict(CLUSTER_ROLE_BINDINGS)
    for name, role in CONTROLLER_ROLES.items():
        cluster_roles[CONTROLLER_PREFIX + name] = copy.deepcopy(role)
        bindings[CONTROLLER_PREFIX + name] = (
            "ClusterRole",
            CONTROLLER_PREFIX + name,
            f"sa:kube-system:{name}",
        )
    result = Policy(
        cluster_roles,
        bindings,
        {key: copy.deepcopy(role) for key, role in NAMESPACE_ROLES.items()},
        dict(NAMESPACE_ROLE_BINDINGS),
    )
    _release_edits(result, minor)
    return result


def _metadata(name: str, namespace: str = "", labels: Obj | None = None) -> Obj:
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {BOOTSTRAPPING: "rbac-defaults", **(labels or {})}
    meta["annotations"] = {AUTOUPDATE: "true"}
    return meta


def _role_object(kind: str, name: str, role: _Role, namespace: str = "") -> Obj:
    labels = {AGGREGATE_TO + target: "true" for target in role.aggregate_to}
    obj: Obj = {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": _metadata(name, namespace, labels)}
    if role.rules:
        obj["rules"] = [share(rule) for rule in role.rules]  # never changed in place once stored
    if role.aggregate_from:
        obj["aggregationRule"] = {
            "clusterRoleSelectors": [{"matchLabels": {AGGREGATE_TO + s: "true"}} for s in role.aggregate_from]
        }
    return obj


def _subject(text: str) -> Obj:
    kind, _, rest = text.partition(":")
    if kind == "sa":
        namespace, _, name = rest.partition(":")
        return {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    return {"kind": "User" if kind == "u" else "Group", "apiGroup": GROUP, "name": rest}


def _binding_object(kind: str, name: str, binding: Binding, namespace: str = "") -> Obj:
    ref_kind, ref_name, subjects = binding
    obj: Obj = {
        "apiVersion": f"{GROUP}/v1",
        "kind": kind,
        "metadata": _metadata(name, namespace),
        "roleRef": {"apiGroup": GROUP, "kind": ref_kind, "name": ref_name},
    }
    if subjects:
        obj["subjects"] = [share(_subject(s)) for s in subjects.split()]
    return obj


def policy_objects(minor: int) -> list[tuple[str, list[Obj]]]:
    """The release's bootstrap objects, by resource in the hook's order: each call's objects are new,
    their rules and subjects the shared ones."""
    p = policy(minor)
    return [
        ("clusterroles", [_role_object("ClusterRole", n, r) for n, r in p.cluster_roles.items()]),
        (
            "clusterrolebindings",
            [_binding_object("ClusterRoleBinding", n, b) for n, b in p.cluster_role_bindings.items()],
        ),
        ("roles", [_role_object("Role", n, r, ns) for (ns, n), r in p.roles.items()]),
        (
            "rolebindings",
            [_binding_object("RoleBinding", n, b, ns) for (ns, n), b in p.role_bindings.items()],
        ),
    ]
