"""Quantities read as Kubernetes reads them, so limits and quotas compare exactly."""

from decimal import Decimal
from typing import Any

import pytest

from tenantgpu.apiserver.defaults import default
from tenantgpu.apiserver.quantity import (
    QuantityError,
    canonical_quantity,
    canonicalize_list,
    format_quantity,
    parse_quantity,
)


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


# resource.Quantity's String() after parsing, as apimachinery's quantity.go computes it (CanonicalizeBytes):
# the suffix family the value was written in; decimal mantissas with their trailing zeros taken out in
# groups of three; binary ones only when whole and at least 1024; finer than nano rounded up.
@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        (1, "1"),
        (3000, "3k"),
        ("3000", "3k"),
        (30, "30"),
        ("1500", "1500"),
        ("23034", "23034"),
        (0.5, "500m"),
        ("0.1", "100m"),
        ("1.5", "1500m"),
        ("2000m", "2"),
        ("0", "0"),
        ("0Gi", "0"),
        ("-1", "-1"),
        ("1024Mi", "1Gi"),
        ("1000Mi", "1000Mi"),
        ("1.5Gi", "1536Mi"),
        ("65536Mi", "64Gi"),
        ("0.5Ki", "512"),
        ("1Ki", "1Ki"),
        ("1e3", "1e3"),
        ("1E3", "1e3"),
        ("1.5e3", "1500"),
        ("2e-2", "20e-3"),
        ("0.0000000001", "1n"),
    ],
)
def test_quantities_are_written_back_as_kube_apiserver_writes_them(
    written: str | int | float, canonical: str
) -> None:
    assert canonical_quantity(written) == canonical


def test_a_resource_list_is_canonicalised_in_place_and_leaves_non_quantities_to_validation() -> None:
    limits: dict[str, object] = {"cpu": 0.5, "nvidia.com/gpumem": 3000, "memory": "lots", "flag": True}
    canonicalize_list(limits)
    assert limits == {"cpu": "500m", "nvidia.com/gpumem": "3k", "memory": "lots", "flag": True}
    # a pod's emptyDir limit is a quantity too, the volume's other fields are not
    pod: dict[str, Any] = {
        "spec": {
            "containers": [{"name": "c", "image": "x"}],
            "volumes": [{"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "1024Mi"}}],
        }
    }
    default("Pod", pod)
    assert pod["spec"]["volumes"][0]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}


def test_exponents_beyond_decimals_range_are_refused_not_a_server_error() -> None:
    """`cpu: 1e1000000` (which kubectl sends as `10e999999`) once raised decimal.Overflow out of the
    parser, which the API answered with a 500; it is refused as any malformed quantity is, in both
    directions, and the bound itself parses."""
    assert parse_quantity("1e999999") == Decimal("1e999999")
    for text in ("1e1000000", "10e999999", "1e-1000000", "0.1e-999999", "2E+1000001"):
        with pytest.raises(QuantityError):
            parse_quantity(text)
