"""The SQLite datastore: one revision across tenants, compare-and-swap, and nothing lost on reopen."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import pytest

from tenantgpu.apiserver.storage import KeyExists, KeyNotFound, RevisionMismatch, SQLiteDatastore


def _value(text: str):  # type: ignore[no-untyped-def]
    return lambda revision: f"{text}@{revision}".encode()


async def test_revisions_rise_across_prefixes_and_survive_reopening(tmp_path: Path) -> None:
    store = SQLiteDatastore(tmp_path / "s.db")
    first = await store.create("/a/pods/x", _value("ax"))
    second = await store.create("/b/pods/x", _value("bx"))
    assert second == first + 1
    deleted_at = await store.delete("/a/pods/x", first)
    assert deleted_at == second + 1
    store.close()

    reopened = SQLiteDatastore(tmp_path / "s.db")
    assert reopened.revision == deleted_at  # a delete's revision is never handed out again
    assert [(kv.key, kv.value) for kv in await reopened.range("/b/")] == [
        ("/b/pods/x", f"bx@{second}".encode())
    ]
    assert await reopened.range("/a/") == []
    assert await reopened.create("/a/pods/y", _value("ay")) == deleted_at + 1
    reopened.close()


async def test_compare_and_swap(tmp_path: Path) -> None:
    store = SQLiteDatastore(tmp_path / "s.db")
    revision = await store.create("/t/cm/a", _value("1"))
    with pytest.raises(KeyExists):
        await store.create("/t/cm/a", _value("again"))
    updated = await store.update("/t/cm/a", _value("2"), revision)
    with pytest.raises(RevisionMismatch) as stale:
        await store.update("/t/cm/a", _value("3"), revision)
    assert stale.value.current == updated
    with pytest.raises(KeyNotFound):
        await store.update("/t/cm/missing", _value("x"), 1)
    with pytest.raises(RevisionMismatch):
        await store.delete("/t/cm/a", revision)
    store.close()


async def test_a_datastore_made_with_the_earlier_without_rowid_table_keeps_working(tmp_path: Path) -> None:
    # Labs created before the table became a rowid table resume from their file as it is.
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, revision INTEGER NOT NULL) WITHOUT ROWID"
    )
    db.execute("CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 1), revision INTEGER)")
    db.execute("INSERT INTO kv VALUES ('/t/cm/a', CAST('a@7' AS BLOB), 7)")
    db.execute("INSERT INTO meta VALUES (1, 7)")
    db.commit()
    db.close()

    store = SQLiteDatastore(path)
    assert store.revision == 7
    updated = await store.update("/t/cm/a", _value("a2"), 7)
    created = await store.create("/t/cm/b", _value("b"))
    assert (updated, created) == (8, 9)
    assert [(kv.key, kv.value) for kv in await store.range("/t/")] == [
        ("/t/cm/a", b"a2@8"),
        ("/t/cm/b", b"b@9"),
    ]
    store.close()
    table = sqlite3.connect(path).execute("SELECT sql FROM sqlite_master WHERE name = 'kv'").fetchone()[0]
    assert "WITHOUT ROWID" in table


async def test_delete_prefix_removes_one_tenant_only(tmp_path: Path) -> None:
    store = SQLiteDatastore(tmp_path / "s.db")
    await store.create("/tenant-a/pods/x", _value("1"))
    await store.create("/tenant-ab/pods/x", _value("2"))
    await store.delete_prefix("/tenant-a/")
    assert [kv.key for kv in await store.range("/")] == ["/tenant-ab/pods/x"]
    store.close()


async def test_writes_of_one_loop_turn_are_acknowledged_only_after_their_commit(tmp_path: Path) -> None:
    store = SQLiteDatastore(tmp_path / "s.db")
    seen: list[int] = []
    writes = [store.create(f"/t/cm/{i}", _value(str(i)), seen.append) for i in range(20)]
    revisions = await asyncio.gather(*writes)
    assert seen == sorted(revisions) == list(range(1, 21))  # told in revision order, before resuming
    # Another connection (what a restart after kill -9 would read) sees every acknowledged write.
    other = sqlite3.connect(tmp_path / "s.db")
    assert other.execute("SELECT COUNT(*) FROM kv").fetchone()[0] == 20
    other.close()
    store.close()


async def test_a_lost_compare_and_swap_can_wait_for_the_winner(tmp_path: Path) -> None:
    store = SQLiteDatastore(tmp_path / "s.db")
    revision = await store.create("/t/cm/a", _value("1"))
    committed: list[int] = []
    winner = asyncio.ensure_future(store.update("/t/cm/a", _value("2"), revision, committed.append))
    await asyncio.sleep(0)  # the winner's statement ran; its commit is still ahead
    with pytest.raises(RevisionMismatch):
        await store.update("/t/cm/a", _value("3"), revision)
    assert committed == []
    await store.settled()
    assert committed == [await winner]
    store.close()


async def test_a_staged_write_is_not_visible_in_the_revision_until_its_commit(tmp_path: Path) -> None:
    store = SQLiteDatastore(tmp_path / "s.db")
    seen_at_commit: list[int] = []

    def committed(revision: int) -> None:
        seen_at_commit.append(store.revision)  # what a reader in the commit callback would see

    write = asyncio.create_task(store.create("/t/pods/a", _value("a"), committed))
    await asyncio.sleep(0)  # the write is staged in this loop turn's transaction, not yet committed
    # A list served now reads the cache, which has no event for the staged write yet: the revision it
    # reports must not cover that write, or a watch resumed from it would never see the write's event.
    assert store.revision == 0
    assert await write == 1
    assert store.revision == 1
    assert seen_at_commit == [0]  # made visible only after every commit callback ran
    store.close()


def test_a_write_is_acknowledged_in_the_loop_turn_after_it_was_staged(tmp_path: Path) -> None:
    """On uvloop, the loop of every lab process, the commit runs in the I/O phase of the turn that staged
    the write, so the writer resumes in the next turn's callbacks. With the commit in a call_soon
    callback it resumed a turn later (measured: 2 turns), and under load a turn takes milliseconds."""
    uvloop = pytest.importorskip("uvloop")

    async def turns_per_write() -> list[int]:
        store = SQLiteDatastore(tmp_path / "s.db")
        turns = 0

        async def count_turns() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        counter = asyncio.create_task(count_turns())
        await asyncio.sleep(0)
        counts = []
        for i in range(5):
            start = turns
            await store.create(f"/t/cm/{i}", _value(str(i)))
            counts.append(turns - start)
        counter.cancel()
        store.close()
        return counts

    assert uvloop.run(turns_per_write()) == [1] * 5
    # Every write was committed: another connection sees them all.
    other = sqlite3.connect(tmp_path / "s.db")
    assert other.execute("SELECT COUNT(*) FROM kv").fetchone()[0] == 5
    other.close()


async def test_closing_a_datastore_releases_what_schedules_its_commits(tmp_path: Path) -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("counting open files needs /proc")
    await asyncio.sleep(0)
    before = open_fds()
    for i in range(10):
        store = SQLiteDatastore(tmp_path / f"s{i}.db")
        await store.create("/t/cm/a", _value("a"))
        store.close()
    assert open_fds() == before


async def test_after_commit_runs_once_the_commit_and_its_callbacks_have(tmp_path: Path) -> None:
    store = SQLiteDatastore(tmp_path / "s.db")
    order: list[str] = []

    def committed(revision: int) -> None:
        order.append(f"committed {revision}")
        store.after_commit(lambda: order.append("after, asked in a commit callback"))

    write = asyncio.ensure_future(store.create("/t/cm/a", _value("a"), committed))
    await asyncio.sleep(0)  # staged, not yet committed
    store.after_commit(lambda: order.append("after, asked while staged"))
    await write
    await asyncio.sleep(0)
    assert order == ["committed 1", "after, asked while staged", "after, asked in a commit callback"]
    # With no commit under way or pending, it runs in the loop's next turn.
    store.after_commit(lambda: order.append("after, with nothing pending"))
    assert order[-1] != "after, with nothing pending"
    await asyncio.sleep(0)
    assert order[-1] == "after, with nothing pending"
    store.close()
