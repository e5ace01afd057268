"""The suite reads HAMi's annotations on its own: v2.10 JSON (with omitempty), the legacy form, pod devices."""

from __future__ import annotations

import pytest

from tenantgpu.validate import hami


def test_json_register_with_omitted_index_and_health() -> None:
    value = (
        '[{"id":"GPU-a","count":10,"devmem":23034,"devcore":100,"type":"NVIDIA L4","mode":"hami-core","health":true},'
        '{"id":"GPU-b","index":1,"count":10,"devmem":23034,"devcore":100,"type":"NVIDIA L4","numa":1,"mode":"hami-core"}]'
    )
    gpus = hami.decode_register(value)
    assert [(g.uuid, g.index, g.health) for g in gpus] == [("GPU-a", 0, True), ("GPU-b", 1, False)]
    assert gpus[0].devmem == 23034 and gpus[0].count == 10 and gpus[0].type == "NVIDIA L4"


def test_legacy_register_nine_fields() -> None:
    value = "GPU-l4-0,10,23034,100,NVIDIA-NVIDIA L4,0,true,0,hami-core:GPU-l4-1,10,23034,100,NVIDIA-NVIDIA L4,1,true,1,hami-core:"
    gpus = hami.decode_register(value)
    assert [(g.uuid, g.index, g.type, g.health) for g in gpus] == [
        ("GPU-l4-0", 0, "NVIDIA-NVIDIA L4", True),
        ("GPU-l4-1", 1, "NVIDIA-NVIDIA L4", True),
    ]


def test_garbage_register_is_an_error() -> None:
    with pytest.raises(ValueError):
        hami.decode_register("GPU-x,10")


def test_pod_devices_per_container() -> None:
    containers = hami.decode_pod_devices(";GPU-a,NVIDIA,10240,0:GPU-b,NVIDIA,10240,0:;")
    assert [[d.uuid for d in c] for c in containers] == [[], ["GPU-a", "GPU-b"]]
    pod = {"metadata": {"annotations": {hami.DEVICES_ALLOCATED: "GPU-aaaa,NVIDIA,3000,30:;"}}}
    assert hami.allocated_uuids(pod) == ["GPU-aaaa"]
    assert hami.decode_pod_devices("GPU-aaaa,NVIDIA,3000,30:;")[0][0].usedcores == 30


def test_declared_types_are_compared_in_hamis_registered_form() -> None:
    from pathlib import Path

    from tenantgpu.lab.spec import load_lab
    from tenantgpu.validate.context import Expectations

    example = Path(__file__).resolve().parents[2] / "examples" / "three-tenants.yaml"
    expectations = Expectations.from_lab(load_lab(example))
    types = {g.type for node in expectations.nodes["inference"] for g in node.gpus}
    assert types == {"NVIDIA-Tesla T4", "NVIDIA A10"}
    assert expectations.nodes["research"][0].gpus[0].uuid == "GPU-0b5c0d8e-9d0e-4a6b-8f27-6e2a4c1b9a01"
