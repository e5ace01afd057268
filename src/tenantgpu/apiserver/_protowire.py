"""The protobuf wire format at its smallest: varints and length-delimited fields, read and written by hand."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

VARINT, FIXED64, BYTES, FIXED32 = 0, 1, 2, 5


class ProtobufError(ValueError):
    """Bytes that are not the protobuf message they claim to be."""


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint starting at `at` and the offset just after it."""
    value = 0
    shift = 0
    while True:
        if at >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """Each (field number, wire type, value) of a message; length-delimited values are bytes."""
    at = 0
    while at < len(data):
        key, at = read_varint(data, at)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError("field number 0")
        if wire == VARINT:
            value, at = read_varint(data, at)
        elif wire == BYTES:
            length, at = read_varint(data, at)
            if at + length > len(data):
                raise ProtobufError("truncated length-delimited field")
            value, at = data[at : at + length], at + length
        elif wire in (FIXED64, FIXED32):
            size = 8 if wire == FIXED64 else 4
            if at + size > len(data):
                raise ProtobufError("truncated fixed-size field")
            value, at = data[at : at + size], at + size
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        yield number, wire, value


def text(value: Any) -> str:
    """A length-delimited field read as UTF-8 text."""
    if not isinstance(value, bytes):
        raise ProtobufError("expected a length-delimited string")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ProtobufError("string field is not UTF-8") from error


def varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_bytes(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | BYTES) + varint(len(payload)) + payload


def field_text(number: int, value: str) -> bytes:
    return field_bytes(number, value.encode())


def field_varint(number: int, value: int) -> bytes:
    return varint(number << 3 | VARINT) + varint(value)
