"""The admission chain asks each plugin once per kind of write whether it handles it (kube's
`admission.Interface.Handles`) and then calls only the plugins that do, in the chain's order."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenantgpu.apiserver.admission import AdmissionAttributes, AdmissionChain
from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.kinds import Kind
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore

ADMIN = UserInfo("admin", ("system:masters",))


class _Recorder:
    def __init__(self, name: str, mutating: bool, calls: list[str], only: str | None = None) -> None:
        self.name, self.mutating, self._calls = name, mutating, calls
        if only is not None:
            self.handles = lambda operation, kind, subresource: kind.plural == only and not subresource

    async def admit(self, attributes: AdmissionAttributes) -> None:
        self._calls.append(self.name)


@pytest.fixture
def kinds(tmp_path: Path) -> dict[str, Kind]:
    store = SQLiteDatastore(tmp_path / "s.db")
    server = APIServer(APIServerConfig(name="t", datastore=store, pki=ServerPKI.create("t")))
    found = {plural: server.kinds.resource("", "v1", plural) for plural in ("pods", "events")}
    store.close()
    return {plural: kind for plural, kind in found.items() if kind is not None}


def _attributes(kind: Kind, operation: str = "CREATE", subresource: str = "") -> AdmissionAttributes:
    return AdmissionAttributes(operation, kind, "default", "x", {"metadata": {}}, None, ADMIN, subresource)


async def test_a_plugin_is_called_only_for_the_writes_it_handles(kinds: dict[str, Kind]) -> None:
    calls: list[str] = []
    chain = AdmissionChain(
        [
            _Recorder("pods-only", True, calls, only="pods"),
            _Recorder("every-write", True, calls),
            _Recorder("events-only", False, calls, only="events"),
            _Recorder("every-write-validating", False, calls),
        ]
    )
    for _ in range(2):  # the second time from what the chain picked the first time
        calls.clear()
        await chain.mutate(_attributes(kinds["pods"]))
        await chain.validate(_attributes(kinds["pods"]))
        assert calls == ["pods-only", "every-write", "every-write-validating"]
    calls.clear()
    await chain.mutate(_attributes(kinds["events"]))
    await chain.validate(_attributes(kinds["events"]))
    assert calls == ["every-write", "events-only", "every-write-validating"]
    calls.clear()
    await chain.mutate(_attributes(kinds["pods"], "UPDATE", "status"))
    assert calls == ["every-write"]


async def test_plugins_added_or_taken_out_later_count_for_writes_already_seen(kinds: dict[str, Kind]) -> None:
    calls: list[str] = []
    chain = AdmissionChain([_Recorder("first", False, calls)])
    await chain.validate(_attributes(kinds["events"]))
    chain.append(_Recorder("quota", False, calls, only="events"))
    await chain.validate(_attributes(kinds["events"]))
    assert calls == ["first", "first", "quota"]
    chain.plugins = [p for p in chain.plugins if p.name != "first"]  # taken out again
    calls.clear()
    await chain.validate(_attributes(kinds["events"]))
    assert calls == ["quota"]


async def test_the_servers_plugins_see_a_pods_create_but_few_see_its_patches(tmp_path: Path) -> None:
    store = SQLiteDatastore(tmp_path / "s.db")
    server = APIServer(
        APIServerConfig(name="t", datastore=store, pki=ServerPKI.create("t"), service_account_admission=True)
    )
    pods = server.kinds.resource("", "v1", "pods")
    assert pods is not None
    try:
        mutating, validating = server.admission._phases(_attributes(pods))
        on_create = {p.name for p in mutating + validating}
        # kube's plugins for a pod's create, each in its phase
        for name in ("NamespaceLifecycle", "LimitRanger", "ServiceAccount", "Priority", "RuntimeClass"):
            assert name in on_create
        assert "ResourceQuota" in {p.name for p in validating}
        mutating, validating = server.admission._phases(_attributes(pods, "UPDATE"))
        on_patch = {p.name for p in mutating + validating}
        # only the webhooks look at a pod's update here (no resize, no ephemeral containers)
        assert on_patch == {"MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"}
    finally:
        store.close()
