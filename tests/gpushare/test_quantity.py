"""Kubernetes quantities parse as kubectl reads them; Go's AsInt64 and Value views as HAMi uses them."""

from fractions import Fraction

import pytest

from tenantgpu.apiserver.quantity import MAX_EXPONENT
from tenantgpu.gpushare.quantity import QuantityError, as_int64, ceil_value, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1),
        ("500m", Fraction(1, 2)),
        ("1Gi", 2**30),
        ("2k", 2000),
        ("1e3", 1000),
        ("0.5", Fraction(1, 2)),
        (3, 3),
        ("100Mi", 100 * 2**20),
        ("+4", 4),
    ],
)
def test_parse(text: str | int, value: Fraction | int) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "5 GB", "1Qi", True])
def test_bad_quantities_are_refused(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)  # type: ignore[arg-type]


def test_as_int64_refuses_fractions_like_go() -> None:
    """k8s.io/apimachinery Quantity.AsInt64: only whole numbers; HAMi then ignores the resource."""
    assert as_int64("2000m") == 2
    assert as_int64("1500m") is None
    assert as_int64("1.5") is None


def test_value_rounds_up() -> None:
    assert ceil_value("500m") == 1
    assert ceil_value("101") == 101


def test_exponents_the_api_server_refuses_are_refused_here_too() -> None:
    """An exact 10**9999999 takes seconds to build, so a manifest with it stalled `tenantgpu plan`; the
    bound is the API server's (tenantgpu.apiserver.quantity.MAX_EXPONENT)."""
    assert parse_quantity(f"1e{MAX_EXPONENT}") == 10**MAX_EXPONENT
    for text in (f"1e{MAX_EXPONENT + 1}", f"10e{MAX_EXPONENT}", f"1e-{MAX_EXPONENT + 1}", "1e9999999"):
        with pytest.raises(QuantityError):
            parse_quantity(text)
