"""The watch cache: current objects per resource plus a window of recent events, fanned out to watchers.

Reads and watches are served from here; the datastore is read only when a server starts. As in
kube-apiserver's cacher, a watcher whose selector stops (or starts) matching an object sees it as
DELETED (or ADDED), and a resume from a revision older than the window gets 410 Expired.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.jsoncodec import clone, dumps_kept, loads

Obj = dict[str, Any]

# A stored object is shared with every reader in the process (in-process watches, listeners, the
# copies a patch takes): none may change it. Set (the test suite does), every object a write replaces or
# removes is checked against the JSON it was stored with.
VERIFY_UNCHANGED = os.environ.get("TENANTGPU_VERIFY_STORED", "") == "1"


def encode(obj: Obj) -> bytes:
    """An object's JSON as the cache keeps it, in bytes of its own size."""
    return dumps_kept(obj)


@dataclass(slots=True)
class Entry:
    """A stored object: the decoded form (never mutate it) and its JSON bytes, which carry the revision."""

    obj: Obj
    raw: bytes
    revision: int

    def copy(self) -> Obj:
        """A private, mutable copy of the object."""
        return loads(self.raw)

    def copy_fields(self, fields: Iterable[str]) -> Obj:
        """A new object whose top-level `fields` are private copies; every other field is shared with
        this one, so it must not be changed in place (the top level itself may be)."""
        obj = dict(self.obj)
        for name in fields:
            value = obj.get(name)
            if isinstance(value, dict | list):
                obj[name] = clone(value)
        return obj

    def at_revision(self, revision: int) -> Entry:
        """The same object content stamped with another resourceVersion (deletion events)."""
        obj = self.copy()
        obj["metadata"]["resourceVersion"] = str(revision)
        return Entry(obj, encode(obj), revision)


@dataclass(slots=True)
class Event:
    type: str
    entry: Entry
    prev: Entry | None = None
    _line: bytes | None = None

    def line(self) -> bytes:
        """The event as one line of a JSON watch stream, rendered once for all watchers."""
        if self._line is None:
            self._line = b'{"type":"' + self.type.encode() + b'","object":' + self.entry.raw + b"}\n"
        return self._line


Predicate = Callable[[Obj], bool]


@dataclass(frozen=True, slots=True)
class TriggerField:
    """The field a resource's watchers are indexed by, with the function that reads it (kube's
    `TriggerFunc`): a watch whose field selector requires `path=<value>` gets only its value's events."""

    path: str
    value: Callable[[Obj], str]


class EventSink(Protocol):
    """Where a waiting watch's events can go outside its task (a server's streamed response, or an
    in-process watch)."""

    def take(self, event: Event) -> bool:
        """Take one event to send, or refuse it (then it is queued for the watch's task)."""
        ...


class Watcher:
    """One open watch: a namespace, a selector predicate and a bounded backlog of events to send.

    `trigger` is the value of the resource's trigger field the predicate requires, if it requires one;
    the predicate is still applied to every event offered.
    """

    # A lab keeps about twenty watches open per tenant, most of them idle.
    __slots__ = ("_pending", "_waiter", "limit", "namespace", "overflowed", "predicate", "sink", "trigger")

    def __init__(
        self,
        namespace: str | None,
        predicate: Predicate | None,
        limit: int = 50_000,
        *,
        trigger: str | None = None,
    ) -> None:
        self.namespace = namespace
        self.predicate = predicate
        self.trigger = trigger
        self.limit = limit
        self.overflowed = False
        # A list, handed over whole to the writer: an empty deque takes 760 bytes, and most watches are
        # idle most of the time.
        self._pending: list[Event | None] = []
        self._waiter: asyncio.Future[None] | None = None
        # Set by a server whose stream can take a write outside the watch's task.
        self.sink: EventSink | None = None

    def matches(self, entry: Entry | None) -> bool:
        if entry is None:
            return False
        if self.namespace is not None and entry.obj["metadata"].get("namespace") != self.namespace:
            return False
        return self.predicate is None or self.predicate(entry.obj)

    def translate(self, event: Event) -> Event | None:
        """The event as this watcher must see it, or None if it does not concern the watcher."""
        now = self.matches(event.entry)
        if event.type != "MODIFIED":
            return event if now else None
        before = self.matches(event.prev)
        if now and before:
            return event
        if now:
            return Event("ADDED", event.entry)
        if before and event.prev is not None:
            return Event("DELETED", event.prev.at_revision(event.entry.revision))
        return None

    def _push(self, item: Event | None) -> None:
        self._pending.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def offer(self, event: Event) -> None:
        if self.overflowed:
            return
        seen = self.translate(event)
        if seen is None:
            return
        # While the watch's task waits with nothing queued, the event goes straight to the client: in
        # the commit that recorded it, a loop turn sooner, and with no task to wake for it. Anything
        # queued goes first, so the order holds.
        sink = self.sink
        if sink is not None and self._waiter is not None and not self._pending and sink.take(seen):
            return
        if len(self._pending) >= self.limit:
            # A watcher that cannot keep up is closed, as kube-apiserver does; the client re-watches.
            self.overflowed = True
            self._push(None)
            return
        self._push(seen)

    def close(self) -> None:
        self._push(None)

    async def next_batch(self, timeout: float) -> tuple[list[Event], bool]:
        """Every event queued so far (waiting up to `timeout` for one) and whether the watch has ended."""
        if not self._pending:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(timeout, lambda: waiter.done() or waiter.set_result(None))
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
        batch, self._pending = self._pending, []
        for i, item in enumerate(batch):
            if item is None:  # the watch ends there (closed or overflowed); nothing after it is written
                return batch[:i], True  # type: ignore[return-value]
        return batch, False  # type: ignore[return-value]


class ResourceCache:
    """Current objects of one resource in one tenant, the recent event window and the open watchers."""

    def __init__(self, start_revision: int, window: int, trigger: TriggerField | None = None) -> None:
        self.objects: dict[str, Entry] = {}
        # Counts every change of `objects`: what was derived from them is current while it is equal.
        self.changes = 0
        # Made at the first change: many kinds of a tenant never change, and an empty deque takes 760 bytes.
        self._events: deque[Event] | None = None
        self._window = window
        self._window_start = start_revision
        self._watchers: set[Watcher] = set()
        # kube's indexed triggers: watchers that require one value of the trigger field (a kubelet's
        # `spec.nodeName=<node>`) are offered only the events whose object has, or had, that value.
        self._trigger = trigger
        self._by_value: dict[str, set[Watcher]] = {}
        # In-process observers (e.g. the quota controller), told of every change synchronously.
        self.listeners: list[Callable[[Event], None]] = []
        # Given each stored object once, to share its parts with equal ones elsewhere (sharing.py).
        self.share: Callable[[Obj], Obj] | None = None

    def load(self, key: str, entry: Entry) -> None:
        if self.share is not None:
            self.share(entry.obj)
        self.objects[key] = entry
        self.changes += 1

    def record(self, key: str, event: Event) -> None:
        if VERIFY_UNCHANGED:
            _verify_unchanged(key, self.objects.get(key))
        self.changes += 1
        if event.type == "DELETED":
            self.objects.pop(key, None)
        else:
            if self.share is not None:
                self.share(event.entry.obj)
            self.objects[key] = event.entry
        events = self._events
        if events is None:
            events = self._events = deque(maxlen=self._window)
        elif events:
            # The line rendered for the previous event has been written by every watcher that was
            # waiting; one still behind, or resuming from the window, renders it again. Kept, the lines
            # of an idle tenant's window held another copy of every object's JSON.
            events[-1]._line = None
        if len(events) == self._window:
            self._window_start = events[0].entry.revision
        events.append(event)
        for watcher in self._watchers:
            watcher.offer(event)
        if self._by_value:
            value_of = self._trigger.value  # type: ignore[union-attr]
            value = value_of(event.entry.obj)
            for watcher in self._by_value.get(value, ()):
                watcher.offer(event)
            if event.prev is not None:
                before = value_of(event.prev.obj)
                if before != value:
                    for watcher in self._by_value.get(before, ()):
                        watcher.offer(event)
        for listener in self.listeners:
            listener(event)

    def items(self, prefix: str = "") -> Iterator[tuple[str, Entry]]:
        if not prefix:
            yield from self.objects.items()
            return
        for key, entry in self.objects.items():
            if key.startswith(prefix):
                yield key, entry

    def watch(self, watcher: Watcher, since: int | None) -> list[Event]:
        """Registers the watcher; returns what it must be sent first.

        `since=None` means "from now, starting with every current object as ADDED"; otherwise the events
        after revision `since`, or 410 Expired if the window no longer reaches back that far.
        """
        if since is None:
            backlog = [Event("ADDED", entry) for entry in self.objects.values() if watcher.matches(entry)]
        else:
            if since < self._window_start:
                raise errors.expired(f"too old resource version: {since} ({self._window_start})")
            backlog = []
            for event in self._events or ():
                if event.entry.revision > since:
                    seen = watcher.translate(event)
                    if seen is not None:
                        backlog.append(seen)
        if watcher.trigger is not None and self._trigger is not None:
            self._by_value.setdefault(watcher.trigger, set()).add(watcher)
        else:
            self._watchers.add(watcher)
        return backlog

    def unwatch(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)
        if watcher.trigger is not None:
            indexed = self._by_value.get(watcher.trigger)
            if indexed is not None:
                indexed.discard(watcher)
                if not indexed:
                    del self._by_value[watcher.trigger]

    def close_watchers(self) -> None:
        for watcher in [*self._watchers, *(w for ws in self._by_value.values() for w in ws)]:
            watcher.close()
        self._watchers.clear()
        self._by_value.clear()

    @property
    def watcher_count(self) -> int:
        return len(self._watchers) + sum(len(ws) for ws in self._by_value.values())


def _verify_unchanged(key: str, entry: Entry | None) -> None:
    if entry is not None and encode(entry.obj) != entry.raw:
        raise RuntimeError(f"the stored object {key} was changed in place after it was stored")
