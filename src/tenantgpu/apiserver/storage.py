"""The datastore: a key-value store with one global revision, shared by tenants under key prefixes.

`SQLiteDatastore` is the embedded driver (one WAL-mode file for every tenant, as Kamaji shares one
etcd). Writes are committed before they return, so an acknowledged write survives `kill -9`.

Writes made in the same turn of the event loop share one transaction (a group commit): each statement
runs at once, so compare-and-swap checks see every earlier write, and each write's `committed` callback
runs right after the COMMIT and before any writer resumes, so the caller's view (the watch cache) is
current when a writer - or a retry waiting in `settled()` - continues.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)


class StorageError(Exception):
    """Base of datastore failures the registry turns into API errors."""


class KeyExists(StorageError):
    pass


class KeyNotFound(StorageError):
    pass


class RevisionMismatch(StorageError):
    """The stored revision differs from the one the write expected (optimistic concurrency)."""

    def __init__(self, current: int) -> None:
        super().__init__(f"current revision is {current}")
        self.current = current


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: bytes
    revision: int


Encoder = Callable[[int], bytes]
"""Renders the value for the revision the write will get, so the stored bytes carry their version."""

Committed = Callable[[int], None]
"""Told the write's revision once it is durable, before the writer (or anyone waiting) resumes."""


class Datastore(Protocol):
    """What the registry needs from a store; an etcd driver would implement the same calls."""

    @property
    def revision(self) -> int:
        """The revision readers see: every write up to it is committed and its commit callback ran."""
        ...

    async def range(self, prefix: str) -> list[KeyValue]: ...

    async def create(self, key: str, encode: Encoder, committed: Committed | None = None) -> int: ...

    async def update(
        self, key: str, encode: Encoder, expected_revision: int, committed: Committed | None = None
    ) -> int: ...

    async def delete(self, key: str, expected_revision: int, committed: Committed | None = None) -> int: ...

    async def delete_prefix(self, prefix: str) -> int: ...

    async def restore(self, items: Sequence[tuple[str, Encoder]], floor: int) -> int: ...

    async def settled(self) -> bool:
        """Returns once every write issued so far is committed (and its `committed` callback ran);
        true if there was such a write to wait for."""
        ...

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Runs `callback` once, after the commit under way or pending and all its callbacks; with none,
        in the loop's next turn."""
        ...

    def close(self) -> None: ...


def _prefix_end(prefix: str) -> str:
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class SQLiteDatastore:
    """One SQLite file (WAL) holding every tenant's keys and a single monotonically rising revision.

    Statements run inline on the event loop: each is tens of microseconds, far cheaper than a hop to a
    thread, and a single writer keeps compare-and-swap trivially atomic. The writes of one loop turn
    share a transaction, committed in that turn's I/O phase, after the callbacks that staged them: a
    COMMIT (a WAL append) costs more than the statements it closes, so under load one commit carries
    many writes. Rows carry their revision; deletes also record the revision they consumed, so
    revisions never go back after a restart. WAL checkpoints, which fsync, run in a background thread
    so they never stall the loop.
    """

    def __init__(self, path: str | Path, *, checkpoint_interval: float = 2.0) -> None:
        self.path = str(path)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode survives a process kill (the WAL is in the OS page cache); only power loss
        # can drop the last transactions.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA wal_autocheckpoint=0")
        # A rowid table, not WITHOUT ROWID: objects are a kilobyte or more, and a WITHOUT ROWID b-tree
        # keeps them inside the key's index, so its pages split and fill with a few rows each (measured
        # with 1.3 kB pods: an INSERT 36 µs and an UPDATE 18 µs there, 5 µs and 7 µs here). Datastores
        # created with the earlier WITHOUT ROWID table keep it; the statements work on both.
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, revision INTEGER NOT NULL)"
        )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS meta (id INTEGER PRIMARY KEY CHECK (id = 1), revision INTEGER)"
        )
        row = self._db.execute("SELECT revision FROM meta WHERE id = 1").fetchone()
        kv_max = self._db.execute("SELECT MAX(revision) FROM kv").fetchone()[0] or 0
        self._revision = max(row[0] if row else 0, kv_max)
        # Revisions are handed out when a write is staged, but only a commit makes them visible: a
        # list or watch must never name a revision whose events the watch cache has not seen yet.
        self._visible = self._revision
        if row is None:
            self._db.execute("INSERT INTO meta (id, revision) VALUES (1, ?)", (self._revision,))
        self._open = False  # a transaction is open (this loop turn's writes)
        # (read end, write end) of the pipe whose writability schedules the commit
        self._commit_pipe: tuple[int, int] | None = None
        self._commit_loop: asyncio.AbstractEventLoop | None = None
        self._committing = False  # the commit callbacks are running
        self._after_commit: list[Callable[[], None]] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._committed: list[tuple[Committed, int]] = []
        self._stop = threading.Event()
        self._checkpointer = threading.Thread(
            target=self._checkpoint_loop, args=(checkpoint_interval,), name="sqlite-checkpoint", daemon=True
        )
        self._checkpointer.start()

    def _checkpoint_loop(self, interval: float) -> None:
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            while not self._stop.wait(interval):
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            connection.close()

    @property
    def revision(self) -> int:
        return self._visible

    # --- the group commit -----------------------------------------------------------------------

    def _transaction(self) -> None:
        """Opens this loop turn's transaction on first use; the turn's I/O phase commits it."""
        if not self._open:
            self._db.execute("BEGIN IMMEDIATE")
            self._open = True
            self._schedule_commit(asyncio.get_running_loop())

    def _schedule_commit(self, loop: asyncio.AbstractEventLoop) -> None:
        # On uvloop a callback from call_soon would run in the next turn's batch of callbacks, and the
        # writers it wakes only in the batch after that. A writability callback on a pipe's write end,
        # always writable, runs in this turn's I/O phase, after every callback that staged a write: the
        # writers resume, and the watchers write their events, one turn sooner. Under load a turn takes
        # milliseconds, and a pod's way crosses the lab process's commits about ten times.
        if self._commit_pipe is None:
            self._commit_pipe = os.pipe()
        try:
            loop.add_writer(self._commit_pipe[1], self._commit)
        except NotImplementedError:  # a loop without readiness callbacks (Windows' Proactor)
            loop.call_soon(self._commit)
        else:
            self._commit_loop = loop

    def _unschedule_commit(self) -> None:
        loop, self._commit_loop = self._commit_loop, None
        if loop is not None and self._commit_pipe is not None and not loop.is_closed():
            loop.remove_writer(self._commit_pipe[1])

    def _close_commit_pipe(self) -> None:
        self._unschedule_commit()
        pipe, self._commit_pipe = self._commit_pipe, None
        for fd in pipe or ():
            with contextlib.suppress(OSError):
                os.close(fd)

    def _commit(self) -> None:
        self._unschedule_commit()
        if not self._open:
            return
        self._open = False
        waiters, self._waiters = self._waiters, []
        committed, self._committed = self._committed, []
        staged = self._revision  # every revision handed out so far belongs to this transaction
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            # The revisions handed out stay consumed: they never come back, which is all a revision owes.
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_exception(StorageError(f"commit failed: {exc}"))
            self._run_after_commit()
            return
        self._committing = True
        try:
            for callback, revision in committed:
                try:
                    callback(revision)
                except Exception:  # one observer's bug must not keep the others (or the writers) waiting
                    log.exception("a commit callback failed for revision %d", revision)
        finally:
            self._committing = False
        self._visible = staged
        for waiter in waiters:
            # A writer whose request was cancelled has a cancelled waiter; the write stays committed.
            if not waiter.done():
                waiter.set_result(None)
        self._run_after_commit()

    def _run_after_commit(self) -> None:
        after, self._after_commit = self._after_commit, []
        for hook in after:
            try:
                hook()
            except Exception:
                log.exception("an after-commit callback failed")

    def after_commit(self, callback: Callable[[], None]) -> None:
        if self._open or self._committing:
            self._after_commit.append(callback)
        else:
            asyncio.get_running_loop().call_soon(callback)

    def _until_committed(self) -> asyncio.Future[None]:
        # Each writer waits on a future of its own rather than on a shared one through
        # `asyncio.shield`: a cancelled writer then cancels only its own, and the commit wakes every
        # writer in the next loop turn instead of the one after (shield's relay costs a turn).
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        return waiter

    async def _acknowledged(self, revision: int, committed: Committed | None) -> int:
        if committed is not None:
            self._committed.append((committed, revision))
        await self._until_committed()
        return revision

    async def settled(self) -> bool:
        if not self._open:
            return False
        await self._until_committed()
        return True

    # --- reads and writes ----------------------------------------------------------------------

    async def range(self, prefix: str) -> list[KeyValue]:
        rows = self._db.execute(
            "SELECT key, value, revision FROM kv WHERE key >= ? AND key < ? ORDER BY key",
            (prefix, _prefix_end(prefix)),
        ).fetchall()
        return [KeyValue(k, bytes(v), r) for k, v, r in rows]

    def _current(self, key: str) -> int | None:
        row = self._db.execute("SELECT revision FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    async def create(self, key: str, encode: Encoder, committed: Committed | None = None) -> int:
        self._transaction()
        revision = self._revision + 1
        try:
            self._db.execute(
                "INSERT INTO kv (key, value, revision) VALUES (?, ?, ?)", (key, encode(revision), revision)
            )
        except sqlite3.IntegrityError as exc:
            raise KeyExists(key) from exc
        self._revision = revision
        return await self._acknowledged(revision, committed)

    async def update(
        self, key: str, encode: Encoder, expected_revision: int, committed: Committed | None = None
    ) -> int:
        self._transaction()
        revision = self._revision + 1
        cursor = self._db.execute(
            "UPDATE kv SET value = ?, revision = ? WHERE key = ? AND revision = ?",
            (encode(revision), revision, key, expected_revision),
        )
        if cursor.rowcount != 1:
            current = self._current(key)
            if current is None:
                raise KeyNotFound(key)
            raise RevisionMismatch(current)
        self._revision = revision
        return await self._acknowledged(revision, committed)

    def _delete_where(self, clause: str, args: tuple[str, ...]) -> int:
        revision = self._revision + 1
        self._db.execute(f"DELETE FROM kv WHERE {clause}", args)
        self._db.execute("UPDATE meta SET revision = ? WHERE id = 1", (revision,))
        self._revision = revision
        return revision

    async def delete(self, key: str, expected_revision: int, committed: Committed | None = None) -> int:
        self._transaction()
        current = self._current(key)
        if current is None:
            raise KeyNotFound(key)
        if current != expected_revision:
            raise RevisionMismatch(current)
        return await self._acknowledged(self._delete_where("key = ?", (key,)), committed)

    async def delete_prefix(self, prefix: str) -> int:
        """Drops a whole tenant (Kamaji deletes the etcd prefix when a tenant goes away)."""
        self._transaction()
        return await self._acknowledged(
            self._delete_where("key >= ? AND key < ?", (prefix, _prefix_end(prefix))), None
        )

    async def restore(self, items: Sequence[tuple[str, Encoder]], floor: int) -> int:
        """Write keys copied from another store (a tenant migrating here), each at a new revision above
        `floor`, so that revisions its clients saw in the old store stay behind every new one."""
        # All or nothing: the transaction is shared with this loop turn's other writes, so check first.
        for key, _ in items:
            if self._current(key) is not None:
                raise KeyExists(key)
        self._transaction()
        self._revision = max(self._revision, floor)
        for key, encode in items:
            revision = self._revision + 1
            self._db.execute(
                "INSERT INTO kv (key, value, revision) VALUES (?, ?, ?)", (key, encode(revision), revision)
            )
            self._revision = revision
        self._db.execute("UPDATE meta SET revision = ? WHERE id = 1", (self._revision,))
        return await self._acknowledged(self._revision, None)

    def close(self) -> None:
        self._commit()
        self._close_commit_pipe()
        self._stop.set()
        self._checkpointer.join(5)
        with contextlib.suppress(sqlite3.Error):
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._db.close()
