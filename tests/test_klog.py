"""klog's text format and the bounded component log the lab's components write to."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from tenantgpu.klog import STARTUP_LIMIT, ComponentLog, Entry, go_map, kobj

# 2026-12-07 06:44:48.123456 UTC
AT = datetime(2026, 12, 7, 6, 44, 48, 123456, tzinfo=UTC).timestamp()


def test_a_structured_line_has_klogs_header_a_quoted_message_and_typed_values() -> None:
    entry = Entry(AT, "I", "scheduler.go:1068", "Starting schedule filter process",
                  (("pod", "web"), ("uid", "u-1"), ("count", 3), ("ok", True)))  # fmt: skip
    assert entry.render() == (
        'I1207 06:44:48.123456       1 scheduler.go:1068] "Starting schedule filter process"'
        ' pod="web" uid="u-1" count=3 ok=true'
    )
    assert entry.stamp() == "2026-12-07T06:44:48.123456Z"


def test_a_printf_line_is_written_as_formatted_and_quotes_in_values_are_escaped() -> None:
    assert (
        Entry(AT, "W", "webhook.go:100", "Processing admission hook for pod a/b, UID: ").render()
        == "W1207 06:44:48.123456       1 webhook.go:100] Processing admission hook for pod a/b, UID: "
    )
    assert (
        Entry(AT, "I", "x.go:1", "m", (("error", 'dial "x": refused'),))
        .render()
        .endswith('"m" error="dial \\"x\\": refused"')
    )


def test_error_s_puts_the_error_first_and_omits_it_when_there_is_none() -> None:
    log = ComponentLog()
    log.started()
    log.error("scheduler.go:1048", "node locked", "Failed to lock node", node="n1", pod=kobj("ns", "p"))
    log.error("client.go:1", None, "no error")
    first, second = log.lines()
    assert first.startswith("E") and first.endswith(
        '"Failed to lock node" err="node locked" node="n1" pod="ns/p"'
    )
    assert second.endswith('"no error"')


def test_go_map_sorts_keys_as_fmt_prints_a_map() -> None:
    assert go_map({"b": "2", "a": "1"}) == "map[a:1 b:2]"
    assert go_map({}) == "map[]"


def test_start_up_lines_are_kept_and_the_window_keeps_the_newest() -> None:
    log = ComponentLog(capacity=3)
    log.info("a.go:1", "boot")
    log.started()
    for i in range(5):
        log.info("a.go:2", "tick", i=i)
    assert log.written == 6
    assert [line.split("] ", 1)[1] for line in log.lines()] == [
        '"boot"', '"tick" i=2', '"tick" i=3', '"tick" i=4',
    ]  # fmt: skip
    # numbering counts every entry: 0 is "boot", 1..5 the ticks, of which 3..5 are left
    assert [e.values for e in log.since(4)] == [(("i", 3),), (("i", 4),)]
    assert len(log.since(0)) == 3 == log.window()
    assert log.since(6) == []


def test_lines_match_klogs_header_pattern() -> None:
    log = ComponentLog()
    log.infof("server.go:321", "Starting to serve 'nvidia.com/gpu' on /x.sock")
    [line] = log.lines()
    assert re.fullmatch(r"I\d{4} \d\d:\d\d:\d\d\.\d{6} {7}1 server\.go:321\] Starting to serve .*", line)


def test_a_component_that_never_starts_keeps_a_bounded_number_of_start_up_lines() -> None:
    log = ComponentLog(capacity=10)
    for i in range(STARTUP_LIMIT + 30):
        log.error("clientset.go:238", "connection refused", "cannot connect once", attempt=i)
    assert len(log.startup) == STARTUP_LIMIT and log.window() == 10
    assert len(log.lines()) == STARTUP_LIMIT + 10 and log.written == STARTUP_LIMIT + 30
