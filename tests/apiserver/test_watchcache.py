"""Watch semantics of the cache: selector transitions, resume windows, slow watchers."""

from __future__ import annotations

import asyncio
import json

import pytest

from tenantgpu.apiserver.errors import APIError
from tenantgpu.apiserver.watchcache import Entry, Event, ResourceCache, TriggerField, Watcher, encode


def _pod(name: str, revision: int, node: str = "") -> Entry:
    obj = {
        "metadata": {"name": name, "namespace": "default", "resourceVersion": str(revision)},
        "spec": {"nodeName": node},
    }
    return Entry(obj, encode(obj), revision)


def _on_node(node: str):  # type: ignore[no-untyped-def]
    return lambda obj: obj["spec"].get("nodeName") == node


async def test_a_pod_bound_to_the_node_arrives_as_added_and_leaves_as_deleted() -> None:
    cache = ResourceCache(start_revision=0, window=100)
    watcher = Watcher("default", _on_node("w1"))
    assert cache.watch(watcher, None) == []
    pending = _pod("p", 1)
    cache.record("default/p", Event("ADDED", pending))
    bound = _pod("p", 2, "w1")
    cache.record("default/p", Event("MODIFIED", bound, pending))
    moved = _pod("p", 3, "w2")
    cache.record("default/p", Event("MODIFIED", moved, bound))
    events, ended = await watcher.next_batch(0.01)
    assert not ended
    assert [(e.type, e.entry.revision, e.entry.obj["spec"]["nodeName"]) for e in events] == [
        ("ADDED", 2, "w1"),
        ("DELETED", 3, "w1"),  # the last state the watcher could see, stamped with the new revision
    ]


async def test_resume_replays_the_window_and_expires_beyond_it() -> None:
    cache = ResourceCache(start_revision=10, window=3)
    for revision in range(11, 16):
        cache.record(f"default/p{revision}", Event("ADDED", _pod(f"p{revision}", revision)))
    replay = cache.watch(Watcher(None, None), 12)
    assert [e.entry.revision for e in replay] == [13, 14, 15]
    with pytest.raises(APIError) as expired:
        cache.watch(Watcher(None, None), 11)
    assert expired.value.code == 410 and expired.value.reason == "Expired"
    initial = cache.watch(Watcher(None, None), None)
    assert sorted(e.entry.revision for e in initial) == [11, 12, 13, 14, 15]
    assert {e.type for e in initial} == {"ADDED"}


async def test_a_watcher_that_falls_behind_is_closed() -> None:
    cache = ResourceCache(start_revision=0, window=10)
    watcher = Watcher(None, None, limit=3)
    cache.watch(watcher, None)
    for revision in range(1, 6):
        cache.record(f"default/p{revision}", Event("ADDED", _pod(f"p{revision}", revision)))
    events, ended = await watcher.next_batch(0.01)
    assert len(events) == 3 and ended


async def test_next_batch_times_out_empty() -> None:
    events, ended = await Watcher(None, None).next_batch(0.01)
    assert events == [] and not ended


NODE_NAME = TriggerField("spec.nodeName", lambda obj: obj["spec"].get("nodeName") or "")


async def test_watchers_indexed_by_node_see_what_unindexed_ones_see() -> None:
    # kube's indexed triggers: a kubelet's watch is offered only its node's pod events, and sees the
    # same events as a watcher offered every event would (binding as ADDED, moving away as DELETED).
    cache = ResourceCache(start_revision=0, window=100, trigger=NODE_NAME)
    indexed = {node: Watcher("default", _on_node(node), trigger=node) for node in ("w1", "w2", "")}
    plain = {node: Watcher("default", _on_node(node)) for node in ("w1", "w2", "")}
    for watcher in [*indexed.values(), *plain.values()]:
        cache.watch(watcher, None)
    assert cache.watcher_count == 6
    states = [_pod("p", 1), _pod("p", 2, "w1"), _pod("p", 3, "w2"), _pod("q", 4, "w2")]
    cache.record("default/p", Event("ADDED", states[0]))
    cache.record("default/p", Event("MODIFIED", states[1], states[0]))
    cache.record("default/p", Event("MODIFIED", states[2], states[1]))
    cache.record("default/q", Event("ADDED", states[3]))
    cache.record("default/p", Event("DELETED", states[2].at_revision(5)))
    seen = {}
    for node in ("w1", "w2", ""):
        for kind, watcher in (("indexed", indexed[node]), ("plain", plain[node])):
            events, _ = await watcher.next_batch(0.01)
            seen[kind, node] = [(e.type, e.entry.obj["metadata"]["name"], e.entry.revision) for e in events]
        assert seen["indexed", node] == seen["plain", node]
    assert seen["indexed", "w1"] == [("ADDED", "p", 2), ("DELETED", "p", 3)]
    assert seen["indexed", "w2"] == [("ADDED", "p", 3), ("ADDED", "q", 4), ("DELETED", "p", 5)]
    assert seen["indexed", ""] == [("ADDED", "p", 1), ("DELETED", "p", 2)]
    cache.unwatch(indexed["w1"])
    assert cache.watcher_count == 5
    cache.close_watchers()
    assert cache.watcher_count == 0
    assert (await indexed["w2"].next_batch(0.01))[1]  # closed: the stream ends


async def test_a_waiting_watch_hands_events_to_its_sink_and_queues_what_it_refuses() -> None:
    cache = ResourceCache(start_revision=0, window=100)
    watcher = Watcher(None, None)
    cache.watch(watcher, None)
    written: list[int] = []
    accepting = [True]

    class Sink:
        def take(self, event: Event) -> bool:
            if accepting[0]:
                written.append(int(json.loads(event.line())["object"]["metadata"]["resourceVersion"]))
            return accepting[0]

    watcher.sink = Sink()
    # Before the watch's task waits (it may be writing), events are queued, not written past it.
    cache.record("default/p1", Event("ADDED", _pod("p1", 1)))
    assert written == []
    events, _ = await watcher.next_batch(0.01)
    assert [e.entry.revision for e in events] == [1]

    batch = asyncio.ensure_future(watcher.next_batch(5.0))
    await asyncio.sleep(0)  # the task now waits with nothing queued
    cache.record("default/p2", Event("ADDED", _pod("p2", 2)))
    assert written == [2] and not batch.done()  # written in the commit; the task was not woken

    accepting[0] = False  # the client stopped reading: the connection paused writing
    cache.record("default/p3", Event("ADDED", _pod("p3", 3)))
    accepting[0] = True
    cache.record("default/p4", Event("ADDED", _pod("p4", 4)))  # behind p3, so queued too
    events, ended = await batch
    assert [e.entry.revision for e in events] == [3, 4] and not ended
    assert written == [2]
