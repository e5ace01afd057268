"""The Node authorizer in a tenant's authorization chain: what a kubelet may read by its pods' graph, what
it may do by its own name, what the static node rules give it, by release, and the reasons a refusal
carries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tenantgpu.apiserver.auth import Attributes, UserInfo
from tenantgpu.apiserver.nodeauthorizer import NodeAuthorizer
from tenantgpu.apiserver.nodegraph import NodeGraph, Vertex
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.rbacbootstrap import _APISERVER, ensure_rbac_policy
from tenantgpu.apiserver.registry import DeleteOptions
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore

Obj = dict[str, Any]
W1 = UserInfo("system:node:w1", ("system:nodes", "system:authenticated"))
W2 = UserInfo("system:node:w2", ("system:nodes", "system:authenticated"))
UNRELATED = (False, "no relationship found between node 'w2' and this object")


async def _tenant(tmp_path: Path, minor: int) -> APIServer:
    store = SQLiteDatastore(tmp_path / f"state-{minor}.db")
    config = APIServerConfig(
        name="t", datastore=store, pki=ServerPKI.create("t"), kubernetes_version=f"v1.{minor}.2"
    )
    server = APIServer(config)
    await server.registry.load()
    assert await ensure_rbac_policy(server.registry, minor)
    return server


@pytest.fixture
async def tenant(tmp_path: Path) -> APIServer:
    return await _tenant(tmp_path, 33)


async def _create(server: APIServer, plural: str, obj: Obj, namespace: str = "default") -> None:
    kind = server.kinds.resource("", "v1", plural)
    assert kind is not None
    await server.registry.create(kind, namespace if kind.namespaced else "", obj, _APISERVER)


def _pod(name: str, node: str, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}], **spec},
    }


def _secret(namespace: str, name: str, verb: str = "get") -> Attributes:
    return Attributes(verb, "", "secrets", namespace=namespace, name=name)


async def test_a_secret_is_readable_by_the_node_of_a_pod_using_it_until_the_pod_is_gone(
    tenant: APIServer,
) -> None:
    authorizer = tenant.config.authorizer
    init = {"name": "init", "image": "busybox", "env": [_secret_env("db-password")]}
    await _create(
        tenant,
        "pods",
        _pod(
            "web",
            "w1",
            initContainers=[init],
            volumes=[{"name": "settings", "projected": {"sources": [{"configMap": {"name": "web-config"}}]}}],
        ),
    )
    read = _secret("default", "db-password")
    assert authorizer.authorize(W1, read) == (True, "")
    assert authorizer.authorize(W2, read) == UNRELATED
    # the kubelet watches one secret by a metadata.name field selector: the request names it
    assert authorizer.allowed(W1, _secret("default", "db-password", "watch"))
    assert authorizer.allowed(W1, Attributes("get", "", "configmaps", namespace="default", name="web-config"))
    # the same name in another namespace is another object
    assert not authorizer.allowed(W1, _secret("other", "db-password"))
    assert authorizer.authorize(W1, _secret("default", "db-password", "update")) == (
        False,
        "can only read resources of this type",
    )

    pods = tenant.kinds.resource("", "v1", "pods")
    assert pods is not None
    await tenant.registry.delete(pods, "default", "web", DeleteOptions(0), _APISERVER)
    assert authorizer.authorize(W1, read) == (
        False,
        "no relationship found between node 'w1' and this object",
    )


def _secret_env(name: str) -> Obj:
    return {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": name, "key": "password"}}}


async def test_a_pod_bound_after_its_creation_relates_its_secrets_to_the_node(tenant: APIServer) -> None:
    await _create(
        tenant,
        "pods",
        {
            "metadata": {"name": "late"},
            "spec": {"containers": [{"name": "app", "image": "nginx", "env": [_secret_env("token")]}]},
        },
    )
    authorizer = tenant.config.authorizer
    # not scheduled: no node is related to it
    assert not authorizer.allowed(W1, _secret("default", "token"))
    assert not authorizer.allowed(W1, Attributes("get", "", "pods", namespace="default", name="late"))
    pods = tenant.kinds.resource("", "v1", "pods")
    assert pods is not None

    def bind(pod: Obj) -> Obj:
        pod["spec"]["nodeName"] = "w1"
        return pod

    await tenant.registry.modify(pods, "default", "late", bind, _APISERVER, subresource="binding")
    assert authorizer.allowed(W1, _secret("default", "token"))
    assert authorizer.allowed(W1, Attributes("get", "", "pods", namespace="default", name="late"))


async def test_claims_lead_to_their_volumes_and_the_secrets_the_kubelet_reads(tenant: APIServer) -> None:
    await _create(
        tenant,
        "persistentvolumes",
        {
            "metadata": {"name": "pv-data"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "claimRef": {"namespace": "default", "name": "data"},
                "csi": {
                    "driver": "csi.example.com",
                    "volumeHandle": "vol-1",
                    "nodePublishSecretRef": {"name": "csi-publish", "namespace": "storage"},
                    "controllerPublishSecretRef": {"name": "csi-controller", "namespace": "storage"},
                },
            },
        },
    )
    await _create(
        tenant,
        "pods",
        _pod("db", "w1", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]),
    )
    authorizer = tenant.config.authorizer
    claim = Attributes("get", "", "persistentvolumeclaims", namespace="default", name="data")
    assert authorizer.allowed(W1, claim)
    assert authorizer.authorize(W2, claim) == UNRELATED
    assert authorizer.allowed(W1, Attributes("get", "", "persistentvolumes", name="pv-data"))
    assert not authorizer.allowed(W2, Attributes("get", "", "persistentvolumes", name="pv-data"))
    # the secret is in the volume's namespace, not the pod's; the controller's is not the kubelet's
    assert authorizer.allowed(W1, _secret("storage", "csi-publish"))
    assert not authorizer.allowed(W2, _secret("storage", "csi-publish"))
    assert not authorizer.allowed(W1, _secret("storage", "csi-controller"))
    status = Attributes("patch", "", "persistentvolumeclaims", "status", "default", "data")
    assert authorizer.allowed(W1, status)
    assert authorizer.authorize(
        W1, Attributes("list", "", "persistentvolumeclaims", namespace="default")
    ) == (
        False,
        "can only get individual resources of this type",
    )
    assert authorizer.authorize(
        W1, Attributes("get", "", "persistentvolumeclaims", "status", "default", "data")
    ) == (False, "can only get/update/patch this type")


async def test_a_mirror_pod_relates_nothing_but_itself(tenant: APIServer) -> None:
    mirror = _pod("static-web", "w1", serviceAccountName="robot", imagePullSecrets=[{"name": "registry"}])
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}
    await _create(tenant, "pods", mirror)
    authorizer = tenant.config.authorizer
    assert authorizer.allowed(W1, Attributes("get", "", "pods", namespace="default", name="static-web"))
    assert not authorizer.allowed(W1, _secret("default", "registry"))
    token = Attributes("create", "", "serviceaccounts", "token", "default", "robot")
    assert not authorizer.allowed(W1, token)


@pytest.mark.parametrize(
    ("minor", "get_reason"),
    [
        (33, "not allowed to get service accounts"),
        (31, "can only create tokens for individual service accounts"),
    ],
)
async def test_a_node_creates_tokens_for_its_pods_accounts_only(
    tmp_path: Path, minor: int, get_reason: str
) -> None:
    tenant = await _tenant(tmp_path, minor)
    await _create(tenant, "pods", _pod("web", "w1", serviceAccountName="robot"))
    authorizer = tenant.config.authorizer
    token = Attributes("create", "", "serviceaccounts", "token", "default", "robot")
    assert authorizer.authorize(W1, token) == (True, "")
    assert authorizer.authorize(W2, token) == UNRELATED
    assert authorizer.authorize(
        W1, Attributes("get", "", "serviceaccounts", namespace="default", name="robot")
    ) == (
        False,
        get_reason,
    )


async def test_with_selectors_a_node_reads_its_own_node_and_lists_only_its_pods(tenant: APIServer) -> None:
    await _create(tenant, "pods", _pod("here", "w1"))
    await _create(tenant, "pods", _pod("there", "w2"))
    authorizer = tenant.config.authorizer

    def pods(verb: str, *selector: tuple[str, str, str], name: str = "") -> Attributes:
        return Attributes(verb, "", "pods", name=name, field_selector=selector)

    assert authorizer.allowed(W1, pods("watch", ("spec.nodeName", "=", "w1")))
    assert authorizer.allowed(W1, pods("list", ("metadata.name", "=", "x"), ("spec.nodeName", "=", "w1")))
    refused = (False, "can only list/watch pods with spec.nodeName field selector")
    assert authorizer.authorize(W1, pods("list")) == refused
    assert authorizer.authorize(W1, pods("list", ("spec.nodeName", "=", "w2"))) == refused
    assert authorizer.authorize(W1, pods("list", ("spec.nodeName", "!=", "w1"))) == refused
    assert authorizer.allowed(W1, Attributes("get", "", "pods", namespace="default", name="here"))
    assert authorizer.authorize(W1, Attributes("get", "", "pods", namespace="default", name="there")) == (
        False,
        "no relationship found between node 'w1' and this object",
    )
    for subresource, verb in (("status", "patch"), ("eviction", "create"), ("", "create"), ("", "delete")):
        assert authorizer.allowed(W1, Attributes(verb, "", "pods", subresource, "default", "there"))
    # kube's switch ends without a reason for what it does not name, and RBAC gives a node nothing more
    assert authorizer.authorize(W1, Attributes("create", "", "pods", "exec", "default", "here")) == (
        False,
        "",
    )

    assert authorizer.allowed(W1, Attributes("get", "", "nodes", name="w1"))
    assert authorizer.authorize(W1, Attributes("get", "", "nodes", name="w2")) == (
        False,
        "node 'w1' cannot read 'w2', only its own Node object",
    )
    assert authorizer.authorize(W1, Attributes("watch", "", "nodes")) == (
        False,
        "node 'w1' cannot read all nodes, only its own Node object",
    )
    assert authorizer.allowed(W1, Attributes("patch", "", "nodes", "status", name="w2"))
    assert authorizer.authorize(W1, Attributes("delete", "", "nodes", name="w1")) == (False, "")


async def test_before_1_32_pods_and_nodes_follow_the_static_rules(tmp_path: Path) -> None:
    tenant = await _tenant(tmp_path, 31)
    authorizer = tenant.config.authorizer
    assert authorizer.allowed(W1, Attributes("list", "", "pods"))
    assert authorizer.allowed(W1, Attributes("get", "", "pods", namespace="default", name="anyone"))
    assert authorizer.allowed(W1, Attributes("get", "", "nodes", name="w2"))
    assert authorizer.authorize(W1, Attributes("delete", "", "nodes", name="w1")) == (False, "")


async def test_leases_and_csinodes_go_by_the_nodes_own_name(tenant: APIServer) -> None:
    authorizer = tenant.config.authorizer

    def lease(verb: str, name: str = "w1", namespace: str = "kube-node-lease") -> Attributes:
        return Attributes(verb, "coordination.k8s.io", "leases", namespace=namespace, name=name)

    assert authorizer.allowed(W1, lease("update"))
    assert authorizer.allowed(W1, lease("create", name=""))
    assert authorizer.authorize(W1, lease("update", name="w2")) == (
        False,
        "can only access node lease with the same name as the requesting node",
    )
    assert authorizer.authorize(W1, lease("get", namespace="kube-system")) == (
        False,
        'can only access leases in the "kube-node-lease" system namespace',
    )
    assert authorizer.authorize(W1, lease("list", name="")) == (
        False,
        "can only get, create, update, patch, or delete a node lease",
    )
    csinode = Attributes("patch", "storage.k8s.io", "csinodes", name="w2")
    assert authorizer.authorize(W1, csinode) == (
        False,
        "can only access CSINode with the same name as the requesting node",
    )
    assert authorizer.allowed(W1, Attributes("patch", "storage.k8s.io", "csinodes", name="w1"))


async def test_other_resources_follow_the_releases_node_rules(tenant: APIServer) -> None:
    authorizer = tenant.config.authorizer
    for allowed in (
        Attributes("create", "", "events", namespace="default"),
        Attributes("watch", "", "services"),
        Attributes("create", "certificates.k8s.io", "certificatesigningrequests"),
        Attributes("list", "certificates.k8s.io", "certificatesigningrequests"),
        Attributes("get", "node.k8s.io", "runtimeclasses", name="nvidia"),
        Attributes("create", "authorization.k8s.io", "subjectaccessreviews"),
    ):
        assert authorizer.authorize(W1, allowed) == (True, ""), allowed
    assert authorizer.authorize(W1, Attributes("list", "apps", "deployments")) == (False, "")
    assert authorizer.authorize(W1, Attributes("approve", "certificates.k8s.io", "signers", name="x")) == (
        False,
        "",
    )
    # a path is RBAC's: every authenticated user may read the version
    assert authorizer.authorize(W1, Attributes("get", path="/version")) == (
        True,
        'RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole'
        ' "system:discovery" to Group "system:authenticated"',
    )


@pytest.mark.parametrize(
    ("minor", "listed", "collected"),
    [
        (30, (True, ""), (False, "can only get, create, update, patch, or delete a ResourceSlice")),
        (31, (True, ""), (True, "")),
        (
            33,
            (False, "can only list/watch/deletecollection resourceslices with nodeName field selector"),
            (False, "can only list/watch/deletecollection resourceslices with nodeName field selector"),
        ),
    ],
)
async def test_resource_slices_by_release(
    tmp_path: Path, minor: int, listed: tuple[bool, str], collected: tuple[bool, str]
) -> None:
    authorizer = (await _tenant(tmp_path, minor)).config.authorizer
    group = "resource.k8s.io"
    assert authorizer.authorize(W1, Attributes("list", group, "resourceslices")) == listed
    assert authorizer.authorize(W1, Attributes("deletecollection", group, "resourceslices")) == collected
    own = Attributes("watch", group, "resourceslices", field_selector=(("spec.nodeName", "=", "w1"),))
    assert authorizer.allowed(W1, own)
    assert authorizer.allowed(W1, Attributes("create", group, "resourceslices"))
    # the tenant serves no resource slices: none is related to the node
    assert authorizer.authorize(W1, Attributes("get", group, "resourceslices", name="gpus")) == (
        False,
        "no relationship found between node 'w1' and this object",
    )


@pytest.mark.parametrize(
    ("minor", "reason"), [(27, ""), (28, "can only get individual resources of this type")]
)
async def test_resource_claims_are_the_node_authorizers_from_1_28(
    tmp_path: Path, minor: int, reason: str
) -> None:
    authorizer = (await _tenant(tmp_path, minor)).config.authorizer
    listing = Attributes("list", "resource.k8s.io", "resourceclaims", namespace="default")
    assert authorizer.authorize(W1, listing) == (False, reason)


async def test_only_a_named_member_of_system_nodes_is_a_node(tenant: APIServer) -> None:
    authorizer = tenant.config.authorizer
    own_pods = Attributes("list", "", "pods", field_selector=(("spec.nodeName", "=", "w1"),))
    nameless = UserInfo("system:node:", ("system:nodes",))
    assert authorizer.authorize(nameless, own_pods) == (False, 'unknown node for user "system:node:"')
    # the name without the group, or the group without the name, is RBAC's alone
    assert authorizer.authorize(UserInfo("system:node:w1", ("system:authenticated",)), own_pods) == (
        False,
        "",
    )
    assert authorizer.authorize(UserInfo("kubelet", ("system:nodes",)), own_pods) == (False, "")


async def test_a_refusal_carries_each_authorizers_reason_on_its_own_line(tenant: APIServer) -> None:
    rbac = tenant.kinds.resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
    assert rbac is not None
    await tenant.registry.create(
        rbac,
        "",
        {
            "metadata": {"name": "nodes-read-more"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "missing"},
            "subjects": [{"kind": "Group", "name": "system:nodes"}],
        },
        _APISERVER,
    )
    assert tenant.config.authorizer.authorize(W1, _secret("default", "db")) == (
        False,
        "no relationship found between node 'w1' and this object\n"
        'RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found',
    )
    # and RBAC still allows what a binding gives a node beyond the Node authorizer
    await tenant.registry.create(
        rbac,
        "",
        {
            "metadata": {"name": "nodes-view"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:aggregate-to-view",
            },
            "subjects": [{"kind": "Group", "name": "system:nodes"}],
        },
        _APISERVER,
    )
    allowed, reason = tenant.config.authorizer.authorize(W1, Attributes("list", "apps", "deployments"))
    assert allowed and reason.startswith('RBAC: allowed by ClusterRoleBinding "nodes-view"')


class _NoGraph(NodeGraph):
    def related(self, node: str, vertex: Vertex, namespace: str, name: str) -> bool:
        raise AssertionError(f"the graph was asked about {vertex} {namespace}/{name}")


def test_a_kubelets_frequent_writes_never_walk_the_graph() -> None:
    authorizer = NodeAuthorizer(_NoGraph(), 33)
    for attributes in (
        Attributes("patch", "", "pods", "status", "default", "web"),
        Attributes("create", "", "events", namespace="default"),
        Attributes("update", "coordination.k8s.io", "leases", namespace="kube-node-lease", name="w1"),
        Attributes("patch", "", "nodes", "status", name="w1"),
        Attributes("watch", "", "pods", field_selector=(("spec.nodeName", "=", "w1"),)),
    ):
        assert authorizer.authorize(W1, attributes) == (True, ""), attributes
