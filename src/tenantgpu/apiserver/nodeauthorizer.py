"""kube-apiserver's Node authorizer (`plugin/pkg/auth/authorizer/node/node_authorizer.go`): what a kubelet,
user `system:node:<name>` in group `system:nodes`, may do, as the tenant's release decides it.

Secrets, config maps, persistent volumes and their claims, resource claims, volume attachments, service
account tokens and resource slices are allowed only for objects related to the node (`nodegraph.py`);
leases and CSINodes only by the node's own name; with `AuthorizeNodeWithSelectors` (alpha and off in
1.31, beta and on from 1.32) a node reads only its own Node object and only the pods bound to it, a
list or watch of them only with the `spec.nodeName=<node>` field selector. Everything else is judged by kube's static node rules, the
`system:node` ClusterRole of the release (`NodeRules()`). The authorizer never denies: where it does
not allow, it has no opinion, with kube's reason when it gave one, and RBAC decides next.

By release: resource claims are judged from 1.28, resource slices from 1.30 (list and watch open to
every node before 1.32, deletecollection too in 1.31); a plain `get` of a service account is refused
with its own reason from 1.33, where `KubeletServiceAccountTokenForCredentialProviders` is off.

NodeRestriction admission, which would narrow a node's writes to its own objects (its Node, its mirror
pods' status, its lease), is off by default in kube-apiserver and not among a TenantControlPlane's
default `admissionControllers`, so it is not modelled: what this authorizer allows a node to write it
may write to any such object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tenantgpu.apiserver.auth import NODES, Attributes, UserInfo
from tenantgpu.apiserver.nodegraph import NodeGraph, Vertex
from tenantgpu.apiserver.rbac import CompiledRule, go_quote
from tenantgpu.apiserver.rbacpolicy import policy

Obj = dict[str, Any]
NODE_PREFIX = "system:node:"
NODE_LEASE_NAMESPACE = "kube-node-lease"
Decision = tuple[bool, str]
NO_OPINION: Decision = (False, "")
ALLOW: Decision = (True, "")


def node_identity(user: UserInfo) -> str | None:
    """The node a user is (kube's default node identifier): its name after `system:node:` when it is
    also in `system:nodes`; "" for a node whose name is empty; None for anyone else."""
    if not user.name.startswith(NODE_PREFIX) or NODES not in user.groups:
        return None
    return user.name[len(NODE_PREFIX) :]


class StaticRules:
    """kube's `NodeRules()` for judging the resources the authorizer does not subdivide. The rules name
    verbs, groups and resources one by one, so each is kept as its (group, resource, verb) triples; a rule
    with a wildcard, names or URLs is matched as RBAC matches it."""

    def __init__(self, rules: Iterable[Obj]) -> None:
        self._triples: set[tuple[str, str, str]] = set()
        self._others: list[CompiledRule] = []
        for rule in rules:
            compiled = CompiledRule(rule)
            plain = not (compiled.names or compiled.urls) and "*" not in (
                compiled.verbs | compiled.groups | compiled.resources
            )
            if not plain:
                self._others.append(compiled)
                continue
            self._triples.update(
                (g, r, v) for g in compiled.groups for r in compiled.resources for v in compiled.verbs
            )

    def allows(self, attributes: Attributes) -> bool:
        if attributes.resource:
            sub = attributes.subresource
            resource = f"{attributes.resource}/{sub}" if sub else attributes.resource
            if (attributes.group, resource, attributes.verb) in self._triples:
                return True
        return any(rule.allows(attributes) for rule in self._others)


def _field_selects(attributes: Attributes, field: str, value: str) -> bool:
    return any(term == (field, "=", value) for term in attributes.field_selector)


class NodeAuthorizer:
    """The Node authorizer of one tenant's release."""

    def __init__(self, graph: NodeGraph, minor: int) -> None:
        self._graph = graph
        self._minor = minor
        self._rules = StaticRules(policy(minor).cluster_roles["system:node"].rules)
        # AuthorizeNodeWithSelectors (and AuthorizeWithSelectors, which hands it the selectors)
        self._selectors = minor >= 32
        judges: dict[tuple[str, str], Callable[[str, Attributes], Decision]] = {
            ("", "secrets"): lambda node, a: self._read_namespaced(node, "secret", a),
            ("", "configmaps"): lambda node, a: self._read_namespaced(node, "configmap", a),
            ("", "persistentvolumeclaims"): self._claim,
            ("", "persistentvolumes"): lambda node, a: self._get(node, "pv", a),
            ("storage.k8s.io", "volumeattachments"): lambda node, a: self._get(node, "volumeattachment", a),
            ("", "serviceaccounts"): self._service_account,
            ("coordination.k8s.io", "leases"): self._lease,
            ("storage.k8s.io", "csinodes"): self._csi_node,
        }
        if minor >= 28:
            judges["resource.k8s.io", "resourceclaims"] = lambda node, a: self._get(node, "resourceclaim", a)
        if minor >= 30:
            judges["resource.k8s.io", "resourceslices"] = self._resource_slice
        if self._selectors:
            judges["", "nodes"] = self._node
            judges["", "pods"] = self._pod
        self._judges = judges

    def authorize(self, user: UserInfo, attributes: Attributes) -> Decision:
        """Allowed, or no opinion with kube's reason ("" when it gives none)."""
        node = node_identity(user)
        if node is None:
            return NO_OPINION
        if not node:
            return False, f"unknown node for user {go_quote(user.name)}"
        if attributes.resource:
            judge = self._judges.get((attributes.group, attributes.resource))
            if judge is not None:
                return judge(node, attributes)
        return ALLOW if self._rules.allows(attributes) else NO_OPINION

    # --- kube's checks, one per kind of access --------------------------------------------------

    def _related(self, node: str, vertex: Vertex, attributes: Attributes) -> Decision:
        if not attributes.name:
            return False, "No Object name found"
        if self._graph.related(node, vertex, attributes.namespace, attributes.name):
            return ALLOW
        return False, f"no relationship found between node '{node}' and this object"

    def _get(self, node: str, vertex: Vertex, attributes: Attributes) -> Decision:
        if attributes.verb != "get":
            return False, "can only get individual resources of this type"
        if attributes.subresource:
            return False, "cannot get subresource"
        return self._related(node, vertex, attributes)

    def _read_namespaced(self, node: str, vertex: Vertex, attributes: Attributes) -> Decision:
        if attributes.verb not in ("get", "list", "watch"):
            return False, "can only read resources of this type"
        if attributes.subresource:
            return False, "cannot read subresource"
        if not attributes.namespace:
            return False, "can only read namespaced object of this type"
        return self._related(node, vertex, attributes)

    def _claim(self, node: str, attributes: Attributes) -> Decision:
        if attributes.subresource != "status":
            return self._get(node, "pvc", attributes)
        if attributes.verb not in ("update", "patch"):
            return False, "can only get/update/patch this type"
        return self._related(node, "pvc", attributes)

    def _service_account(self, node: str, attributes: Attributes) -> Decision:
        if self._minor >= 33 and attributes.verb == "get" and not attributes.subresource:
            # KubeletServiceAccountTokenForCredentialProviders (alpha, off) would judge it by the graph
            return False, "not allowed to get service accounts"
        if attributes.verb != "create" or not attributes.name:
            return False, "can only create tokens for individual service accounts"
        if attributes.subresource != "token":
            return False, "can only create token subresource of serviceaccount"
        return self._related(node, "serviceaccount", attributes)

    def _lease(self, node: str, attributes: Attributes) -> Decision:
        verb = attributes.verb
        if verb not in ("get", "create", "update", "patch", "delete"):
            return False, "can only get, create, update, patch, or delete a node lease"
        if attributes.namespace != NODE_LEASE_NAMESPACE:
            return False, f"can only access leases in the {go_quote(NODE_LEASE_NAMESPACE)} system namespace"
        # a create names no object to the authorizer
        if verb != "create" and attributes.name != node:
            return False, "can only access node lease with the same name as the requesting node"
        return ALLOW

    def _csi_node(self, node: str, attributes: Attributes) -> Decision:
        verb = attributes.verb
        if verb not in ("get", "create", "update", "patch", "delete"):
            return False, "can only get, create, update, patch, or delete a CSINode"
        if attributes.subresource:
            return False, "cannot authorize CSINode subresources"
        if verb != "create" and attributes.name != node:
            return False, "can only access CSINode with the same name as the requesting node"
        return ALLOW

    def _resource_slice(self, node: str, attributes: Attributes) -> Decision:
        if attributes.subresource:
            return False, "cannot authorize ResourceSlice subresources"
        verb = attributes.verb
        if verb == "create":
            return ALLOW
        if verb in ("get", "update", "patch", "delete"):
            return self._related(node, "resourceslice", attributes)
        if self._minor < 31:
            if verb in ("list", "watch"):
                return ALLOW
            return False, "can only get, create, update, patch, or delete a ResourceSlice"
        if verb in ("list", "watch", "deletecollection"):
            if not self._selectors or _field_selects(attributes, "spec.nodeName", node):
                return ALLOW
            return False, "can only list/watch/deletecollection resourceslices with nodeName field selector"
        return (
            False,
            "only the following verbs are allowed for a ResourceSlice: get, watch, list, create, update, "
            "patch, delete, deletecollection",
        )

    def _node(self, node: str, attributes: Attributes) -> Decision:
        verb, sub = attributes.verb, attributes.subresource
        if not sub and verb in ("create", "update", "patch"):
            return ALLOW
        if not sub and verb in ("get", "list", "watch"):
            # by name rather than by the graph, so a kubelet can look for its Node before creating it
            if attributes.name == node:
                return ALLOW
            if not attributes.name:
                return False, f"node '{node}' cannot read all nodes, only its own Node object"
            return False, f"node '{node}' cannot read '{attributes.name}', only its own Node object"
        if sub == "status" and verb in ("update", "patch"):
            return ALLOW
        return NO_OPINION

    def _pod(self, node: str, attributes: Attributes) -> Decision:
        verb, sub = attributes.verb, attributes.subresource
        if not sub:
            if verb == "get":
                return self._get(node, "pod", attributes)
            if verb in ("list", "watch"):
                if _field_selects(attributes, "spec.nodeName", node):
                    return ALLOW
                if attributes.name:  # one pod, by a metadata.name field selector
                    return self._related(node, "pod", attributes)
                return False, "can only list/watch pods with spec.nodeName field selector"
            if verb in ("create", "delete"):  # mirror pods
                return ALLOW
        elif (sub == "status" and verb in ("update", "patch")) or (sub == "eviction" and verb == "create"):
            return ALLOW
        return NO_OPINION
