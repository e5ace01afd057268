"""Kubernetes resource.Quantity strings (`100m`, `1Gi`, `1e3`, `2k`) read into exact decimals."""

from __future__ import annotations

import contextlib
import functools
import re
from decimal import ROUND_UP, Decimal, InvalidOperation, Overflow

__all__ = [
    "QUANTITY_FORMAT_MESSAGE",
    "QuantityError",
    "canonical_or_same",
    "canonical_quantity",
    "canonicalize_list",
    "format_quantity",
    "parse_quantity",
]

QUANTITY_FORMAT_MESSAGE = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)

# The largest power of ten a quantity's leading digit may stand at: Decimal's default Emax.
MAX_EXPONENT = 999_999

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
        exponent = int(suffix[1:])
        if abs(number.adjusted() + exponent) > MAX_EXPONENT:
            # Beyond Decimal's default range the value is no longer exact or raises decimal.Overflow
            # (a 500 once; kubectl sends `1e1000000` as `10e999999`); gpushare refuses the same values.
            raise QuantityError(QUANTITY_FORMAT_MESSAGE)
        return number.scaleb(exponent)
    except (InvalidOperation, ValueError, OverflowError, Overflow):
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


_SI_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIX = {0: "", 1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}
_NANO = Decimal("1e-9")


@functools.lru_cache(maxsize=4096)
def canonical_quantity(value: str | int | float) -> str:
    """How kube-apiserver writes a quantity back once it has decoded it (resource.Quantity's String):
    `3000` → `3k`, `0.5` → `500m`, `1024Mi` → `1Gi`, `1.5Gi` → `1536Mi`, `2000m` → `2`, `1e3` → `1e3`.

    The suffix family is the one the value was written in: binary suffixes stay binary when the value
    is whole and at least 1024, and become decimal otherwise. Raises QuantityError like `parse_quantity`.
    """
    exact = parse_quantity(value)
    suffix = ""
    if isinstance(value, str):
        match = _GRAMMAR.match(value)
        suffix = (match["suffix"] or "") if match else ""
    finest = exact.as_tuple().exponent
    if isinstance(finest, int) and finest < -9:
        with contextlib.suppress(InvalidOperation):
            exact = exact.quantize(_NANO, rounding=ROUND_UP)  # finer than nano: kube rounds up
    if exact == 0:
        return "0"
    if suffix in _BINARY and abs(exact) >= 1024 and exact == exact.to_integral_value():
        whole, power = int(exact), 0
        while whole % 1024 == 0 and power < 6:
            whole //= 1024
            power += 1
        return f"{whole}{_BINARY_SUFFIX[power]}"
    sign, digits, exponent = exact.normalize().as_tuple()
    mantissa = int("".join(map(str, digits))) * (-1 if sign else 1)
    shift = exponent % 3  # Python's modulo is never negative: step down to the multiple of 3 below
    mantissa *= 10**shift
    exponent -= shift  # type: ignore[operator]
    if suffix[:1] in ("e", "E"):
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    if exponent in _SI_SUFFIX:
        return f"{mantissa}{_SI_SUFFIX[exponent]}"
    return f"{mantissa}e{exponent}"


def canonical_or_same(value: object) -> object:
    """A quantity in its canonical form; anything that is not one as it is, for validation to refuse."""
    if type(value) is str or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        try:
            return canonical_quantity(value)
        except QuantityError:
            pass
    return value


def canonicalize_list(resources: object) -> None:
    """Rewrite a ResourceList's quantities (`{"cpu": 0.5, "memory": "1024Mi"}`) in their canonical form,
    in place."""
    if not isinstance(resources, dict):
        return
    for name, value in resources.items():  # replacing values keeps the dict the same size
        resources[name] = canonical_or_same(value)
