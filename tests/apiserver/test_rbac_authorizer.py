"""The RBAC authorizer over a registry holding the bootstrap policy: who may do what, why, and what a
change of bindings changes at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenantgpu.apiserver.auth import Attributes, UserInfo
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.rbacbootstrap import _APISERVER, ensure_rbac_policy
from tenantgpu.apiserver.rbacpolicy import policy
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore

SA = UserInfo(
    "system:serviceaccount:default:default",
    ("system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"),
)
ALICE = UserInfo("alice", ("system:authenticated",))


@pytest.fixture
async def server(tmp_path: Path) -> APIServer:
    store = SQLiteDatastore(tmp_path / "state.db")
    server = APIServer(APIServerConfig(name="t", datastore=store, pki=ServerPKI.create("t")))
    await server.registry.load()
    assert await ensure_rbac_policy(server.registry, 33)
    return server


async def _create(server: APIServer, plural: str, obj: dict, namespace: str = "") -> None:
    kind = server.kinds.resource("rbac.authorization.k8s.io", "v1", plural)
    assert kind is not None
    await server.registry.create(kind, namespace, obj, _APISERVER)


async def test_masters_are_allowed_before_any_rule_and_nodes_are_not(server: APIServer) -> None:
    authorizer = server.config.authorizer
    assert authorizer.authorize(
        UserInfo("admin", ("system:masters",)), Attributes("delete", "", "nodes")
    ) == (
        True,
        "",
    )
    # a kubelet lists no secrets: the Node authorizer reads only named ones, and RBAC grants it none
    node = UserInfo("system:node:w1", ("system:nodes", "system:authenticated"))
    assert authorizer.authorize(node, Attributes("list", "", "secrets", namespace="default")) == (
        False,
        "No Object name found",
    )
    status = authorizer.rules(node, "default")
    assert status["incomplete"] is True
    assert status["evaluationError"] == "node authorizer does not support user rule resolution"


async def test_a_service_account_gets_what_every_authenticated_user_gets(server: APIServer) -> None:
    authorizer = server.config.authorizer
    assert not authorizer.allowed(SA, Attributes("list", "", "secrets", namespace="default"))
    assert authorizer.authorize(SA, Attributes("get", path="/version")) == (
        True,
        'RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group'
        ' "system:authenticated"',
    )
    # the issuer discovery role is bound to every service account, not to other users
    assert authorizer.allowed(SA, Attributes("get", path="/openid/v1/jwks"))
    assert not authorizer.allowed(ALICE, Attributes("get", path="/openid/v1/jwks"))
    assert not authorizer.allowed(ALICE, Attributes("get", path="/metrics"))


async def test_a_new_binding_counts_at_once_and_only_in_its_namespace(server: APIServer) -> None:
    authorizer = server.config.authorizer
    read = Attributes("get", "", "configmaps", namespace="team-a", name="settings")
    assert not authorizer.allowed(ALICE, read)
    namespaces = server.kinds.resource("", "v1", "namespaces")
    assert namespaces is not None
    await server.registry.create(namespaces, "", {"metadata": {"name": "team-a"}}, _APISERVER)
    await _create(
        server,
        "roles",
        {
            "metadata": {"name": "reader"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}],
        },
        "team-a",
    )
    await _create(
        server,
        "rolebindings",
        {
            "metadata": {"name": "alice-reads"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "Group", "name": "nobody"}, {"kind": "User", "name": "alice"}],
        },
        "team-a",
    )
    assert authorizer.authorize(ALICE, read) == (
        True,
        'RBAC: allowed by RoleBinding "alice-reads/team-a" of Role "reader" to User "alice"',
    )
    assert not authorizer.allowed(
        ALICE, Attributes("get", "", "configmaps", namespace="team-b", name="settings")
    )
    rules, problems = authorizer.rules_for(ALICE, "team-a")
    assert {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]} in rules and not problems


async def test_a_service_account_subject_without_namespace_takes_the_bindings(server: APIServer) -> None:
    await _create(
        server,
        "rolebindings",
        {
            "metadata": {"name": "default-views"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:aggregate-to-view",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "default"}],
        },
        "default",
    )
    assert server.config.authorizer.authorize(SA, Attributes("list", "", "pods", namespace="default")) == (
        True,
        'RBAC: allowed by RoleBinding "default-views/default" of ClusterRole "system:aggregate-to-view" to'
        ' ServiceAccount "default/default"',
    )


async def test_the_quick_decision_is_the_one_the_reasoned_answer_gives(server: APIServer) -> None:
    """Every request is decided by `allowed`, which skips describing the binding; a refusal and an
    access review show `authorize`'s reason. The two must never disagree."""
    authorizer = server.config.authorizer
    users = [
        SA,
        ALICE,
        UserInfo("system:kube-scheduler", ("system:authenticated",)),
        UserInfo("system:kube-controller-manager", ("system:authenticated",)),
        UserInfo("system:node:w1", ("system:nodes", "system:authenticated")),
        UserInfo("system:serviceaccount:kube-system:hami-scheduler", SA.groups),
    ]
    asked = [
        Attributes(verb, "", resource, namespace=namespace)
        for verb in ("get", "list", "create", "patch", "delete")
        for resource in ("pods", "pods/binding", "events", "nodes", "secrets", "configmaps")
        for namespace in ("", "default", "kube-system")
    ] + [Attributes("get", path=path) for path in ("/version", "/metrics", "/openid/v1/jwks", "/api")]
    decisions = {(u.name, repr(a)): authorizer.allowed(u, a) for u in users for a in asked}
    assert decisions == {(u.name, repr(a)): authorizer.authorize(u, a)[0] for u in users for a in asked}
    assert any(decisions.values()) and not all(decisions.values())


def test_each_release_has_its_own_policy() -> None:
    newest, oldest = policy(33), policy(27)
    assert "system:controller:service-cidrs-controller" in newest.cluster_roles
    assert "system:controller:service-cidrs-controller" not in policy(32).cluster_roles
    assert "system:controller:legacy-service-account-token-cleaner" in policy(29).cluster_roles
    assert "system:controller:legacy-service-account-token-cleaner" not in oldest.cluster_roles
    scheduler = oldest.cluster_roles["system:kube-scheduler"].rules
    assert {"verbs": ["create"], "apiGroups": [""], "resources": ["endpoints"]} in scheduler
    for release in range(27, 34):
        p = policy(release)
        # every default binding names a default role of its release
        assert all(ref in p.cluster_roles for _, ref, _ in p.cluster_role_bindings.values())
        assert all((ns, ref) in p.roles for (ns, _), (_, ref, _) in p.role_bindings.items())
