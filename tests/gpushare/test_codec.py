"""The register and pod device annotations encode and decode exactly as HAMi v2.10 writes and reads them."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenantgpu.gpushare import (
    CodecError,
    ContainerDevice,
    DeviceInfo,
    decode_node_register,
    decode_pod_devices,
    encode_node_register,
    encode_pod_devices,
)
from tenantgpu.gpushare.codec import encode_legacy_node_register

A = DeviceInfo(
    "GPU-aaaaaaaa-1111-2222-3333-444444444444",
    0,
    10,
    81920,
    100,
    "NVIDIA A100-SXM4-80GB",
    0,
    "hami-core",
    True,
)
B = [
    DeviceInfo("GPU-l4-0", 0, 10, 23034, 100, "NVIDIA L4", 0, "hami-core", True),
    DeviceInfo("GPU-l4-1", 1, 10, 23034, 100, "NVIDIA L4", 1, "hami-core", True),
]


def test_worked_example_a_is_byte_exact() -> None:
    """hami.md §2 example A: Go's json.Marshal of DeviceInfo, omitempty drops index 0 and numa 0."""
    assert encode_node_register([A]) == (
        '[{"id":"GPU-aaaaaaaa-1111-2222-3333-444444444444","count":10,"devmem":81920,"devcore":100,'
        '"type":"NVIDIA A100-SXM4-80GB","mode":"hami-core","health":true}]'
    )


def test_worked_example_b_is_byte_exact() -> None:
    assert encode_node_register(B) == (
        '[{"id":"GPU-l4-0","count":10,"devmem":23034,"devcore":100,"type":"NVIDIA L4",'
        '"mode":"hami-core","health":true},'
        '{"id":"GPU-l4-1","index":1,"count":10,"devmem":23034,"devcore":100,"type":"NVIDIA L4",'
        '"numa":1,"mode":"hami-core","health":true}]'
    )


def test_unhealthy_device_omits_health() -> None:
    """omitempty on a bool: health=false vanishes and decodes back to false."""
    sick = DeviceInfo("GPU-x", health=False, devmem=1, type="NVIDIA T4")
    text = encode_node_register([sick])
    assert "health" not in text
    assert decode_node_register(text)[0].health is False


def test_legacy_nine_field_form_decodes() -> None:
    """HAMi@v2.7.0 pkg/device/devices.go EncodeNodeDevices: 9 comma fields per device, ":" after each."""
    legacy = (
        "GPU-l4-0,10,23034,100,NVIDIA-NVIDIA L4,0,true,0,hami-core:"
        "GPU-l4-1,10,23034,100,NVIDIA-NVIDIA L4,1,true,1,hami-core:"
    )
    got = decode_node_register(legacy)
    assert [d.id for d in got] == ["GPU-l4-0", "GPU-l4-1"]
    assert got[1].numa == 1 and got[1].index == 1 and got[1].type == "NVIDIA-NVIDIA L4"
    assert encode_legacy_node_register(got) == legacy


def test_legacy_seven_field_form_defaults_mode() -> None:
    got = decode_node_register("GPU-1,10,16384,100,NVIDIA-Tesla T4,0,false:")
    assert got[0].mode == "hami-core" and got[0].health is False and got[0].index == 0


def test_legacy_refused_when_asked_for_v210_behaviour() -> None:
    """v2.10's scheduler calls only UnMarshalNodeDevices (JSON) for NVIDIA nodes."""
    with pytest.raises(CodecError):
        decode_node_register("GPU-1,10,16384,100,T4,0,true:", decode_legacy=False)


@pytest.mark.parametrize("bad", ["[{", '{"id":1}', '[{"count":"ten"}]', "GPU-1,10:", "no separator", "[1]"])
def test_malformed_register_is_refused(bad: str) -> None:
    with pytest.raises(CodecError):
        decode_node_register(bad)


devices = st.builds(
    DeviceInfo,
    id=st.text(alphabet="abcdef0123456789-", min_size=1, max_size=12).map(lambda s: "GPU-" + s),
    index=st.integers(0, 15),
    count=st.integers(0, 64),
    devmem=st.integers(0, 200_000),
    devcore=st.integers(0, 400),
    type=st.sampled_from(["NVIDIA L4", "NVIDIA A100-SXM4-80GB", "NVIDIA-Tesla T4", ""]),
    numa=st.integers(0, 3),
    mode=st.sampled_from(["hami-core", "mig", "mps", ""]),
    health=st.booleans(),
)


@given(st.lists(devices, max_size=8))
def test_register_round_trip(devs: list[DeviceInfo]) -> None:
    assert decode_node_register(encode_node_register(devs)) == devs
    assert all(
        0 not in e.values() and False not in e.values() for e in json.loads(encode_node_register(devs))
    )


def test_pod_annotation_examples_from_hami() -> None:
    """hami.md §3.4: `GPU-aaaa,NVIDIA,3000,30:;` and an empty first segment for a GPU-less container."""
    assert (
        encode_pod_devices([[ContainerDevice("GPU-aaaa", "NVIDIA", 3000, 30)]]) == "GPU-aaaa,NVIDIA,3000,30:;"
    )
    two = ";GPU-a,NVIDIA,10240,0:GPU-b,NVIDIA,10240,0:;"
    decoded = decode_pod_devices(two)
    assert decoded == [
        [],
        [ContainerDevice("GPU-a", "NVIDIA", 10240, 0), ContainerDevice("GPU-b", "NVIDIA", 10240, 0)],
    ]
    assert encode_pod_devices(decoded) == two
    assert decode_pod_devices(";") == [[]]  # what the device plugin leaves after Allocate


def test_malformed_pod_annotation_is_refused() -> None:
    with pytest.raises(CodecError):
        decode_pod_devices("GPU-a,NVIDIA,10:;")
    with pytest.raises(CodecError):
        decode_pod_devices("GPU-a,NVIDIA,ten,0:;")


container_devices = st.lists(
    st.builds(
        ContainerDevice,
        uuid=st.text(alphabet="abcdef0123456789-", min_size=1, max_size=10).map(lambda s: "GPU-" + s),
        type=st.just("NVIDIA"),
        usedmem=st.integers(0, 100_000),
        usedcores=st.integers(0, 100),
    ),
    max_size=4,
)


@given(st.lists(container_devices, max_size=5))
def test_pod_devices_round_trip(containers: list[list[ContainerDevice]]) -> None:
    assert decode_pod_devices(encode_pod_devices(containers)) == containers
