"""kube-apiserver's authorization as Kamaji's tenant API servers run it, `--authorization-mode=Node,RBAC`:
kube's union of the `system:masters` authorizer, the Node authorizer (`nodeauthorizer.py`) and RBAC
(`rbac.py`), asked in that order (`staging/src/k8s.io/apiserver/pkg/authorization/union/union.go`).

The first to allow decides, with its reason; when none does, the request is refused with the reasons
they gave, each on its own line, which the Forbidden message and an access review's `status.reason`
carry. The hot path pays for nothing it does not need: a master is answered first, a node's own
requests (a pod's status, an event, its lease) are the Node authorizer's without its graph, and RBAC is
asked only when the node authorizer does not allow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenantgpu.apiserver.auth import MASTERS, NODES, Attributes, UserInfo
from tenantgpu.apiserver.fieldversions import LATEST
from tenantgpu.apiserver.nodeauthorizer import NodeAuthorizer, node_identity
from tenantgpu.apiserver.nodegraph import NodeGraph
from tenantgpu.apiserver.rbac import RBACAuthorizer, aggregate_message, rule_infos

if TYPE_CHECKING:
    from tenantgpu.apiserver.registry import Registry

Obj = dict[str, Any]
NODE_RULES_UNRESOLVED = "node authorizer does not support user rule resolution"


class Authorizer:
    """One tenant's authorization chain. `attach(registry)` gives it the stored RBAC objects, the watch
    caches the node graph reads and the tenant's release; until then only masters are allowed."""

    def __init__(self) -> None:
        self.rbac = RBACAuthorizer()
        self._graph = NodeGraph()
        self.node = NodeAuthorizer(self._graph, LATEST)

    def attach(self, registry: Registry) -> None:
        self.rbac.attach(registry)
        self._graph.attach(registry)
        self.node = NodeAuthorizer(self._graph, registry.minor)

    def allowed(self, user: UserInfo, attributes: Attributes) -> bool:
        groups = user.groups
        if MASTERS in groups:
            return True
        if NODES in groups and self.node.authorize(user, attributes)[0]:
            return True
        return self.rbac.allows(user, attributes)

    def authorize(self, user: UserInfo, attributes: Attributes) -> tuple[bool, str]:
        """The decision and its reason: the allowing authorizer's (`RBAC: allowed by …`; none from the
        others), or for a refusal every reason given, joined by newlines as kube's union joins them."""
        if MASTERS in user.groups:
            return True, ""
        reasons = []
        if NODES in user.groups:
            allowed, reason = self.node.authorize(user, attributes)
            if allowed:
                return True, reason
            if reason:
                reasons.append(reason)
        allowed, reason = self.rbac.authorize(user, attributes)
        if allowed:
            return True, reason
        if reason:
            reasons.append(reason)
        return False, "\n".join(reasons)

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Obj], list[str]]:
        """RBAC's rules for `user`, which escalation checks compare with (kube asks RBAC's resolver)."""
        return self.rbac.rules_for(user, namespace)

    def role_rules(self, ref: Obj, namespace: str) -> tuple[list[Obj], str]:
        return self.rbac.role_rules(ref, namespace)

    def rules(self, user: UserInfo, namespace: str) -> Obj:
        """The status of a SelfSubjectRulesReview (`kubectl auth can-i --list`), as kube's union of rule
        resolvers answers it: the Node authorizer cannot list a node's rules, so for a node the answer is
        incomplete, with that error before RBAC's; the rules are RBAC's."""
        rules, problems = self.rbac.rules_for(user, namespace)
        resource_rules, non_resource_rules = rule_infos(rules)
        status: Obj = {
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules,
            "incomplete": False,
        }
        errors = list(problems)
        if node_identity(user) is not None:
            status["incomplete"] = True
            errors.insert(0, NODE_RULES_UNRESOLVED)
        if errors:
            status["evaluationError"] = aggregate_message(errors)
        return status
