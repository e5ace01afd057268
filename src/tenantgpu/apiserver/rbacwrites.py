"""Escalation prevention on writes of RBAC objects: kube's policy-based storage of Roles, ClusterRoles,
RoleBindings and ClusterRoleBindings (`pkg/registry/rbac/*/policybased`, `escalation_check.go`).

A writer in `system:masters` may write anything. Otherwise a Role or ClusterRole is written only by one
allowed to `escalate` it or holding every rule it grants (in the request's namespace; cluster-wide for a
ClusterRole); an aggregation rule, which can gather anything, takes `*` on everything. A binding is
written only by one allowed to `bind` the role it references or holding all of that role's rules. An
update that changes only what the garbage collector changes (owner references, finalizers) is not
checked. As in kube, the check comes before admission and validation.
"""

from __future__ import annotations

from typing import Any

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.admission import AdmissionAttributes
from tenantgpu.apiserver.auth import MASTERS, Attributes
from tenantgpu.apiserver.authorization import Authorizer
from tenantgpu.apiserver.kinds import Kind
from tenantgpu.apiserver.rbac import GROUP, covers, escalation_message

Obj = dict[str, Any]

FULL_AUTHORITY = (
    {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
    {"verbs": ["*"], "nonResourceURLs": ["*"]},
)
_GC_FIELDS = frozenset({"ownerReferences", "finalizers", "managedFields", "selfLink", "resourceVersion"})


def _only_gc_fields(obj: Obj, old: Obj | None) -> bool:
    """kube's IsOnlyMutatingGCFields: the update changes nothing but owner references and finalizers."""
    if old is None:
        return False

    def rest(o: Obj) -> Obj:
        meta = {k: v for k, v in (o.get("metadata") or {}).items() if k not in _GC_FIELDS}
        return {**o, "metadata": meta}

    return rest(obj) == rest(old)


def _has_aggregation(role: Obj | None) -> bool:
    rule = (role or {}).get("aggregationRule")
    return isinstance(rule, dict) and bool(rule.get("clusterRoleSelectors"))


class RBACEscalation:
    """The first step of a write's admission chain (it is kube's storage, not a plugin of its own)."""

    name = "RBACEscalation"
    mutating = True

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    @staticmethod
    def handles(operation: str, kind: Kind, subresource: str) -> bool:
        return kind.group == GROUP and operation in ("CREATE", "UPDATE") and not subresource

    async def admit(self, attributes: AdmissionAttributes) -> None:
        kind = attributes.kind
        if not self.handles(attributes.operation, kind, attributes.subresource):
            return
        user = attributes.user
        obj = attributes.obj or {}
        if MASTERS in user.groups:  # EscalationAllowed
            return
        if attributes.operation == "UPDATE" and _only_gc_fields(obj, attributes.old):
            return
        if kind.kind in ("Role", "ClusterRole"):
            self._check_role(attributes, obj)
        elif kind.kind in ("RoleBinding", "ClusterRoleBinding"):
            self._check_binding(attributes, obj)

    def _check_role(self, attributes: AdmissionAttributes, role: Obj) -> None:
        kind, user, name = attributes.kind, attributes.user, attributes.name
        namespace = attributes.namespace if kind.namespaced else ""
        escalate = Attributes("escalate", GROUP, kind.plural, "", namespace, name)
        if self.authorizer.allowed(user, escalate):  # RoleEscalationAuthorized
            return
        rules = role.get("rules")
        owner, problems = self.authorizer.rules_for(user, namespace)
        held, missing = covers(owner, rules if isinstance(rules, list) else [])
        if not held:
            raise errors.forbidden(kind.plural, name, GROUP, escalation_message(user, missing, problems))
        aggregates = _has_aggregation(role) or _has_aggregation(attributes.old)
        if kind.kind == "ClusterRole" and aggregates and not covers(owner, FULL_AUTHORITY)[0]:
            raise errors.forbidden(
                kind.plural, name, GROUP, "must have cluster-admin privileges to use the aggregationRule"
            )

    def _check_binding(self, attributes: AdmissionAttributes, binding: Obj) -> None:
        kind, user, name = attributes.kind, attributes.user, attributes.name
        namespace = attributes.namespace if kind.namespaced else ""
        ref = binding.get("roleRef")
        ref = ref if isinstance(ref, dict) else {}
        ref_kind = ref.get("kind")
        if ref_kind in ("ClusterRole", "Role"):  # BindingAuthorized
            bind = Attributes(
                "bind",
                str(ref.get("apiGroup") or ""),
                "clusterroles" if ref_kind == "ClusterRole" else "roles",
                "",
                namespace,
                str(ref.get("name") or ""),
            )
            if self.authorizer.allowed(user, bind):
                return
        rules, problem = self.authorizer.role_rules(ref, namespace)
        if problem:
            if ref_kind in ("ClusterRole", "Role"):  # the role's lister answers NotFound
                singular = "clusterrole" if ref_kind == "ClusterRole" else "role"
                raise errors.APIError(
                    404,
                    "NotFound",
                    problem,
                    {"name": str(ref.get("name") or ""), "group": GROUP, "kind": singular},
                )
            raise errors.internal(problem)
        owner, problems = self.authorizer.rules_for(user, namespace)
        held, missing = covers(owner, rules)
        if not held:
            raise errors.forbidden(kind.plural, name, GROUP, escalation_message(user, missing, problems))
