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


async def test_the_heap_is_thawed_every_thaw_interval() -> None:
    policy = CollectorPolicy(check_interval=0.01, thaw_interval=0.03)
    policy.start()
    try:
        survivor = [object()]
        await asyncio.sleep(0.015)
        assert not _scanned(survivor)
        await asyncio.sleep(0.05)
        assert _scanned(survivor)  # thawed: a later full collection would reclaim it if it were garbage
    finally:
        policy.stop()


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
