"""A CronJob's `schedule` as kube reads it (robfig/cron's standard parser), in its `timeZone`.

Five fields (minute, hour, day of month, month, day of week; a restricted day of month and day of week
match either, as in Vixie cron), or a descriptor: `@yearly`/`@annually`, `@monthly`, `@weekly`,
`@daily`/`@midnight`, `@hourly`, `@every <duration>`. croniter computes the field schedules.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from dataclasses import dataclass

from croniter import croniter

__all__ = ["CronSchedule", "ScheduleError", "parse_schedule", "time_zone_error", "zone"]

_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


class ScheduleError(ValueError):
    """The schedule does not parse; the message is what kube's validation says after the value."""


@dataclass(frozen=True)
class CronSchedule:
    """`next_after(t)`: the first scheduled moment strictly after `t` (an aware datetime)."""

    expression: str  # five fields, or "" for an @every interval
    every: dt.timedelta | None = None

    def next_after(self, moment: dt.datetime, zone: dt.tzinfo) -> dt.datetime:
        if self.every is not None:
            # robfig: the interval counts from the moment given, to the whole second.
            return (moment + self.every).replace(microsecond=0)
        local = moment.astimezone(zone)
        following: dt.datetime = croniter(self.expression, local).get_next(dt.datetime)
        return following.astimezone(dt.UTC)


def _parse_duration(text: str) -> dt.timedelta:
    if not text or _GO_DURATION.sub("", text) != "":
        raise ScheduleError(f'failed to parse duration @every {text}: time: invalid duration "{text}"')
    seconds = sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _GO_DURATION.findall(text))
    # robfig rounds intervals under a second up to one second.
    return dt.timedelta(seconds=max(seconds, 1.0))


def parse_schedule(text: str) -> CronSchedule:
    """The schedule, or ScheduleError with robfig's words for what is wrong."""
    spec = text.strip()
    if spec.startswith("@every "):
        return CronSchedule("", _parse_duration(spec[len("@every ") :].strip()))
    if spec.startswith("@"):
        expression = _DESCRIPTORS.get(spec)
        if expression is None:
            raise ScheduleError(f"unrecognized descriptor: {spec}")
        return CronSchedule(expression)
    fields = spec.split()
    if len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    if not croniter.is_valid(spec):
        raise ScheduleError(f"failed to parse schedule: {spec}")
    return CronSchedule(spec)


def time_zone_error(name: str) -> str:
    """Why `spec.timeZone` is not a zone kube accepts, or "" when it is."""
    if name == "" or name.lower() == "local":
        return "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {name}"
    return ""


def zone(name: str | None) -> dt.tzinfo:
    """The zone a CronJob's times are in: its `timeZone`, else the controller's, which is UTC here."""
    return zoneinfo.ZoneInfo(name) if name else dt.UTC
