"""A TenantControlPlane on another SQLite DataStore is served by a control-plane process of its own: its data
lands in that store's file, its certificates and those of the tenants beside the lab's process get 401 from
each other (not a TLS failure), deleting it purges that file, and the process ends with the plane."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from tenantgpu.childprocess import ChildError, ChildProcess
from tenantgpu.kamaji import model
from tenantgpu.kamaji.datastorehosts import DataStoreHosts, sqlite_path
from tenantgpu.kamaji.host import CLEANUP_PRIOR_MIGRATION, ControlPlaneInstance, TenantData
from tenantgpu.kamaji.hostprocess import lock_store
from tenantgpu.kamaji.pki import KeyPair
from tenantgpu.kamaji.plane import ManagementPlane
from tenantgpu.kubeclient import ApiError

Obj = dict[str, Any]


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[ManagementPlane]:
    p = ManagementPlane(
        tmp_path / "datastore.sqlite",
        tmp_path / "pki",
        tmp_path / "management.kubeconfig",
        datastore_processes=True,
    )
    await p.start()
    await p.client.create(model.DATASTORES, model.datastore(endpoint=f"sqlite://{tmp_path}/datastore.sqlite"))
    await p.client.create(
        model.DATASTORES, model.datastore("second", endpoint=f"sqlite://{tmp_path}/stores/second.sqlite")
    )
    yield p
    await p.stop()


async def _ready(plane: ManagementPlane, name: str, datastore: str) -> Obj:
    await plane.client.create(
        model.TENANT_CONTROL_PLANES,
        model.tenant_control_plane(name, version="v1.31.4", datastore=datastore),
    )
    async with asyncio.timeout(20):
        while True:
            tcp = await plane.client.get(model.TENANT_CONTROL_PLANES, name, "default")
            if model.version_status(tcp) == "Ready":
                return tcp
            await asyncio.sleep(0.02)


async def _admin(plane: ManagementPlane, name: str) -> Obj:
    secret = await plane.client.get(model.SECRETS, f"{name}-admin-kubeconfig", "default")
    config: Obj = yaml.safe_load(base64.b64decode(secret["data"]["admin.conf"]))
    return config


def _core(config: Obj) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config_dict(config))


def _keys(store: Path, fragment: str) -> list[str]:
    with sqlite3.connect(store) as db:
        return [row[0] for row in db.execute("SELECT key FROM kv WHERE key LIKE ?", (f"%{fragment}%",))]


def _namespace(name: str) -> kubernetes.client.V1Namespace:
    return kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=name))


async def test_a_tenant_on_another_datastore_is_stored_and_served_by_a_process_of_its_own(
    plane: ManagementPlane, tmp_path: Path
) -> None:
    home = await _ready(plane, "home", "default")
    away = await _ready(plane, "away", "second")
    assert home["status"]["storage"]["dataStoreName"] == "default"
    assert away["status"]["storage"]["dataStoreName"] == "second"
    assert isinstance(plane.host, DataStoreHosts)
    (served_by,) = plane.host.pids
    assert served_by != os.getpid() and Path(f"/proc/{served_by}").exists()

    # The official client works against both, and each tenant's objects land in its own DataStore's file.
    await asyncio.to_thread(_core(await _admin(plane, "home")).create_namespace, _namespace("team-home"))
    await asyncio.to_thread(_core(await _admin(plane, "away")).create_namespace, _namespace("team-away"))
    second = tmp_path / "stores" / "second.sqlite"
    assert _keys(second, "team-away") and not _keys(second, "team-home")
    assert _keys(tmp_path / "datastore.sqlite", "team-home")
    assert not _keys(tmp_path / "datastore.sqlite", "team-away")

    # The DataStore's Secret tells the tenant's API server where its data is, as in Kamaji.
    config = await plane.client.get(model.SECRETS, "away-datastore-config", "default")
    assert base64.b64decode(config["data"]["DB_CONNECTION_STRING"]).decode() == f"sqlite://{second}"


async def test_credentials_of_a_tenant_in_another_process_get_401_not_a_tls_failure(
    plane: ManagementPlane,
) -> None:
    await _ready(plane, "home", "default")
    await _ready(plane, "away", "second")
    home, away = await _admin(plane, "home"), await _admin(plane, "away")
    for target, owner in ((away, home), (home, away)):
        crossed = {**target, "users": owner["users"]}
        crossed["contexts"][0]["context"]["user"] = owner["users"][0]["name"]
        with pytest.raises(kubernetes.client.ApiException) as refused:
            await asyncio.to_thread(_core(crossed).list_namespace)
        assert refused.value.status == 401
    # At home each credential still works.
    assert (await asyncio.to_thread(_core(away).list_namespace)).items


async def test_deleting_the_tenant_purges_its_keys_from_its_own_store(
    plane: ManagementPlane, tmp_path: Path
) -> None:
    away = await _ready(plane, "away", "second")
    schema = model.datastore_schema(away)
    second = tmp_path / "stores" / "second.sqlite"
    assert _keys(second, f"/{schema}/")
    await plane.client.delete(model.TENANT_CONTROL_PLANES, "away", "default")
    async with asyncio.timeout(20):
        while True:
            try:
                await plane.client.get(model.TENANT_CONTROL_PLANES, "away", "default")
            except ApiError as err:
                assert err.code == 404
                break
            await asyncio.sleep(0.02)
    assert _keys(second, f"/{schema}/") == []


async def test_a_crashed_control_plane_process_is_replaced_and_its_tenant_served_again(
    plane: ManagementPlane,
) -> None:
    away = await _ready(plane, "away", "second")
    admin = await _admin(plane, "away")
    await asyncio.to_thread(_core(admin).create_namespace, _namespace("kept"))
    assert isinstance(plane.host, DataStoreHosts)
    (crashed,) = plane.host.pids
    os.kill(crashed, signal.SIGKILL)
    # The controller starts the tenant again in a new process, on the same endpoint, with its data.
    async with asyncio.timeout(30):
        while True:
            pids = plane.host.pids
            if pids and pids != [crashed]:
                try:
                    names = await asyncio.to_thread(_core(admin).list_namespace)
                    break
                except Exception:
                    pass
            await asyncio.sleep(0.05)
    assert "kept" in {n.metadata.name for n in names.items}
    again = await plane.client.get(model.TENANT_CONTROL_PLANES, "away", "default")
    assert model.endpoint(again) == model.endpoint(away)


async def _settled(plane: ManagementPlane, name: str) -> Obj:
    """The TCP once the controller has reconciled its latest spec."""
    async with asyncio.timeout(20):
        while True:
            tcp = await plane.client.get(model.TENANT_CONTROL_PLANES, name, "default")
            status = tcp.get("status") or {}
            if status.get("observedGeneration") == tcp["metadata"].get("generation") and (
                model.version_status(tcp) == "Ready"
            ):
                return tcp
            await asyncio.sleep(0.02)


async def test_changing_the_datastore_migrates_the_tenant_and_leaves_the_source_copy(
    plane: ManagementPlane, tmp_path: Path
) -> None:
    before = await _ready(plane, "mover", "default")
    admin = await _admin(plane, "mover")
    carried = await asyncio.to_thread(_core(admin).create_namespace, _namespace("carried"))
    await plane.client.patch(
        model.TENANT_CONTROL_PLANES, "mover", {"spec": {"dataStore": "second"}}, "default"
    )
    after = await _settled(plane, "mover")
    assert after["status"]["storage"]["dataStoreName"] == "second"
    assert model.endpoint(after) == model.endpoint(before)
    # The tenant's objects are served from the new store, with revisions above every one it had before.
    names = {n.metadata.name: n for n in (await asyncio.to_thread(_core(admin).list_namespace)).items}
    assert "carried" in names
    assert int(names["carried"].metadata.resource_version) > int(carried.metadata.resource_version)
    second = tmp_path / "stores" / "second.sqlite"
    assert _keys(second, "carried")
    # As in Kamaji, the source keeps its copy.
    assert _keys(tmp_path / "datastore.sqlite", "carried")
    config = await plane.client.get(model.SECRETS, "mover-datastore-config", "default")
    assert base64.b64decode(config["data"]["DB_CONNECTION_STRING"]).decode() == f"sqlite://{second}"
    # New writes land in the new store.
    await asyncio.to_thread(_core(admin).create_namespace, _namespace("after-move"))
    assert _keys(second, "after-move") and not _keys(tmp_path / "datastore.sqlite", "after-move")


async def test_a_migration_onto_a_store_holding_the_schema_waits_for_the_cleanup_annotation(
    plane: ManagementPlane, tmp_path: Path
) -> None:
    tcp = await _ready(plane, "stayer", "default")
    schema = model.datastore_schema(tcp)
    second = f"sqlite://{tmp_path}/stores/second.sqlite"
    assert isinstance(plane.host, DataStoreHosts)
    stale = TenantData(0, [(f"/{schema}/stale", b'{"kind": "Leftover"}')])
    await plane.host.import_tenant(schema, stale, wipe=False, datastore=second)
    admin = await _admin(plane, "stayer")
    await asyncio.to_thread(_core(admin).create_namespace, _namespace("mine"))

    await plane.client.patch(
        model.TENANT_CONTROL_PLANES, "stayer", {"spec": {"dataStore": "second"}}, "default"
    )
    refused = await _settled(plane, "stayer")
    # Nothing is lost or overwritten: the tenant goes on serving from where its data is.
    assert refused["status"]["storage"]["dataStoreName"] == "default"
    assert "mine" in {n.metadata.name for n in (await asyncio.to_thread(_core(admin).list_namespace)).items}
    assert _keys(tmp_path / "stores" / "second.sqlite", f"/{schema}/stale")

    await plane.client.patch(
        model.TENANT_CONTROL_PLANES,
        "stayer",
        {"metadata": {"annotations": {CLEANUP_PRIOR_MIGRATION: "true"}}},
        "default",
    )
    async with asyncio.timeout(20):
        while (await _settled(plane, "stayer"))["status"]["storage"]["dataStoreName"] != "second":
            await asyncio.sleep(0.05)
    assert "mine" in {n.metadata.name for n in (await asyncio.to_thread(_core(admin).list_namespace)).items}
    assert not _keys(tmp_path / "stores" / "second.sqlite", f"/{schema}/stale")


async def test_the_control_plane_process_ends_with_the_management_plane(tmp_path: Path) -> None:
    plane = ManagementPlane(
        tmp_path / "datastore.sqlite", tmp_path / "pki", tmp_path / "m.kubeconfig", datastore_processes=True
    )
    await plane.start()
    try:
        await plane.client.create(
            model.DATASTORES, model.datastore("second", endpoint="sqlite://stores/second.sqlite")
        )
        await _ready(plane, "away", "second")
        assert isinstance(plane.host, DataStoreHosts)
        (pid,) = plane.host.pids
    finally:
        await plane.stop()
    assert not Path(f"/proc/{pid}").exists()
    # A relative endpoint counts from the management plane's own store's directory.
    assert (tmp_path / "stores" / "second.sqlite").exists()


def test_sqlite_endpoints_name_files_other_drivers_nothing(tmp_path: Path) -> None:
    assert sqlite_path("sqlite:///var/lab/a.sqlite", tmp_path) == Path("/var/lab/a.sqlite")
    assert sqlite_path("sqlite://stores/b.sqlite", tmp_path) == (tmp_path / "stores" / "b.sqlite").resolve()
    assert sqlite_path("postgres://db:5432", tmp_path) is None


def test_an_instance_survives_the_trip_to_another_process_unchanged() -> None:
    pair = KeyPair(b"-----BEGIN CERTIFICATE-----\nAAA\n", b"-----BEGIN PRIVATE KEY-----\nBBB\n")
    instance = ControlPlaneInstance(
        key="uid-1",
        namespace="default",
        name="t",
        schema="uid_1",
        address="127.0.0.1",
        port=6443,
        kubernetes_version="v1.31.4",
        ca=pair,
        serving=KeyPair(b"c", b"k"),
        service_account=KeyPair(b"", b"sa"),
        datastore="sqlite:///x.sqlite",
    )
    assert ControlPlaneInstance.from_json(json.loads(json.dumps(instance.to_json()))) == instance


async def test_a_child_answers_an_unknown_op_with_an_error_and_its_death_fails_open_calls(
    tmp_path: Path,
) -> None:
    child = ChildProcess(
        "control-plane process", "tenantgpu.kamaji.hostprocess", ["--datastore", str(tmp_path / "s.sqlite")]
    )
    await child.start(60)
    with pytest.raises(ChildError, match="unknown op 'frobnicate'"):
        await child.call("frobnicate")
    # The child goes on answering after an error.
    assert await child.call("purge", schema="nothing-here") == {}
    assert child.process is not None
    child.process.kill()
    with pytest.raises(ChildError, match=r"exited|not running"):
        await child.call("purge", schema="anything")
    await child.stop(5)


def test_a_second_process_may_not_open_a_store_another_one_serves(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    held = lock_store(store)
    try:
        with pytest.raises(RuntimeError, match="held by another process"):
            lock_store(store, timeout=0.2)
    finally:
        os.close(held)
    os.close(lock_store(store, timeout=0.2))
