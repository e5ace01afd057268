"""The collector policy freezes what survives full collections and thaws it again on schedule."""

from __future__ import annotations

import asyncio
import gc

from tenantgpu.apiserver.gcpolicy import CollectorPolicy


async def test_survivors_of_a_full_collection_are_frozen_then_thawed() -> None:
    policy = CollectorPolicy(check_interval=0.01, thaw_interval=10.0)
    policy.start()
    try:
        assert gc.get_freeze_count() > 0
        survivor = [object()]  # a new tracked object that outlives a full collection
        assert _scanned(survivor)
        gc.collect()
        await asyncio.sleep(0.05)
        assert not _scanned(survivor)
    finally:
        policy.stop()
    assert _scanned(survivor)


async def test_the_heap_is_thawed_every_thaw_interval() -> None:
    policy = CollectorPolicy(check_interval=0.01, thaw_interval=0.03)
    policy.start()
    try:
        survivor = [object()]
        gc.collect()
        await asyncio.sleep(0.015)
        assert not _scanned(survivor)
        await asyncio.sleep(0.05)
        assert _scanned(survivor)  # thawed: a later full collection would reclaim it if it were garbage
    finally:
        policy.stop()


def _scanned(obj: object) -> bool:
    """Whether the collector still walks the object (frozen ones are in no generation)."""
    return any(candidate is obj for candidate in gc.get_objects())
