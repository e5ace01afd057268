"""What client-go's event recorder does before an Event reaches the API: counting, combining, throttling.

Each recorder (here: each `KubeClient`) keeps three small caches, as client-go's EventCorrelator does:
- an Event equal to one it recorded before (same source, object, type, reason and message) is not
  created again: the first one is patched with `count` + 1 and a new `lastTimestamp`, which `kubectl
  describe` shows as `(x5 over 2m)`;
- once an object has had 10 events of the same source, type and reason but different messages within
  10 minutes, the next ones become one event `(combined from similar events): <message>`, counted;
- a source may record 25 events about an object at once, then one every 5 minutes; the rest are dropped.
So a controller that retries a refused create every second leaves one counted event, not one a second.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

Obj = dict[str, Any]
K = TypeVar("K")
V = TypeVar("V")

CACHE_ENTRIES = 4096
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL_SECONDS = 600.0
SPAM_BURST = 25
SPAM_REFILL_PER_SECOND = 1 / 300
COMBINED_PREFIX = "(combined from similar events): "


class _LRU(Generic[K, V]):
    def __init__(self, size: int = CACHE_ENTRIES) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self._size:
            self._items.popitem(last=False)


@dataclass
class _Seen:
    count: int
    first_timestamp: str
    name: str


def _seen(event: Obj) -> _Seen:
    return _Seen(int(event.get("count") or 1), str(event.get("firstTimestamp")), event["metadata"]["name"])


@dataclass
class _Similar:
    messages: set[str]
    last: float


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass(frozen=True)
class Correlated:
    """What to send: `patch` for an event recorded before (PATCH `name`), else `event` to create;
    `skip` when the source has said too much about the object lately."""

    event: Obj
    patch: Obj | None = None
    skip: bool = False


def _object_key(event: Obj) -> tuple[str, ...]:
    source = event.get("source") or {}
    obj = event.get("involvedObject") or {}
    return (
        str(source.get("component") or ""),
        str(source.get("host") or ""),
        str(obj.get("kind") or ""),
        str(obj.get("namespace") or ""),
        str(obj.get("name") or ""),
        str(obj.get("uid") or ""),
        str(obj.get("apiVersion") or ""),
    )


def _event_key(event: Obj) -> tuple[str, ...]:
    field_path = str((event.get("involvedObject") or {}).get("fieldPath") or "")
    kind, reason, message = (str(event.get(k) or "") for k in ("type", "reason", "message"))
    return (*_object_key(event), field_path, kind, reason, message)


def _aggregate_key(event: Obj) -> tuple[str, ...]:
    kind, reason = str(event.get("type") or ""), str(event.get("reason") or "")
    controller = str(event.get("reportingComponent") or event.get("reportingController") or "")
    return (*_object_key(event), kind, reason, controller, str(event.get("reportingInstance") or ""))


class EventCorrelator:
    """client-go's EventCorrelator with its default settings; `clock` gives seconds (for tests)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._similar: _LRU[tuple[str, ...], _Similar] = _LRU()
        self._seen: _LRU[tuple[str, ...], _Seen] = _LRU()
        self._spam: _LRU[tuple[str, ...], _Bucket] = _LRU()

    def correlate(self, event: Obj, *, name: Callable[[str], tuple[str, str]]) -> Correlated:
        """`event` as the recorder built it; `name(object)` gives a new event's name and timestamp."""
        now = self._clock()
        event, key = self._aggregate(event, now, name)
        seen = self._seen.get(key)
        patch: Obj | None = None
        if seen is not None:
            event = {
                **event,
                "metadata": {**event["metadata"], "name": seen.name},
                "count": seen.count + 1,
                "firstTimestamp": seen.first_timestamp,
            }
            patch = {
                "count": event["count"],
                "lastTimestamp": event["lastTimestamp"],
                "message": event.get("message", ""),
            }
        self._seen.put(key, _seen(event))
        if not self._accept(_object_key(event), now):
            return Correlated(event, skip=True)
        return Correlated(event, patch)

    def recorded(self, event: Obj) -> None:
        """The event as the API now has it (created afresh after its earlier copy was gone)."""
        self._seen.put(_event_key(event), _seen(event))

    def _aggregate(
        self, event: Obj, now: float, name: Callable[[str], tuple[str, str]]
    ) -> tuple[Obj, tuple[str, ...]]:
        group = _aggregate_key(event)
        similar = self._similar.get(group)
        if similar is None or now - similar.last > AGGREGATE_INTERVAL_SECONDS:
            similar = _Similar(set(), now)
        similar.messages.add(str(event.get("message") or ""))
        similar.last = now
        self._similar.put(group, similar)
        if len(similar.messages) < AGGREGATE_MAX_EVENTS:
            return event, _event_key(event)
        similar.messages.pop()  # the set stays at its limit
        obj = event.get("involvedObject") or {}
        event_name, stamp = name(str(obj.get("name") or "object"))
        combined = {
            **event,
            "metadata": {"name": event_name, "namespace": event["metadata"].get("namespace")},
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "message": COMBINED_PREFIX + str(event.get("message") or ""),
        }
        return combined, group

    def _accept(self, key: tuple[str, ...], now: float) -> bool:
        """A token bucket per source and object: SPAM_BURST at once, refilled one per 300 s."""
        bucket = self._spam.get(key) or _Bucket(float(SPAM_BURST), now)
        bucket.tokens = min(float(SPAM_BURST), bucket.tokens + (now - bucket.at) * SPAM_REFILL_PER_SECOND)
        bucket.at = now
        accepted = bucket.tokens >= 1
        if accepted:
            bucket.tokens -= 1
        self._spam.put(key, bucket)
        return accepted
