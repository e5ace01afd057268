"""Codecs for HAMi's node register annotation and the pod device annotations (`pkg/device/devices.go`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tenantgpu.gpushare.device import ContainerDevice, DeviceInfo

DEVICE_SEPARATOR = ":"  # HAMi's OneContainerMultiDeviceSplitSymbol
CONTAINER_SEPARATOR = ";"  # HAMi's OnePodMultiContainerSplitSymbol
_INT32_MAX = 2**31 - 1


class CodecError(ValueError):
    """An annotation value HAMi's decoder would refuse."""


def encode_node_register(devices: Sequence[DeviceInfo]) -> str:
    """The v2.10 JSON for `hami.io/node-nvidia-register`: Go's field order, zero values omitted."""
    items = []
    for d in devices:
        entry: dict[str, Any] = {}
        for key, value in (
            ("id", d.id),
            ("index", d.index),
            ("count", d.count),
            ("devmem", d.devmem),
            ("devcore", d.devcore),
            ("type", d.type),
            ("numa", d.numa),
            ("mode", d.mode),
            ("health", d.health),
        ):
            if value:
                entry[key] = value
        items.append(entry)
    return json.dumps(items, separators=(",", ":"))


def decode_node_register(text: str, *, decode_legacy: bool = True) -> list[DeviceInfo]:
    """Devices from `hami.io/node-nvidia-register`: v2.10 JSON, or (decode_legacy) the <=v2.7 `a,b,...:` form.

    HAMi v2.10's scheduler itself reads only JSON; pass decode_legacy=False to behave exactly so.
    """
    stripped = text.strip()
    if stripped.startswith("[") or stripped in ("null", ""):
        return _decode_json(stripped)
    if not decode_legacy:
        raise CodecError("node register annotation is not JSON")
    return _decode_legacy(text)


def _int_field(entry: dict[str, Any], key: str, *, minimum: int = 0) -> int:
    value = entry.get(key, 0)
    if type(value) is int and minimum <= value <= _INT32_MAX:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= _INT32_MAX:
        raise CodecError(f"node register field {key!r} must be an integer >= {minimum}, got {value!r}")
    return value


def _decode_json(text: str) -> list[DeviceInfo]:
    try:
        raw = json.loads(text) if text else None
    except json.JSONDecodeError as exc:
        raise CodecError(f"node register annotation is not valid JSON: {exc.msg}") from exc
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise CodecError("node register annotation must be a JSON array")
    devices = []
    for entry in raw:
        if not isinstance(entry, dict):
            raise CodecError("node register entries must be JSON objects")
        for key in ("id", "type", "mode"):
            if not isinstance(entry.get(key, ""), str):
                raise CodecError(f"node register field {key!r} must be a string")
        if not isinstance(entry.get("health", False), bool):
            raise CodecError("node register field 'health' must be a boolean")
        devices.append(
            DeviceInfo(
                id=entry.get("id", ""),
                index=_int_field(entry, "index"),
                count=_int_field(entry, "count"),
                devmem=_int_field(entry, "devmem"),
                devcore=_int_field(entry, "devcore"),
                type=entry.get("type", ""),
                numa=_int_field(entry, "numa", minimum=-(2**31)),
                mode=entry.get("mode", ""),
                health=entry.get("health", False),
            )
        )
    return devices


def _decode_legacy(text: str) -> list[DeviceInfo]:
    if DEVICE_SEPARATOR not in text:
        raise CodecError("node annotation missing device separator")
    devices = []
    for segment in text.split(DEVICE_SEPARATOR):
        if not segment:
            continue
        items = segment.split(",")
        if len(items) not in (7, 9):
            raise CodecError(f"unexpected field count {len(items)} in node annotation")
        try:
            count, devmem, devcore, numa = int(items[1]), int(items[2]), int(items[3]), int(items[5])
            index = int(items[7]) if len(items) == 9 else 0
        except ValueError as exc:
            raise CodecError(f"malformed number in node annotation segment {segment!r}") from exc
        health = _parse_go_bool(items[6])
        if index < 0:
            raise CodecError(f"index field must not be negative: {index}")
        devices.append(
            DeviceInfo(
                id=items[0],
                index=index,
                count=count,
                devmem=devmem,
                devcore=devcore,
                type=items[4],
                numa=numa,
                mode=items[8] if len(items) == 9 else "hami-core",
                health=health,
            )
        )
    return devices


def _parse_go_bool(text: str) -> bool:
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise CodecError(f"invalid health field: {text!r}")


def encode_legacy_node_register(devices: Sequence[DeviceInfo]) -> str:
    """The <=v2.7 9-field form (`UUID,count,devmem,devcore,type,numa,health,index,mode:`), for old nodes."""
    return "".join(
        f"{d.id},{d.count},{d.devmem},{d.devcore},{d.type},{d.numa},{'true' if d.health else 'false'},"
        f"{d.index},{d.mode}{DEVICE_SEPARATOR}"
        for d in devices
    )


def encode_container_devices(devices: Sequence[ContainerDevice]) -> str:
    return "".join(f"{d.uuid},{d.type},{d.usedmem},{d.usedcores}{DEVICE_SEPARATOR}" for d in devices)


def encode_pod_devices(containers: Sequence[Sequence[ContainerDevice]]) -> str:
    """`hami.io/vgpu-devices-allocated`: per device `UUID,NVIDIA,mem,cores:`, per container `;`."""
    return "".join(encode_container_devices(c) + CONTAINER_SEPARATOR for c in containers)


def decode_container_devices(text: str) -> list[ContainerDevice]:
    devices = []
    for part in text.split(DEVICE_SEPARATOR):
        if "," not in part:
            continue
        fields = part.split(",")
        if len(fields) < 4:
            raise CodecError("pod annotation format error, missing fields, do not use nodeName in task spec")
        try:
            mem, cores = int(fields[2]), int(fields[3])
        except ValueError as exc:
            raise CodecError(f"invalid memory or core field in {part!r}") from exc
        devices.append(ContainerDevice(uuid=fields[0], type=fields[1], usedmem=mem, usedcores=cores))
    return devices


def decode_pod_devices(text: str) -> list[list[ContainerDevice]]:
    """Container segments of a pod device annotation, empty segments kept (they align containers).

    HAMi's decoder also returns the empty piece after the final `;`; it carries nothing, so it is
    dropped here and `decode_pod_devices(encode_pod_devices(x)) == x`.
    """
    if not text:
        return []
    segments = text.split(CONTAINER_SEPARATOR)
    if segments[-1] == "":
        segments.pop()
    return [decode_container_devices(s) for s in segments]
