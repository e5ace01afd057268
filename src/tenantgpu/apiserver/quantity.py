"""Kubernetes resource.Quantity strings (`100m`, `1Gi`, `1e3`, `2k`) read into exact decimals."""

from __future__ import annotations

import functools
import re
from decimal import Decimal, InvalidOperation

__all__ = ["QUANTITY_FORMAT_MESSAGE", "QuantityError", "format_quantity", "parse_quantity"]

QUANTITY_FORMAT_MESSAGE = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)

_GRAMMAR = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


@functools.lru_cache(maxsize=4096)
def parse_quantity(text: str | int | float) -> Decimal:
    """The exact value of a quantity: `parse_quantity("1Gi") == 1073741824`, `parse_quantity("100m") == 0.1`.

    JSON numbers are accepted too, because manifests often carry `cpu: 2` unquoted.
    """
    if isinstance(text, bool):
        raise QuantityError(QUANTITY_FORMAT_MESSAGE)
    if isinstance(text, (int, float)):
        return Decimal(str(text))
    if not isinstance(text, str):
        raise QuantityError(QUANTITY_FORMAT_MESSAGE)
    return _parse_text(text)


@functools.lru_cache(maxsize=1024)
def _parse_text(text: str) -> Decimal:
    # Pods repeat a handful of quantities ("100m", "1Gi"); a Decimal is immutable, so one parse serves all.
    match = _GRAMMAR.match(text) if text == text.strip() else None
    if not match:
        raise QuantityError(QUANTITY_FORMAT_MESSAGE)
    number = Decimal(match["number"])
    suffix = match["suffix"] or ""
    try:
        if suffix in _BINARY:
            return number * _BINARY[suffix]
        if suffix in _DECIMAL:
            return number * _DECIMAL[suffix]
        return number.scaleb(int(suffix[1:]))
    except (InvalidOperation, ValueError, OverflowError):
        raise QuantityError(QUANTITY_FORMAT_MESSAGE) from None


def format_quantity(value: Decimal) -> str:
    """A short canonical-looking rendering (`2`, `500m`, `1Gi`) for messages and printed columns."""
    if value == value.to_integral_value():
        whole = int(value)
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if whole and whole % _BINARY[suffix] == 0 and abs(whole) >= 1024:
                return f"{whole // _BINARY[suffix]}{suffix}"
        return str(whole)
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return format(value.normalize(), "f")
