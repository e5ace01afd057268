"""A CronJob's schedule as kube reads it: robfig/cron v3's standard parser, which kube vendors and whose
error text kube's validation puts after the value (`spec.schedule: Invalid value: "61 * * * *": end of
range (61) above maximum (59): 61`). Facts read in vendor/github.com/robfig/cron/v3/parser.go: day of
week is 0–6 (7 is refused), `N/step` means `N-max/step`, `?` is `*`, names are case-insensitive, and a
day-of-month or day-of-week star makes the day fields combine with AND, else with OR."""

from __future__ import annotations

import datetime as dt

import pytest

from tenantgpu.apiserver.cronschedule import ScheduleError, parse_go_duration, parse_schedule


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("61 * * * *", "end of range (61) above maximum (59): 61"),
        ("0 24 * * *", "end of range (24) above maximum (23): 24"),
        ("0 0 * * 7", "end of range (7) above maximum (6): 7"),
        ("0 0 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("0 0 * 13 *", "end of range (13) above maximum (12): 13"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("*/2/3 * * * *", "too many slashes: */2/3"),
        ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        ("0 0 * * funday", 'failed to parse int from funday: strconv.Atoi: parsing "funday": invalid syntax'),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("0 0 0 * * *", "expected exactly 5 fields, found 6: [0 0 0 * * *]"),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ("@every 1d", 'failed to parse duration @every 1d: time: unknown unit "d" in duration "1d"'),
        ("@every 10", 'failed to parse duration @every 10: time: missing unit in duration "10"'),
        ("@every soon", 'failed to parse duration @every soon: time: invalid duration "soon"'),
    ],
)
def test_a_bad_schedule_gets_robfigs_words(schedule: str, message: str) -> None:
    with pytest.raises(ScheduleError) as refused:
        parse_schedule(schedule)
    assert str(refused.value) == message


UTC = dt.UTC
START = dt.datetime(2026, 12, 1, 0, 0, tzinfo=UTC)  # a Tuesday


def _next(schedule: str, count: int = 3, start: dt.datetime = START) -> list[str]:
    parsed = parse_schedule(schedule)
    times, moment = [], start
    for _ in range(count):
        moment = parsed.next_after(moment, UTC)
        times.append(moment.strftime("%m-%d %a %H:%M"))
    return times


def test_steps_names_and_question_marks_read_as_robfig_reads_them() -> None:
    assert _next("5/20 * * * *") == ["12-01 Tue 00:05", "12-01 Tue 00:25", "12-01 Tue 00:45"]
    assert _next("0 9 ? DEC mon-WED") == ["12-01 Tue 09:00", "12-02 Wed 09:00", "12-07 Mon 09:00"]
    assert _next("@every 90m") == ["12-01 Tue 01:30", "12-01 Tue 03:00", "12-01 Tue 04:30"]


def test_day_fields_combine_with_or_unless_one_is_a_star() -> None:
    # neither a star: the 10th of the month or any Friday
    assert _next("0 0 10 * 5") == ["12-04 Fri 00:00", "12-10 Thu 00:00", "12-11 Fri 00:00"]
    # a stepped star is no star for robfig: odd days of the month or any Monday (the 14th)
    after_the_10th = dt.datetime(2026, 12, 10, tzinfo=UTC)
    assert _next("0 0 */2 * 1", 4, after_the_10th) == [
        "12-11 Fri 00:00",
        "12-13 Sun 00:00",
        "12-14 Mon 00:00",
        "12-15 Tue 00:00",
    ]
    # a star in day of week: the day of month alone decides
    assert _next("0 0 15 * *", 2) == ["12-15 Tue 00:00", "01-15 Fri 00:00"]


def test_go_durations() -> None:
    assert parse_go_duration("1h30m") == 5400
    assert parse_go_duration(".5s") == 0.5
    assert parse_go_duration("-2m") == -120
    assert parse_go_duration("0") == 0
    with pytest.raises(ScheduleError, match=r'^time: invalid duration ""$'):
        parse_go_duration("")
