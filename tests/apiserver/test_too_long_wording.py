"""field.TooLong and field.TooLongMaxLength in the words of each release: kube 1.32 made both `may not be
more than N bytes` (apimachinery v0.31.0 against v0.32.0, util/validation/field/errors.go)."""

from __future__ import annotations

from tenantgpu.apiserver import errors

CAUSES = [
    {"reason": "FieldValueTooLong", "message": "Too long: must have at most 253 bytes", "field": "spec.a"},
    {"reason": "FieldValueTooLong", "message": "Too long: may not be longer than 8", "field": "spec.b"},
    {
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "Too long: may not be longer than 8"',
        "field": "c",
    },
]


def test_a_1_31_tenant_keeps_both_older_wordings() -> None:
    error = errors.invalid("Widget", "w", "example.com", CAUSES)
    assert errors.worded_for(error, 31) is error


def test_from_1_32_both_say_may_not_be_more_than_n_bytes_and_other_causes_stay() -> None:
    error = errors.invalid("Widget", "w", "example.com", CAUSES)
    for minor in (32, 33, None):
        worded = errors.worded_for(error, minor)
        assert [c["message"] for c in worded.details["causes"]] == [
            "Too long: may not be more than 253 bytes",
            "Too long: may not be more than 8 bytes",
            'Invalid value: "Too long: may not be longer than 8"',
        ]
        assert worded.message == (
            'Widget.example.com "w" is invalid: [spec.a: Too long: may not be more than 253 bytes, '
            'spec.b: Too long: may not be more than 8 bytes, c: Invalid value: "Too long: may not be longer than 8"]'
        )
        assert worded.status()["code"] == 422
