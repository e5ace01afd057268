"""Kubernetes resource quantities ("500m", "1Gi", "2e3") as exact fractions, and Go's integer views."""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}  # fmt: skip
_PATTERN = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))((?:[KMGTPE]i)|[eE][+-]?[0-9]+|[numkMGTPE])?$")
_INT64_MAX = 2**63 - 1
_FORMAT_MESSAGE = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"  # kube's, word for word
# The API server's bound (apiserver/quantity.py's MAX_EXPONENT; gpushare imports nothing from it).
_MAX_EXPONENT = 999_999


class QuantityError(ValueError):
    """A string that is not a Kubernetes resource quantity."""


_WHOLE_SUFFIX = {**_BINARY, "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_SIMPLE = re.compile(r"^([0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a Kubernetes quantity; raises QuantityError for anything kubectl would refuse.

    Whole values come back as `int` (a Fraction in all but name), which keeps the common case fast.
    """
    if type(value) is int:
        return value  # type: ignore[return-value]
    if type(value) is str:
        simple = _SIMPLE.match(value)
        if simple:
            digits, suffix = simple.groups()
            if suffix == "m":
                milli = int(digits)
                return milli // 1000 if milli % 1000 == 0 else Fraction(milli, 1000)  # type: ignore[return-value]
            return int(digits) * _WHOLE_SUFFIX[suffix or ""]  # type: ignore[return-value]
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantities must be finite: {value!r}")
        return Fraction(Decimal(repr(value)))
    if not isinstance(value, str):
        raise QuantityError(f"quantities must be strings or numbers, not {type(value).__name__}")
    match = _PATTERN.match(value.strip())
    if not match:
        raise QuantityError(_FORMAT_MESSAGE)
    number, suffix = match.group(1), match.group(2) or ""
    try:
        base = Fraction(Decimal(number))
    except InvalidOperation as exc:  # pragma: no cover - the regex already vetted the digits
        raise QuantityError(f"bad number in quantity {value!r}") from exc
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix[:1] in ("e", "E"):
        exponent = int(suffix[1:])
        if abs(Decimal(number).adjusted() + exponent) > _MAX_EXPONENT:
            # The lab's API server refuses these too; an exact power of ten this large would take
            # seconds to build (1e9999999: about 6 s), so a manifest could stall plan or capacity.
            raise QuantityError(_FORMAT_MESSAGE)
        return base * (Fraction(10) ** exponent)
    return base * _DECIMAL[suffix]


def as_int64(value: str | int | float) -> int | None:
    """Go's Quantity.AsInt64: the value when it is a whole number that fits in int64, else None."""
    q = parse_quantity(value)
    if type(q) is int:
        return q if -_INT64_MAX - 1 <= q <= _INT64_MAX else None
    if q.denominator != 1 or not (-_INT64_MAX - 1 <= q.numerator <= _INT64_MAX):
        return None
    return q.numerator


def ceil_value(value: str | int | float) -> int:
    """Go's Quantity.Value: the value rounded up to a whole number (so "500m" is 1)."""
    return math.ceil(parse_quantity(value))
