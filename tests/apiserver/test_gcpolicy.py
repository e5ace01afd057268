"""The collector policy freezes what survives young collections and thaws it again on schedule."""

from __future__ import annotations

import asyncio
import gc
import weakref

from tenantgpu.apiserver.gcpolicy import CollectorPolicy


async def test_survivors_are_frozen_at_the_next_tick_then_thawed() -> None:
    policy = CollectorPolicy(check_interval=0.01, thaw_interval=10.0)
    policy.start()
    try:
        assert gc.get_freeze_count() > 0
        survivor = [object()]  # a new tracked object, still live at the next tick
        assert _scanned(survivor)
        await asyncio.sleep(0.05)
        assert not _scanned(survivor)  # a full collection would no longer walk it
    finally:
        policy.stop()
    assert _scanned(survivor)


async def test_the_heap_is_collected_in_full_every_thaw_interval_and_frozen_again() -> None:
    policy = CollectorPolicy(check_interval=0.01, thaw_interval=0.05)
    policy.start()
    try:
        node = _Node()
        node.partner = node  # a cycle: only the collector can free it
        alive = weakref.ref(node)
        survivor = [object()]
        await asyncio.sleep(0.015)
        assert not _scanned(survivor) and alive() is not None  # both frozen
        del node  # dead now, but frozen: no collection sees it until the thaw
        assert await _reclaimed(alive)  # by the thaw's full collection
        assert not _scanned(survivor)  # what survived it is frozen again
    finally:
        policy.stop()


async def _reclaimed(alive: weakref.ref[object], within: float = 5.0) -> bool:
    """Whether the object is freed within `within` seconds (the ticks run late on a busy machine)."""
    deadline = asyncio.get_running_loop().time() + within
    while alive() is not None and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    return alive() is None


def _scanned(obj: object) -> bool:
    """Whether the collector still walks the object (frozen ones are in no generation)."""
    return any(candidate is obj for candidate in gc.get_objects())


async def test_garbage_cycles_younger_than_a_tick_are_still_reclaimed() -> None:
    policy = CollectorPolicy(check_interval=0.01, thaw_interval=10.0)
    policy.start()
    try:
        node = _Node()
        node.partner = node  # a cycle: only the collector can free it
        alive = weakref.ref(node)
        del node  # unreachable before the tick: its young collection frees it instead of freezing it
        await asyncio.sleep(0.05)
        assert alive() is None
    finally:
        policy.stop()


class _Node:
    partner: object = None


async def test_young_collections_wait_for_more_allocations_while_the_policy_runs() -> None:
    before = gc.get_threshold()
    policy = CollectorPolicy(check_interval=10.0, young_threshold=12_345)
    policy.start()
    try:
        assert gc.get_threshold() == (12_345, *before[1:])
    finally:
        policy.stop()
    assert gc.get_threshold() == before


async def test_a_cycle_that_dies_after_a_young_collection_waits_for_the_thaw() -> None:
    """The ticks collect the youngest generation alone: what survived one young collection is frozen
    unexamined, so a cycle that dies later is reclaimed by the thaw's full collection."""
    policy = CollectorPolicy(check_interval=0.01, thaw_interval=0.2)
    policy.start()
    try:
        node = _Node()
        node.partner = node
        alive = weakref.ref(node)
        gc.collect(0)  # it survives a young collection while still in use
        del node
        await asyncio.sleep(0.05)
        assert alive() is not None  # frozen by a tick
        assert await _reclaimed(alive)
    finally:
        policy.stop()
