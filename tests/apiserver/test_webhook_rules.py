"""Which requests a webhook rule covers (operations, groups, versions, resources, subresources, scope)."""

from __future__ import annotations

from tenantgpu.apiserver.admission import AdmissionAttributes
from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.kinds import NODE, POD
from tenantgpu.apiserver.webhooks import rule_matches


def _attributes(kind=POD, operation: str = "CREATE", subresource: str = "") -> AdmissionAttributes:  # type: ignore[no-untyped-def]
    return AdmissionAttributes(
        operation, kind, "default", "p", {}, None, UserInfo("u"), subresource=subresource
    )


RULE = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}


def test_resource_and_operation() -> None:
    assert rule_matches(RULE, _attributes())
    assert not rule_matches(RULE, _attributes(operation="UPDATE"))
    assert not rule_matches(RULE, _attributes(NODE))
    assert not rule_matches({**RULE, "apiGroups": ["apps"]}, _attributes())


def test_subresources_need_their_own_pattern() -> None:
    assert not rule_matches(RULE, _attributes(subresource="status"))
    assert rule_matches({**RULE, "resources": ["pods/status"]}, _attributes(subresource="status"))
    assert rule_matches({**RULE, "resources": ["pods/*"]}, _attributes(subresource="binding"))
    assert rule_matches({**RULE, "resources": ["*/*"]}, _attributes(subresource="status"))
    assert not rule_matches({**RULE, "resources": ["*"]}, _attributes(subresource="status"))


def test_scope() -> None:
    everything = {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}
    assert rule_matches({**everything, "scope": "Namespaced"}, _attributes())
    assert not rule_matches({**everything, "scope": "Cluster"}, _attributes())
    assert rule_matches({**everything, "scope": "Cluster"}, _attributes(NODE))
