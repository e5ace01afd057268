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


def _configuration(name: str, *webhooks: tuple[str, dict]) -> dict:  # type: ignore[type-arg]
    return {"metadata": {"name": name}, "webhooks": [{"name": n, "rules": [r]} for n, r in webhooks]}


def test_webhooks_are_called_in_configuration_name_order_and_follow_replaced_configurations() -> None:
    import asyncio

    from tenantgpu.apiserver.webhooks import WebhookAdmission

    nodes_rule = {**RULE, "resources": ["nodes"], "operations": ["*"]}
    stored = {
        True: [
            _configuration("b-second", ("b1.example.com", RULE), ("b2.example.com", nodes_rule)),
            _configuration("a-first", ("a1.example.com", RULE)),
        ]
    }
    called: list[str] = []
    admission = WebhookAdmission(lambda mutating: stored.get(mutating, []), lambda ns: None, None)  # type: ignore[arg-type]

    async def record(webhook, attributes, mutating):  # type: ignore[no-untyped-def]
        called.append(webhook["name"])

    admission._call = record  # type: ignore[method-assign]

    def run(attributes: AdmissionAttributes) -> list[str]:
        called.clear()
        asyncio.run(admission.run(attributes, True))
        return list(called)

    assert run(_attributes()) == ["a1.example.com", "b1.example.com"]
    assert run(_attributes(NODE, "UPDATE")) == ["b2.example.com"]
    assert run(_attributes(operation="UPDATE")) == []
    assert run(_attributes()) == ["a1.example.com", "b1.example.com"]  # asked again: the same answer
    # An update stores a new object: its rules count from the next request on.
    stored[True] = [_configuration("a-first", ("a1.example.com", {**RULE, "operations": ["UPDATE"]}))]
    assert run(_attributes()) == []
    assert run(_attributes(operation="UPDATE")) == ["a1.example.com"]
    assert run(_attributes(NODE, "UPDATE")) == []
