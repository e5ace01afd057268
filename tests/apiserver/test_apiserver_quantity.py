"""Quantities read as Kubernetes reads them, so limits and quotas compare exactly."""

from decimal import Decimal

import pytest

from tenantgpu.apiserver.quantity import QuantityError, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Decimal("0.1")),
        ("1", Decimal(1)),
        ("1.5", Decimal("1.5")),
        ("2k", Decimal(2000)),
        ("1Gi", Decimal(2**30)),
        ("5Mi", Decimal(5 * 2**20)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("2E", Decimal(2 * 10**18)),
        ("500u", Decimal("0.0005")),
        (".5", Decimal("0.5")),
        ("-1", Decimal(-1)),
        ("+3M", Decimal(3_000_000)),
        (3, Decimal(3)),
    ],
)
def test_quantities_have_their_exact_value(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1Gb", "1 Gi", "1.2.3", "Gi", "1ki", "--1", "1e", True])
def test_bad_quantities_are_rejected(text: str) -> None:
    with pytest.raises(QuantityError, match="quantities must match"):
        parse_quantity(text)


def test_format_quantity_is_short() -> None:
    assert format_quantity(Decimal("0.5")) == "500m"
    assert format_quantity(Decimal(2**30)) == "1Gi"
    assert format_quantity(Decimal(3)) == "3"
