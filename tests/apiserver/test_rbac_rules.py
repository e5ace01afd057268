"""RBAC's rule matching and the escalation check's coverage and message, as kube words them."""

from __future__ import annotations

from tenantgpu.apiserver.auth import Attributes, UserInfo
from tenantgpu.apiserver.rbac import compact_rules, compact_string, covers, escalation_message, rule_allows


def _rule(groups: list[str], resources: list[str], verbs: list[str], names: list[str] | None = None) -> dict:
    rule = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        rule["resourceNames"] = names
    return rule


def test_a_rule_matches_its_verbs_groups_resources_and_names() -> None:
    rule = _rule(["", "apps"], ["pods", "deployments"], ["get", "list"], ["web"])
    assert rule_allows(rule, Attributes("get", "apps", "deployments", name="web"))
    assert not rule_allows(rule, Attributes("get", "apps", "deployments", name="db"))
    assert not rule_allows(rule, Attributes("delete", "", "pods", name="web"))
    assert not rule_allows(rule, Attributes("get", "batch", "pods", name="web"))
    # a list names no object, so a rule limited to names does not allow it
    assert not rule_allows(rule, Attributes("list", "", "pods"))
    assert rule_allows(
        _rule(["*"], ["*"], ["*"]), Attributes("escalate", "rbac.authorization.k8s.io", "roles")
    )


def test_subresources_match_by_their_full_name_or_star_slash() -> None:
    status = Attributes("update", "", "pods", "status", "default", "web")
    assert rule_allows(_rule([""], ["pods/status"], ["update"]), status)
    assert rule_allows(_rule([""], ["*/status"], ["update"]), status)
    # the resource alone does not reach its subresources, nor `pods/*` (kube has no such wildcard)
    assert not rule_allows(_rule([""], ["pods"], ["update"]), status)
    assert not rule_allows(_rule([""], ["pods/*"], ["update"]), status)
    assert not rule_allows(_rule([""], ["*/status"], ["update"]), Attributes("update", "", "pods"))


def test_non_resource_urls_match_exactly_or_by_a_trailing_star() -> None:
    rule = {"nonResourceURLs": ["/healthz", "/readyz/*", "/api*"], "verbs": ["get"]}
    assert rule_allows(rule, Attributes("get", path="/healthz"))
    assert not rule_allows(rule, Attributes("get", path="/healthz/etcd"))
    assert rule_allows(rule, Attributes("get", path="/readyz/etcd"))
    assert not rule_allows(rule, Attributes("get", path="/readyz"))
    assert rule_allows(rule, Attributes("get", path="/apis/apps/v1"))
    assert not rule_allows(rule, Attributes("post", path="/healthz"))
    # a resource rule never matches a path, a path rule never a resource
    assert not rule_allows(_rule(["*"], ["*"], ["*"]), Attributes("get", path="/metrics"))
    assert not rule_allows(rule, Attributes("get", "", "pods"))


def test_coverage_breaks_rules_down_and_knows_wildcards() -> None:
    owner = [
        _rule([""], ["pods", "pods/log"], ["get", "list", "watch"]),
        _rule(["apps"], ["*"], ["*"]),
        _rule([""], ["*/status"], ["get"]),
        _rule([""], ["secrets"], ["get"], ["mine"]),
        {"nonResourceURLs": ["/logs/*"], "verbs": ["get"]},
    ]
    assert covers(
        owner, [_rule([""], ["pods"], ["get", "watch"]), _rule(["apps"], ["deployments"], ["delete"])]
    )
    assert covers(owner, [_rule([""], ["services/status"], ["get"])])
    assert covers(owner, [_rule([""], ["secrets"], ["get"], ["mine"])])
    assert covers(owner, [{"nonResourceURLs": ["/logs/kubelet"], "verbs": ["get"]}])
    held, missing = covers(owner, [_rule(["", "batch"], ["pods", "jobs"], ["get", "delete"])])
    assert not held
    assert missing == [
        _rule([""], ["pods"], ["delete"]),
        _rule([""], ["jobs"], ["get"]),
        _rule([""], ["jobs"], ["delete"]),
        _rule(["batch"], ["pods"], ["get"]),
        _rule(["batch"], ["pods"], ["delete"]),
        _rule(["batch"], ["jobs"], ["get"]),
        _rule(["batch"], ["jobs"], ["delete"]),
    ]
    # a rule for some names does not cover every name
    assert not covers(owner, [_rule([""], ["secrets"], ["get"])])[0]


def test_the_escalation_message_lists_compacted_missing_rules_sorted() -> None:
    missing = covers(
        [], [_rule([""], ["secrets"], ["get", "list"]), {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    )[1]
    assert compact_rules(missing)[-1] == _rule([""], ["secrets"], ["get", "list"])
    assert compact_string(_rule(["*"], ["*"], ["*"], ["a b"])) == (
        '{APIGroups:["*"], Resources:["*"], ResourceNames:["a b"], Verbs:["*"]}'
    )
    user = UserInfo("alice", ("devs", "system:authenticated"))
    assert escalation_message(user, missing) == (
        'user "alice" (groups=["devs" "system:authenticated"]) is attempting to grant RBAC permissions not'
        ' currently held:\n{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}\n'
        '{NonResourceURLs:["/metrics"], Verbs:["get"]}'
    )
    with_errors = escalation_message(
        user, missing, ['clusterrole.rbac.authorization.k8s.io "gone" not found']
    )
    assert with_errors.endswith(
        '; resolution errors: [clusterrole.rbac.authorization.k8s.io "gone" not found]'
    )
