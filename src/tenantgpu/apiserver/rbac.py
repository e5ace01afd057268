"""kube-apiserver's RBAC authorizer over the stored Roles, ClusterRoles and their bindings
(`plugin/pkg/auth/authorizer/rbac`, `pkg/registry/rbac/validation`); `authorization.py` asks it after
the `system:masters` authorizer and the Node authorizer, as `--authorization-mode=Node,RBAC` does.

Rule matching follows `pkg/apis/rbac/v1/evaluation_helpers.go`: `*` matches any verb, group, resource or
URL; a resource `*/status` matches that subresource of every resource; a URL ending in `*` matches by
prefix; resourceNames limit a rule to those names. Escalation checks follow kube's `Covers`: each rule
to grant is broken down to one group, resource, verb (and name) and must be covered by one rule the
writer holds; what is not is listed as kube words it (`CompactString` of the compacted rules).

Bindings are indexed by subject and each user's rules are kept per namespace, both dropped whenever a
Role, ClusterRole or binding changes (the watch cache counts its changes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tenantgpu.apiserver.auth import SERVICE_ACCOUNT_PREFIX, Attributes, UserInfo
from tenantgpu.apiserver.fielderrors import go_quote

if TYPE_CHECKING:
    from tenantgpu.apiserver.registry import Registry
    from tenantgpu.apiserver.watchcache import ResourceCache

Obj = dict[str, Any]
GROUP = "rbac.authorization.k8s.io"


# --- rule matching ----------------------------------------------------------------------------------


class CompiledRule:
    """One PolicyRule, prepared for matching: its fields as sets."""

    __slots__ = ("groups", "names", "raw", "resources", "urls", "verbs")

    def __init__(self, rule: Obj) -> None:
        self.raw = rule
        self.verbs = frozenset(_strings(rule.get("verbs")))
        self.groups = frozenset(_strings(rule.get("apiGroups")))
        self.resources = frozenset(_strings(rule.get("resources")))
        self.names = frozenset(_strings(rule.get("resourceNames")))
        self.urls = tuple(_strings(rule.get("nonResourceURLs")))

    def allows(self, attributes: Attributes) -> bool:
        """kube's RuleAllows."""
        verbs = self.verbs
        if "*" not in verbs and attributes.verb not in verbs:
            return False
        if attributes.resource:
            groups = self.groups
            if "*" not in groups and attributes.group not in groups:
                return False
            resources = self.resources
            sub = attributes.subresource
            combined = f"{attributes.resource}/{sub}" if sub else attributes.resource
            if not ("*" in resources or combined in resources or (sub and "*/" + sub in resources)):
                return False
            return not self.names or attributes.name in self.names
        path = attributes.path
        for url in self.urls:
            if url == "*" or url == path:
                return True
            if url.endswith("*") and path.startswith(url.rstrip("*")):
                return True
        return False


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def rule_allows(rule: Obj, attributes: Attributes) -> bool:
    return CompiledRule(rule).allows(attributes)


def breakdown(rule: Obj) -> list[Obj]:
    """kube's BreakdownRule: one rule per group, resource, verb (and name), then per URL and verb."""
    verbs = _strings(rule.get("verbs"))
    names = _strings(rule.get("resourceNames"))
    parts: list[Obj] = []
    for group in _strings(rule.get("apiGroups")):
        for resource in _strings(rule.get("resources")):
            for verb in verbs:
                if names:
                    parts += [
                        {"apiGroups": [group], "resources": [resource], "verbs": [verb], "resourceNames": [n]}
                        for n in names
                    ]
                else:
                    parts.append({"apiGroups": [group], "resources": [resource], "verbs": [verb]})
    for url in _strings(rule.get("nonResourceURLs")):
        parts += [{"nonResourceURLs": [url], "verbs": [verb]} for verb in verbs]
    return parts


def _resources_cover(owner: Sequence[str], wanted: Sequence[str]) -> bool:
    if "*" in owner or all(r in owner for r in wanted):
        return True
    for path in wanted:
        if path in owner:
            continue
        if "/" not in path:
            return False
        if "*/" + path.split("/", 1)[1] not in owner:
            return False
    return True


def _url_covers(owner: str, path: str) -> bool:
    return owner == path or (owner.endswith("*") and path.startswith(owner.rstrip("*")))


def rule_covers(owner: Obj, sub: Obj) -> bool:
    """kube's ruleCovers: whether `owner` covers `sub`, which has at most one of each field's values."""
    owner_verbs = _strings(owner.get("verbs"))
    owner_groups = _strings(owner.get("apiGroups"))
    owner_names = _strings(owner.get("resourceNames"))
    sub_names = _strings(sub.get("resourceNames"))
    if not ("*" in owner_verbs or all(v in owner_verbs for v in _strings(sub.get("verbs")))):
        return False
    if not ("*" in owner_groups or all(g in owner_groups for g in _strings(sub.get("apiGroups")))):
        return False
    if not _resources_cover(_strings(owner.get("resources")), _strings(sub.get("resources"))):
        return False
    owner_urls = _strings(owner.get("nonResourceURLs"))
    if not all(any(_url_covers(o, p) for o in owner_urls) for p in _strings(sub.get("nonResourceURLs"))):
        return False
    if not sub_names:
        return not owner_names
    return not owner_names or all(n in owner_names for n in sub_names)


def covers(owner_rules: Sequence[Obj], rules: Iterable[Obj]) -> tuple[bool, list[Obj]]:
    """kube's Covers: whether `owner_rules` cover `rules`, and the broken-down rules they do not."""
    missing = [
        sub for rule in rules for sub in breakdown(rule) if not any(rule_covers(o, sub) for o in owner_rules)
    ]
    return not missing, missing


def compact_rules(rules: Sequence[Obj]) -> list[Obj]:
    """kube's CompactRules: rules of one group, one resource and at most one name merge their verbs."""
    compacted: list[Obj] = []
    simple: dict[tuple[str, str, bool, str], Obj] = {}
    for rule in rules:
        groups, resources = _strings(rule.get("apiGroups")), _strings(rule.get("resources"))
        names = _strings(rule.get("resourceNames"))
        if (
            len(names) > 1
            or rule.get("nonResourceURLs")
            or len(groups) != 1
            or len(resources) != 1
            or set(rule) - {"apiGroups", "resources", "verbs", "resourceNames"}
        ):
            compacted.append(rule)
            continue
        key = (groups[0], resources[0], bool(names), names[0] if names else "")
        held = simple.get(key)
        if held is None:
            simple[key] = {**rule, "verbs": list(_strings(rule.get("verbs")))}
        else:
            held["verbs"] += _strings(rule.get("verbs"))
    return compacted + list(simple.values())


def go_quote_list(values: Iterable[str]) -> str:
    """Go's %q of a []string: `["a" "b"]`."""
    return "[" + " ".join(go_quote(v) for v in values) + "]"


def compact_string(rule: Obj) -> str:
    """kube's CompactString of a rule: `{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`."""
    parts = []
    for key, label in (
        ("apiGroups", "APIGroups"),
        ("resources", "Resources"),
        ("nonResourceURLs", "NonResourceURLs"),
        ("resourceNames", "ResourceNames"),
        ("verbs", "Verbs"),
    ):
        values = _strings(rule.get(key))
        if values:
            parts.append(f"{label}:{go_quote_list(values)}")
    return "{" + ", ".join(parts) + "}"


# --- bindings and the rules they give ---------------------------------------------------------------


def _subject_user(subject: Any, namespace: str) -> tuple[str, str] | None:
    """The index key a binding's subject applies to: ("u", user), ("g", group), or None for a subject
    that applies to no one (kube's appliesToUser)."""
    if not isinstance(subject, dict):
        return None
    kind, name = subject.get("kind"), subject.get("name")
    if not isinstance(name, str):
        return None
    if kind == "User":
        return ("u", name)
    if kind == "Group":
        return ("g", name)
    if kind == "ServiceAccount":
        account_namespace = subject.get("namespace") or namespace
        if not account_namespace:
            return None
        return ("u", f"{SERVICE_ACCOUNT_PREFIX}{account_namespace}:{name}")
    return None


def _describe_subject(subject: Obj, namespace: str) -> str:
    kind, name = subject.get("kind", ""), subject.get("name", "")
    if kind == "ServiceAccount":
        return f"{kind} {go_quote(name + '/' + (subject.get('namespace') or namespace))}"
    return f"{kind} {go_quote(name)}"


@dataclass(frozen=True, slots=True)
class Source:
    """The binding and subject a rule came to a user through (kube's role binding describers)."""

    binding: Obj
    subject: Obj

    def __str__(self) -> str:
        meta = self.binding.get("metadata") or {}
        ref = self.binding.get("roleRef") or {}
        namespace = meta.get("namespace") or ""
        if namespace:
            kind, name = "RoleBinding", f"{meta.get('name', '')}/{namespace}"
        else:
            kind, name = "ClusterRoleBinding", meta.get("name", "")
        return (
            f"{kind} {go_quote(name)} of {ref.get('kind', '')} {go_quote(ref.get('name', ''))} "
            f"to {_describe_subject(self.subject, namespace)}"
        )


@dataclass(frozen=True, slots=True)
class Grant:
    rule: CompiledRule
    source: Source


class _BindingIndex:
    """The bindings of one RBAC state, by the users and groups their subjects name."""

    def __init__(self, cluster: Iterable[Obj], namespaced: Iterable[Obj]) -> None:
        self.cluster: dict[tuple[str, str], list[Obj]] = {}
        self.namespaced: dict[str, dict[tuple[str, str], list[Obj]]] = {}
        for binding in sorted(cluster, key=lambda b: b["metadata"]["name"]):
            for key in self._keys(binding, ""):
                self.cluster.setdefault(key, []).append(binding)
        for binding in sorted(namespaced, key=lambda b: b["metadata"]["name"]):
            namespace = binding["metadata"].get("namespace") or ""
            index = self.namespaced.setdefault(namespace, {})
            for key in self._keys(binding, namespace):
                index.setdefault(key, []).append(binding)

    @staticmethod
    def _keys(binding: Obj, namespace: str) -> set[tuple[str, str]]:
        subjects = binding.get("subjects") or []
        return {k for s in subjects if (k := _subject_user(s, namespace)) is not None}

    def bindings(self, index: dict[tuple[str, str], list[Obj]], user: UserInfo) -> list[Obj]:
        found: dict[int, Obj] = {}
        for key in (("u", user.name), *(("g", g) for g in user.groups)):
            for binding in index.get(key, ()):
                found.setdefault(id(binding), binding)
        return sorted(found.values(), key=lambda b: b["metadata"]["name"])


def _applies(user: UserInfo, binding: Obj, namespace: str) -> Obj | None:
    """The binding's first subject that is `user` (kube's appliesTo)."""
    for subject in binding.get("subjects") or []:
        key = _subject_user(subject, namespace)
        if key is None:
            continue
        if (key[0] == "u" and key[1] == user.name) or (key[0] == "g" and key[1] in user.groups):
            return subject
    return None


class RBACAuthorizer:
    """kube's RBAC authorizer: what the stored Roles, ClusterRoles and bindings grant. `attach(registry)`
    gives it the stored objects; until then nothing is granted. The chain it is part of is
    `authorization.py`'s."""

    def __init__(self) -> None:
        self._registry: Registry | None = None
        self._caches: tuple[ResourceCache, ...] = ()
        self._version = -1
        self._index: _BindingIndex | None = None
        self._compiled: dict[int, tuple[CompiledRule, ...]] = {}
        self._grants: dict[tuple[str, tuple[str, ...], str], tuple[list[Grant], list[str]]] = {}

    def attach(self, registry: Registry) -> None:
        """Decide by `registry`'s RBAC objects (its caches are read once it has loaded)."""
        self._registry = registry
        self._caches = ()
        self._version = -1

    # --- decisions ----------------------------------------------------------------------------

    def allows(self, user: UserInfo, attributes: Attributes) -> bool:
        """The decision alone: every request asks it, and only an answer that shows the reason (a
        refusal, a SubjectAccessReview) needs the binding described."""
        return any(grant.rule.allows(attributes) for grant in self._resolve(user, attributes.namespace)[0])

    def authorize(self, user: UserInfo, attributes: Attributes) -> tuple[bool, str]:
        """The decision and kube's reason: `RBAC: allowed by …` naming the binding that allowed it, or for
        a denial the errors met on the way (a binding to a role that does not exist), else ""."""
        grants, problems = self._resolve(user, attributes.namespace)
        for grant in grants:
            if grant.rule.allows(attributes):
                return True, f"RBAC: allowed by {grant.source}"
        return False, f"RBAC: {aggregate_message(problems)}" if problems else ""

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Obj], list[str]]:
        """The RBAC rules `user` holds in `namespace` (cluster-wide ones first) and the errors met
        resolving them (kube's RulesFor)."""
        grants, problems = self._resolve(user, namespace)
        return [g.rule.raw for g in grants], problems

    # --- resolution ---------------------------------------------------------------------------

    def _current(self) -> _BindingIndex:
        if not self._caches and self._registry is not None:
            kinds = self._registry.kinds
            found = [
                kinds.resource(GROUP, "v1", plural)
                for plural in ("clusterroles", "clusterrolebindings", "roles", "rolebindings")
            ]
            try:
                self._caches = tuple(self._registry.cache(k) for k in found if k is not None)
            except KeyError:  # not loaded yet: nothing is granted
                self._caches = ()
        version = 0
        for cache in self._caches:  # a loop, not sum() over a generator: this runs on every request
            version += cache.changes
        if version != self._version or self._index is None:
            self._version = version
            self._grants.clear()
            self._compiled.clear()
            self._index = _BindingIndex(self._objects(1), self._objects(3))
        return self._index

    def _objects(self, position: int) -> list[Obj]:
        if len(self._caches) <= position:
            return []
        return [e.obj for e in self._caches[position].objects.values()]

    def _resolve(self, user: UserInfo, namespace: str) -> tuple[list[Grant], list[str]]:
        index = self._current()
        key = (user.name, user.groups, namespace)
        held = self._grants.get(key)
        if held is not None:
            return held
        grants: list[Grant] = []
        problems: list[str] = []
        scopes = [("", index.cluster)]
        if namespace:
            scopes.append((namespace, index.namespaced.get(namespace, {})))
        for scope, bindings in scopes:
            for binding in index.bindings(bindings, user):
                subject = _applies(user, binding, scope)
                if subject is None:
                    continue
                rules, problem = self._role_rules(binding.get("roleRef") or {}, scope)
                if problem:
                    problems.append(problem)
                    continue
                source = Source(binding, subject)
                grants += [Grant(rule, source) for rule in rules]
        if len(self._grants) > 4096:
            self._grants.clear()
        self._grants[key] = (grants, problems)
        return grants, problems

    def role_rules(self, ref: Obj, namespace: str) -> tuple[list[Obj], str]:
        """The rules of the role a roleRef names (kube's GetRoleReferenceRules), or why there are none."""
        self._current()
        rules, problem = self._role_rules(ref, namespace)
        return [r.raw for r in rules], problem

    def _role_rules(self, ref: Obj, namespace: str) -> tuple[tuple[CompiledRule, ...], str]:
        kind, name = ref.get("kind"), str(ref.get("name") or "")
        if kind == "ClusterRole":
            role = self._find(0, name)
            missing = f'clusterrole.rbac.authorization.k8s.io "{name}" not found'
        elif kind == "Role":
            role = self._find(2, f"{namespace}/{name}")
            missing = f'role.rbac.authorization.k8s.io "{name}" not found'
        else:
            return (), f"unsupported role reference kind: {go_quote(str(kind or ''))}"
        if role is None:
            return (), missing
        compiled = self._compiled.get(id(role))
        if compiled is None:
            rules = role.get("rules")
            compiled = (
                tuple(CompiledRule(r) for r in rules if isinstance(r, dict))
                if isinstance(rules, list)
                else ()
            )
            self._compiled[id(role)] = compiled
        return compiled, ""

    def _find(self, position: int, key: str) -> Obj | None:
        if len(self._caches) <= position:
            return None
        entry = self._caches[position].objects.get(key)
        return None if entry is None else entry.obj


def rule_infos(rules: Iterable[Obj]) -> tuple[list[Obj], list[Obj]]:
    """Rules as a SelfSubjectRulesReview lists them (kube's RBAC RulesFor): the resource rules, then the
    non-resource ones, each with only the fields it sets."""
    resource_rules: list[Obj] = []
    non_resource_rules: list[Obj] = []
    for rule in rules:
        verbs = _strings(rule.get("verbs"))
        if rule.get("resources"):
            entry: Obj = {"verbs": verbs}
            for key in ("apiGroups", "resources", "resourceNames"):
                if rule.get(key):
                    entry[key] = _strings(rule.get(key))
            resource_rules.append(entry)
        if rule.get("nonResourceURLs"):
            non_resource_rules.append({"verbs": verbs, "nonResourceURLs": _strings(rule["nonResourceURLs"])})
    return resource_rules, non_resource_rules


def aggregate_message(messages: Sequence[str]) -> str:
    """kube's utilerrors aggregate: one message alone, several (without repeats) in brackets."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def escalation_message(user: UserInfo, missing: Sequence[Obj], problems: Sequence[str] = ()) -> str:
    """kube's ConfirmNoEscalation message for the rules a writer does not hold."""
    described = sorted({compact_string(r) for r in compact_rules(missing)})
    text = (
        f"user {go_quote(user.name)} (groups={go_quote_list(user.groups)}) is attempting to grant RBAC "
        "permissions not currently held:\n" + "\n".join(described)
    )
    if problems:
        text += f"; resolution errors: [{aggregate_message(problems)}]"
    return text
