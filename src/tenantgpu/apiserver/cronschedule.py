"""A CronJob's `schedule` as kube reads it (robfig/cron's standard parser), in its `timeZone`.

Five fields (minute, hour, day of month, month, day of week; when neither day field is a star, a day
matching either runs), or a descriptor: `@yearly`/`@annually`, `@monthly`, `@weekly`,
`@daily`/`@midnight`, `@hourly`, `@every <duration>`. The fields are read here as robfig reads them,
with its error messages, which kube's validation returns (`end of range (61) above maximum (59): 61`);
croniter then computes the times from the values read.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from dataclasses import dataclass

from croniter import croniter

from tenantgpu.goquote import go_quote, time_quote

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


@dataclass(frozen=True)
class _Bounds:
    low: int
    high: int
    names: tuple[str, ...] = ()  # the names of low, low + 1, …

    def named(self, text: str) -> int | None:
        lowered = text.lower()
        return self.names.index(lowered) + self.low if lowered in self.names else None


# robfig's standard fields: minute, hour, day of month, month (jan…dec), day of week (sun…sat, 0…6;
# 7 is not Sunday there).
_FIELDS = (
    _Bounds(0, 59),
    _Bounds(0, 23),
    _Bounds(1, 31),
    _Bounds(1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")),
    _Bounds(0, 6, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)

# Go's time.ParseDuration units, in seconds.
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]*)")


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


def parse_go_duration(text: str) -> float:
    """Seconds, as Go's time.ParseDuration reads `text` (`1h30m`, `.5s`, `-2m`), or ScheduleError
    with its words (`time: unknown unit "d" in duration "1d"`)."""
    original, rest, sign = text, text, 1.0
    if rest[:1] in ("-", "+"):
        sign, rest = (-1.0 if rest[0] == "-" else 1.0), rest[1:]
    if rest == "0":
        return 0.0
    if rest == "":
        raise ScheduleError(f"time: invalid duration {time_quote(original)}")
    total = 0.0
    while rest:
        match = _DURATION_PART.match(rest)
        assert match is not None  # every group may be empty
        whole, fraction, unit = match[1], match[2], match[3]
        if not whole and not fraction:
            raise ScheduleError(f"time: invalid duration {time_quote(original)}")
        if not unit:
            raise ScheduleError(f"time: missing unit in duration {time_quote(original)}")
        if unit not in _UNIT_SECONDS:
            raise ScheduleError(f"time: unknown unit {time_quote(unit)} in duration {time_quote(original)}")
        total += float(f"{whole or 0}.{fraction or 0}") * _UNIT_SECONDS[unit]
        rest = rest[match.end() :]
    return sign * total


def _number(text: str) -> int:
    # Go's strconv.Atoi: an optional sign and decimal digits, within 64 bits.
    reason = ""
    if not re.fullmatch(r"[+-]?\d+", text):
        reason = "invalid syntax"
    elif not -(2**63) <= int(text) < 2**63:
        reason = "value out of range"
    if reason:
        raise ScheduleError(
            f"failed to parse int from {text}: strconv.Atoi: parsing {go_quote(text)}: {reason}"
        )
    number = int(text)
    if number < 0:
        raise ScheduleError(f"negative number ({number}) not allowed: {text}")
    return number


def _number_or_name(text: str, bounds: _Bounds) -> int:
    named = bounds.named(text)
    return named if named is not None else _number(text)


def _range(expr: str, bounds: _Bounds) -> tuple[set[int], bool]:
    """One comma-separated part of a field: its values, and whether it is a star (`*` or `?` with a
    step of one), which matters for how day of month and day of week combine."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    star = low_and_high[0] in ("*", "?")
    if star:
        start, end = bounds.low, bounds.high
    else:
        start = _number_or_name(low_and_high[0], bounds)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _number_or_name(low_and_high[1], bounds)
        else:
            raise ScheduleError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _number(range_and_step[1])
        if len(low_and_high) == 1:  # `N/step` means `N-max/step`
            end = bounds.high
        star = star and step <= 1
    else:
        raise ScheduleError(f"too many slashes: {expr}")
    if start < bounds.low:
        raise ScheduleError(f"beginning of range ({start}) below minimum ({bounds.low}): {expr}")
    if end > bounds.high:
        raise ScheduleError(f"end of range ({end}) above maximum ({bounds.high}): {expr}")
    if start > end:
        raise ScheduleError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise ScheduleError(f"step of range should be a positive number: {expr}")
    return set(range(start, end + 1, step)), star


def _field(text: str, bounds: _Bounds) -> str:
    """The field as croniter reads it with robfig's meaning: `*` where robfig marks a star, else the
    values listed."""
    values: set[int] = set()
    star = False
    for expr in (part for part in text.split(",") if part):
        found, is_star = _range(expr, bounds)
        values |= found
        star = star or is_star
    if star:
        return "*"
    return ",".join(str(v) for v in sorted(values)) if values else "*"


def parse_schedule(text: str) -> CronSchedule:
    """The schedule as robfig/cron's standard parser (kube's) reads it, or ScheduleError with its words
    for what is wrong. A `TZ=`/`CRON_TZ=` prefix is read past, as robfig does; kube's validation refuses
    it on its own."""
    spec = text
    if not spec:
        raise ScheduleError("empty spec string")
    if spec.startswith(("TZ=", "CRON_TZ=")) and " " in spec:
        name = spec[spec.index("=") + 1 : spec.index(" ")]
        if time_zone_error(name):
            raise ScheduleError(f"provided bad location {name}: unknown time zone {name}")
        spec = spec[spec.index(" ") :].strip()
    if spec.startswith("@"):
        expression = _DESCRIPTORS.get(spec)
        if expression is not None:
            return CronSchedule(expression)
        if spec.startswith("@every "):
            try:
                seconds = parse_go_duration(spec[len("@every ") :])
            except ScheduleError as error:
                raise ScheduleError(f"failed to parse duration {spec}: {error}") from None
            # robfig's Every: whole seconds, and at least one.
            return CronSchedule("", dt.timedelta(seconds=max(int(seconds), 1)))
        raise ScheduleError(f"unrecognized descriptor: {spec}")
    fields = spec.split()
    if len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    return CronSchedule(" ".join(_field(f, b) for f, b in zip(fields, _FIELDS, strict=True)))


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
