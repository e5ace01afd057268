"""A component's Events go through client-go's broadcaster: recording returns at once, one sender writes
them in the order recorded, a flood beyond the queue is dropped and counted, and stopping drops what is
still queued."""

from __future__ import annotations

import asyncio
from typing import Any

from tenantgpu.kubeclient.eventsink import EventBroadcaster


class SlowAPI:
    """Stands in for the API: each create takes a moment and at most one may be in flight."""

    def __init__(self) -> None:
        self.written: list[tuple[str, str, str]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def create_event(self, involved: dict[str, Any], **fields: Any) -> dict[str, Any]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await self.gate.wait()
        await asyncio.sleep(0.001)
        self.in_flight -= 1
        self.written.append((involved["metadata"]["name"], fields["reason"], fields["type"]))
        return {}


def _pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": name}}


async def test_events_are_written_after_the_caller_goes_on_one_at_a_time_in_order() -> None:
    api = SlowAPI()
    recorder = EventBroadcaster(api, "hami-scheduler")  # type: ignore[arg-type]
    for i in range(5):
        recorder.record(_pod(f"p{i}"), "BindingSucceed", "bound")
    assert api.written == []  # recording did not wait for the API
    recorder.record(_pod("p5"), "FilteringFailed", "no node", warning=True)
    await recorder.flush()
    assert api.written == [
        *((f"p{i}", "BindingSucceed", "Normal") for i in range(5)),
        ("p5", "FilteringFailed", "Warning"),
    ]
    assert api.most_in_flight == 1
    await recorder.close()


async def test_a_flood_beyond_the_queue_is_dropped_and_stopping_drops_what_waits() -> None:
    api = SlowAPI()
    api.gate.clear()  # the API does not answer for now
    recorder = EventBroadcaster(api, "kubelet", max_queued=3)  # type: ignore[arg-type]
    recorder.record(_pod("first"), "Started", "")
    await asyncio.sleep(0.01)  # the sender has taken `first` and waits on the API
    for i in range(5):
        recorder.record(_pod(f"q{i}"), "Started", "")
    assert recorder.dropped == 2  # three queued behind `first`, two dropped
    await recorder.close()
    api.gate.set()
    await asyncio.sleep(0.01)
    assert api.written == []  # nothing queued was written after the stop
    recorder.record(_pod("after"), "Started", "")  # a stopped recorder starts its sender again
    await recorder.flush()
    assert api.written == [("after", "Started", "Normal")]
    await recorder.close()
