"""client-go's EventCorrelator (tools/record/events_cache.go, read for these facts): an event recorded again
is counted on the first, similar events with 10 different messages in 10 minutes are combined, and a
source gets 25 events about an object at once, then one every 5 minutes."""

from __future__ import annotations

from typing import Any

from tenantgpu.kubeclient.events import EventCorrelator


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Names:
    def __init__(self) -> None:
        self.made = 0

    def __call__(self, obj: str) -> tuple[str, str]:
        self.made += 1
        return f"{obj}.{self.made:x}", f"t{self.made}"


def event(
    message: str = "Error creating: refused", reason: str = "FailedCreate", obj: str = "web-1"
) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{obj}.new", "namespace": "apps"},
        "involvedObject": {
            "kind": "ReplicaSet",
            "namespace": "apps",
            "name": obj,
            "uid": "u-" + obj,
            "apiVersion": "apps/v1",
        },
        "reason": reason,
        "message": message,
        "type": "Warning",
        "source": {"component": "replicaset-controller"},
        "firstTimestamp": "t-now",
        "lastTimestamp": "t-now",
        "count": 1,
        "reportingComponent": "replicaset-controller",
        "reportingInstance": "",
    }


def test_a_repeat_patches_the_first_with_its_count() -> None:
    correlator, names = EventCorrelator(Clock()), Names()
    first = correlator.correlate(event(), name=names)
    assert first.patch is None and not first.skip
    assert first.event["metadata"]["name"] == "web-1.new"
    again = correlator.correlate({**event(), "lastTimestamp": "t-later"}, name=names)
    assert again.event["metadata"]["name"] == "web-1.new"
    assert again.patch == {"count": 2, "lastTimestamp": "t-later", "message": "Error creating: refused"}
    assert again.event["firstTimestamp"] == "t-now"
    third = correlator.correlate(event(), name=names)
    assert third.patch is not None and third.patch["count"] == 3
    # another object, reason or message is an event of its own
    assert correlator.correlate(event(obj="web-2"), name=names).patch is None
    assert correlator.correlate(event(reason="FailedDelete"), name=names).patch is None


def test_ten_different_messages_in_ten_minutes_are_combined() -> None:
    clock, names = Clock(), Names()
    correlator = EventCorrelator(clock)
    for i in range(9):
        out = correlator.correlate(event(f"attempt {i}"), name=names)
        assert out.patch is None and out.event["message"] == f"attempt {i}"
    combined = correlator.correlate(event("attempt 9"), name=names)
    assert combined.event["message"] == "(combined from similar events): attempt 9"
    assert combined.patch is None and combined.event["count"] == 1
    assert combined.event["metadata"]["name"] == "web-1.1"  # a name of its own
    later = correlator.correlate(event("attempt 10"), name=names)
    assert later.event["metadata"]["name"] == "web-1.1"
    assert later.patch is not None and later.patch["message"] == "(combined from similar events): attempt 10"
    assert later.patch["count"] == 2
    # after ten quiet minutes the group starts again
    clock.now += 601
    assert correlator.correlate(event("attempt 11"), name=names).event["message"] == "attempt 11"


def test_a_source_gets_25_events_about_an_object_then_one_each_5_minutes() -> None:
    clock, names = Clock(), Names()
    correlator = EventCorrelator(clock)
    kept = [not correlator.correlate(event(f"m{i}", reason=f"R{i}"), name=names).skip for i in range(30)]
    assert kept == [True] * 25 + [False] * 5
    assert not correlator.correlate(event("other object", obj="web-2"), name=names).skip
    clock.now += 299
    assert correlator.correlate(event("x", reason="X"), name=names).skip
    clock.now += 2
    assert not correlator.correlate(event("y", reason="Y"), name=names).skip
    assert correlator.correlate(event("z", reason="Z"), name=names).skip
