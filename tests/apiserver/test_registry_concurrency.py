"""Concurrent writes through the registry while writes share group commits: no lost update, no 409."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.kinds import Kind
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.registry import DeleteOptions, Registry
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore

ADMIN = UserInfo("admin", ("system:masters",))


async def _configmaps(tmp_path: Path) -> tuple[Registry, Kind, SQLiteDatastore]:
    """A loaded registry of a fresh server, the configmaps kind, and the store to close."""
    store = SQLiteDatastore(tmp_path / "s.db")
    server = APIServer(APIServerConfig(name="t", datastore=store, pki=ServerPKI.create("t")))
    await server.registry.load()
    kind = server.registry.kinds.resource("", "v1", "configmaps")
    assert kind is not None
    return server.registry, kind, store


async def test_concurrent_patches_of_one_object_all_land(tmp_path: Path) -> None:
    registry, kind, store = await _configmaps(tmp_path)
    await registry.create(kind, "default", {"metadata": {"name": "shared"}, "data": {}}, ADMIN)
    watcher, _ = registry.watch(kind, "default", None, registry.revision)

    def add(i: int):  # type: ignore[no-untyped-def]
        def mutation(obj):  # type: ignore[no-untyped-def]
            obj.setdefault("data", {})[f"k{i}"] = str(i)  # an empty data map is not stored
            return obj

        return mutation

    results = await asyncio.gather(
        *(registry.modify(kind, "default", "shared", add(i), ADMIN) for i in range(30))
    )
    final = registry.get(kind, "default", "shared")
    assert final.obj["data"] == {f"k{i}": str(i) for i in range(30)}
    assert sorted(r.revision for r in results)[-1] == final.revision
    events, _ = await watcher.next_batch(0.01)
    assert [e.entry.revision for e in events] == sorted(r.revision for r in results)
    store.close()


async def test_unconditional_updates_racing_each_other_all_succeed(tmp_path: Path) -> None:
    registry, kind, store = await _configmaps(tmp_path)
    await registry.create(kind, "default", {"metadata": {"name": "put"}, "data": {}}, ADMIN)
    bodies = [{"metadata": {"name": "put"}, "data": {"v": str(i)}} for i in range(10)]
    await asyncio.gather(*(registry.update(kind, "default", "put", body, ADMIN) for body in bodies))
    assert registry.get(kind, "default", "put").obj["data"]["v"] in {str(i) for i in range(10)}
    store.close()


async def test_created_objects_get_distinct_version_4_uids(tmp_path: Path) -> None:
    registry, kind, store = await _configmaps(tmp_path)
    uids = [
        (await registry.create(kind, "default", {"metadata": {"name": f"c{i}"}}, ADMIN)).obj["metadata"][
            "uid"
        ]
        for i in range(50)
    ]
    assert len(set(uids)) == 50
    assert all(uuid.UUID(uid).version == 4 and str(uuid.UUID(uid)) == uid for uid in uids)
    store.close()


def test_uids_stay_distinct_version_4_past_each_batch_of_randomness() -> None:
    from tenantgpu.apiserver.uids import UidSource

    source = UidSource()
    uids = [source.next() for _ in range(3 * UidSource._BATCH + 5)]
    assert len(set(uids)) == len(uids)
    assert all(uuid.UUID(uid).version == 4 and str(uuid.UUID(uid)) == uid for uid in uids)


def test_generated_name_tails_use_the_whole_alphabet_evenly() -> None:
    from tenantgpu.apiserver.uids import UidSource

    source = UidSource()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    tails = [source.suffix(alphabet) for _ in range(2000)]
    assert all(len(t) == 5 and set(t) <= set(alphabet) for t in tails)
    # 2,000 draws from 27^5 tails collide about once in seven runs, as kube's do (the create then gets
    # 409 AlreadyExists and the client retries); more than a few repeats would mean a broken source.
    assert len(set(tails)) >= len(tails) - 3
    counts = [sum(t.count(c) for t in tails) for c in alphabet]
    assert min(counts) > 0.7 * 10000 / len(alphabet) and max(counts) < 1.3 * 10000 / len(alphabet)


async def test_a_watch_from_a_list_taken_while_a_delete_is_staged_sees_the_delete(tmp_path: Path) -> None:
    # kubectl delete --wait lists the object, then watches from the list's resourceVersion: a list served
    # in the loop turn where the kubelet's final DELETE is staged but not committed must not report a
    # revision that already covers that DELETE, or the watch never sees it and the wait times out.
    registry, kind, store = await _configmaps(tmp_path)
    await registry.create(kind, "default", {"metadata": {"name": "going"}}, ADMIN)
    options = DeleteOptions.parse(None, {})
    deleting = asyncio.create_task(registry.delete(kind, "default", "going", options, ADMIN))
    await asyncio.sleep(0)  # the DELETE is staged in this turn's transaction
    listed = [e.obj["metadata"]["name"] for e in registry.list(kind, "default", None)]
    list_revision = registry.revision
    assert listed == ["going"]  # the cache still has it: the delete is not committed
    await deleting
    # The watch request arrives after the commit: the event must come from the backlog.
    _, backlog = registry.watch(kind, "default", None, list_revision)
    assert [(e.type, e.entry.obj["metadata"]["name"]) for e in backlog] == [("DELETED", "going")]
    store.close()
