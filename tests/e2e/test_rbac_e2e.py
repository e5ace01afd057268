"""RBAC as a tenant's users meet it with kubectl and the official client: the bootstrap roles, bindings
that grant (and only grant) what they name, `auth can-i`, escalation prevention, aggregation and access
reviews."""

from __future__ import annotations

from pathlib import Path

import pytest
from apiserver_harness import (
    BackgroundLoop,
    Kubectl,
    RawClient,
    RunningAPIServer,
    release_server,
    start_server,
    wait_for,
)
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tenantgpu.controlplane import ControlPlaneServices

pytestmark = pytest.mark.slow

RBAC = "/apis/rbac.authorization.k8s.io/v1"


def _ready(raw: RawClient) -> bool:
    return raw.request("GET", "/readyz/poststarthook/rbac/bootstrap-roles").body == b"ok"


@pytest.fixture(scope="module")
def raw(apiserver: RunningAPIServer) -> RawClient:
    admin = RawClient(apiserver.kubeconfig)
    wait_for("the condition", lambda: _ready(admin))
    return admin


@pytest.fixture(scope="module")
def team_a(raw: RawClient, kubectl: Kubectl) -> str:
    """Namespace team-a, where alice is bound to `edit`."""
    kubectl("create", "namespace", "team-a")
    kubectl("create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice", "-n", "team-a")
    return "team-a"


def _user(apiserver: RunningAPIServer, name: str, groups: list[str] | None = None) -> Path:
    return apiserver.write_kubeconfig(
        f"{name}.kubeconfig", apiserver.server.user_kubeconfig(name, groups or [])
    )


def _aggregated(raw: RawClient, role: str, resource: str) -> bool:
    rules = raw.request("GET", f"{RBAC}/clusterroles/{role}").json().get("rules") or []
    return any(resource in rule.get("resources", []) for rule in rules)


def test_the_bootstrap_roles_are_listed_and_aggregated(
    kubectl: Kubectl, raw: RawClient, services: ControlPlaneServices
) -> None:
    names = kubectl("get", "clusterroles", "-o", "name").stdout.split()
    for name in ("cluster-admin", "admin", "edit", "view", "system:node", "system:controller:job-controller"):
        assert f"clusterrole.rbac.authorization.k8s.io/{name}" in names
    bindings = kubectl("get", "clusterrolebindings", "cluster-admin", "-o", "wide").stdout
    assert "ClusterRole/cluster-admin" in bindings and "system:masters" in bindings
    roles = kubectl("get", "roles", "-n", "kube-system", "-o", "name").stdout.split()
    assert "role.rbac.authorization.k8s.io/extension-apiserver-authentication-reader" in roles
    labels = kubectl("get", "clusterrole", "view", "-o", "jsonpath={.metadata.labels}").stdout
    assert '"kubernetes.io/bootstrapping":"rbac-defaults"' in labels
    # the aggregation controller gives view the aggregate-to-view role's rules
    wait_for("the condition", lambda: _aggregated(raw, "view", "pods"))
    described = kubectl("describe", "clusterrole", "view").stdout
    assert "aggregate-to-edit=true" in described
    rows = [line.split() for line in described.splitlines()]
    assert ["pods", "[]", "[]", "[get", "list", "watch]"] in rows
    assert ["deployments.apps", "[]", "[]", "[get", "list", "watch]"] in rows


def test_a_service_account_has_no_blanket_rights(kubectl: Kubectl, raw: RawClient) -> None:
    secrets = kubectl(
        "auth", "can-i", "list", "secrets", "--as", "system:serviceaccount:default:default", check=False
    )
    assert (secrets.returncode, secrets.stdout.strip()) == (1, "no")
    # what every authenticated user may do, it may
    review = kubectl(
        "auth",
        "can-i",
        "create",
        "selfsubjectaccessreviews.authorization.k8s.io",
        "--as",
        "system:serviceaccount:default:default",
    )
    assert review.stdout.strip() == "yes"


def test_a_role_binding_grants_edit_in_its_namespace_only(
    apiserver: RunningAPIServer, kubectl: Kubectl, team_a: str, services: ControlPlaneServices, raw: RawClient
) -> None:
    wait_for("the condition", lambda: _aggregated(raw, "edit", "deployments"))
    alice = _user(apiserver, "alice")
    created = kubectl("create", "deployment", "web", "--image=nginx", "-n", team_a, kubeconfig=alice)
    assert "deployment.apps/web created" in created.stdout
    refused = kubectl(
        "create", "deployment", "web", "--image=nginx", "-n", "default", kubeconfig=alice, check=False
    )
    assert refused.returncode == 1
    assert (
        'deployments.apps is forbidden: User "alice" cannot create resource "deployments" in API group "apps"'
        ' in the namespace "default"'
    ) in refused.stderr
    # edit does not reach RBAC itself, nor a subresource it does not name
    roles = kubectl("get", "roles", "-n", team_a, kubeconfig=alice, check=False)
    assert 'cannot list resource "roles" in API group "rbac.authorization.k8s.io"' in roles.stderr
    listing = kubectl("auth", "can-i", "--list", "--as", "alice", "-n", team_a).stdout
    rows = {line.split()[0]: line.split() for line in listing.splitlines()[1:] if line.strip()}
    assert rows["deployments.apps"][-1] == "watch]" and "[create" in rows["deployments.apps"]
    assert rows["selfsubjectaccessreviews.authorization.k8s.io"][-1] == "[create]"
    assert "rolebindings.rbac.authorization.k8s.io" not in rows
    elsewhere = kubectl("auth", "can-i", "--list", "--as", "alice", "-n", "default").stdout
    assert "deployments.apps" not in elsewhere


def test_a_namespace_admin_cannot_grant_more_than_they_hold(
    apiserver: RunningAPIServer, kubectl: Kubectl, raw: RawClient, services: ControlPlaneServices
) -> None:
    kubectl("create", "namespace", "team-b")
    kubectl("create", "rolebinding", "bob-admin", "--clusterrole=admin", "--user=bob", "-n", "team-b")
    wait_for("the condition", lambda: _aggregated(raw, "admin", "rolebindings"))
    bob = _user(apiserver, "bob", ["team-b-admins"])
    escalate = kubectl(
        "create",
        "rolebinding",
        "carol-root",
        "--clusterrole=cluster-admin",
        "--user=carol",
        "-n",
        "team-b",
        kubeconfig=bob,
        check=False,
    )
    assert escalate.returncode == 1
    assert (
        'rolebindings.rbac.authorization.k8s.io "carol-root" is forbidden: user "bob" (groups=["team-b-admins"'
        ' "system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}\n{NonResourceURLs:["*"], Verbs:["*"]}'
    ) in escalate.stderr
    granted = kubectl(
        "create",
        "rolebinding",
        "carol-edit",
        "--clusterrole=edit",
        "--user=carol",
        "-n",
        "team-b",
        kubeconfig=bob,
    )
    assert "carol-edit created" in granted.stdout
    # nor may bob write a role with rules he lacks
    role = kubectl(
        "create",
        "role",
        "node-reader",
        "--verb=get",
        "--resource=nodes",
        "-n",
        "team-b",
        kubeconfig=bob,
        check=False,
    )
    assert role.returncode == 1
    assert 'Resources:["nodes"], Verbs:["get"]}' in role.stderr


def test_an_aggregated_role_picks_up_a_new_role(
    kubectl: Kubectl, raw: RawClient, team_a: str, services: ControlPlaneServices
) -> None:
    manifest = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widgets-view
  labels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}
rules:
- apiGroups: [example.com]
  resources: [widgets]
  verbs: [get, list, watch]
"""
    kubectl("apply", "-f", "-", input=manifest)
    for role in ("view", "edit", "admin"):  # view is aggregated into edit, edit into admin
        wait_for("the condition", lambda role=role: _aggregated(raw, role, "widgets"))
    review = {
        "spec": {
            "user": "alice",
            "resourceAttributes": {
                "verb": "list",
                "group": "example.com",
                "resource": "widgets",
                "namespace": "team-a",
            },
        }
    }
    answer = raw.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review).json()
    assert answer["status"] == {
        "allowed": True,
        "reason": 'RBAC: allowed by RoleBinding "alice-edit/team-a" of ClusterRole "edit" to User "alice"',
    }


def test_subject_access_reviews_name_the_binding_that_allows(
    apiserver: RunningAPIServer, team_a: str, raw: RawClient, services: ControlPlaneServices
) -> None:
    wait_for("the condition", lambda: _aggregated(raw, "edit", "deployments"))
    api = k8s.AuthorizationV1Api(k8s_config.new_client_from_config(str(apiserver.kubeconfig)))
    attributes = {"verb": "create", "group": "apps", "resource": "deployments", "namespace": team_a}
    review = api.create_subject_access_review(
        k8s.V1SubjectAccessReview(
            spec=k8s.V1SubjectAccessReviewSpec(user="alice", resource_attributes=attributes)
        )
    )
    assert review.status.allowed is True
    assert review.status.reason == (
        'RBAC: allowed by RoleBinding "alice-edit/team-a" of ClusterRole "edit" to User "alice"'
    )
    denied = api.create_subject_access_review(
        k8s.V1SubjectAccessReview(
            spec=k8s.V1SubjectAccessReviewSpec(
                user="alice", resource_attributes={**attributes, "namespace": "default"}
            )
        )
    )
    assert denied.status.allowed is False and not denied.status.reason
    local = api.create_namespaced_local_subject_access_review(
        team_a,
        k8s.V1LocalSubjectAccessReview(
            metadata={"namespace": team_a},
            spec=k8s.V1SubjectAccessReviewSpec(
                user="someone",
                groups=["system:serviceaccounts"],
                non_resource_attributes=None,
                resource_attributes={"verb": "get", "resource": "pods", "namespace": team_a},
            ),
        ),
    )
    assert local.status.allowed is False
    basic = api.create_subject_access_review(
        k8s.V1SubjectAccessReview(
            spec=k8s.V1SubjectAccessReviewSpec(
                user="someone",
                groups=["system:authenticated"],
                non_resource_attributes={"verb": "get", "path": "/healthz"},
            )
        )
    )
    assert basic.status.allowed is True
    assert basic.status.reason == (
        'RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group'
        ' "system:authenticated"'
    )
    invalid = raw.request(
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}},
    )
    assert invalid.status == 422
    assert (
        'spec.user: Invalid value: "": at least one of user or group must be specified'
        in invalid.json()["message"]
    )


def test_a_binding_to_a_missing_role_is_named_in_the_denial(
    apiserver: RunningAPIServer, kubectl: Kubectl, raw: RawClient
) -> None:
    kubectl("create", "clusterrolebinding", "dave-ghost", "--clusterrole=ghost", "--user=dave")
    dave = _user(apiserver, "dave")
    refused = kubectl("get", "nodes", kubeconfig=dave, check=False)
    assert refused.stderr.strip().endswith(
        'nodes is forbidden: User "dave" cannot list resource "nodes" in API group "" at the cluster scope:'
        ' RBAC: clusterrole.rbac.authorization.k8s.io "ghost" not found'
    )


def test_deleted_bootstrap_roles_come_back_on_restart(
    background_loop: BackgroundLoop, tmp_path: Path
) -> None:
    running = start_server(background_loop, tmp_path, "tenant-r")
    admin = RawClient(running.kubeconfig)
    try:
        wait_for("the condition", lambda: _ready(admin))
        assert admin.request("DELETE", f"{RBAC}/clusterroles/system:monitoring").status == 200
        protected = admin.request("GET", f"{RBAC}/clusterroles/system:discovery").json()
        protected["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] = "false"
        protected["rules"] = []
        assert admin.request("PUT", f"{RBAC}/clusterroles/system:discovery", protected).status == 200
        trimmed = admin.request("GET", f"{RBAC}/clusterroles/system:basic-user").json()
        trimmed["rules"] = trimmed["rules"][:1]
        assert admin.request("PUT", f"{RBAC}/clusterroles/system:basic-user", trimmed).status == 200
    finally:
        background_loop.run(running.server.stop())
    again = start_server(background_loop, tmp_path, "tenant-r", datastore=running.datastore)
    admin = RawClient(again.kubeconfig)
    try:
        wait_for("the condition", lambda: _ready(admin))
        assert admin.request("GET", f"{RBAC}/clusterroles/system:monitoring").status == 200
        # an object marked autoupdate "false" is left as its owner made it
        assert not admin.request("GET", f"{RBAC}/clusterroles/system:discovery").json().get("rules")
        # others get back the rules they lost
        rules = admin.request("GET", f"{RBAC}/clusterroles/system:basic-user").json()["rules"]
        assert {
            "verbs": ["create"],
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["selfsubjectreviews"],
        } in rules
    finally:
        background_loop.run(again.server.stop())
        again.datastore.close()


def test_an_older_tenant_has_its_releases_roles(
    background_loop: BackgroundLoop, tmp_path: Path, kubectl: Kubectl
) -> None:
    with release_server(background_loop, tmp_path, "v1.27.16") as kubeconfig:
        wait_for("the condition", lambda: _ready(RawClient(kubeconfig)))
        listed = kubectl("get", "clusterroles", version="1.27", kubeconfig=kubeconfig).stdout
        names = {line.split()[0] for line in listed.splitlines()[1:]}
        assert {"cluster-admin", "view", "system:controller:job-controller"} <= names
        # added in later releases: the legacy token cleaner (1.29), the VAP status controller (1.30)
        assert "system:controller:legacy-service-account-token-cleaner" not in names
        assert "system:controller:validatingadmissionpolicy-status-controller" not in names
        scheduler = kubectl(
            "get", "clusterrole", "system:kube-scheduler", "-o", "yaml", version="1.28", kubeconfig=kubeconfig
        )
        assert "endpoints" in scheduler.stdout  # 1.27's scheduler still elected its leader by endpoints
