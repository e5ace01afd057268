"""The stream writer: while a gRPC write is in flight, a connection's further bytes join its queued DATA
packet instead of queueing behind it, without ever crossing that connection's close."""

from __future__ import annotations

import asyncio

from tenantgpu.konnectivity import wire
from tenantgpu.konnectivity._proto import client_pb2 as pb
from tenantgpu.konnectivity.sender import PacketSender


class SlowStream:
    """A gRPC stream whose writes complete only when the test lets them (a busy event loop's pace)."""

    def __init__(self) -> None:
        self.written: list[pb.Packet] = []
        self.gate = asyncio.Event()

    async def write(self, packet: pb.Packet) -> None:
        await self.gate.wait()
        self.gate.clear()
        copy = pb.Packet()
        copy.CopyFrom(packet)
        self.written.append(copy)

    async def drain(self, sender: PacketSender) -> None:
        while sender.queued_bytes or len(self.written) == 0:
            self.gate.set()
            await asyncio.sleep(0)
        for _ in range(5):
            self.gate.set()
            await asyncio.sleep(0)


def _summary(packets: list[pb.Packet]) -> list[tuple[str, int, bytes]]:
    out = []
    for packet in packets:
        if packet.type == pb.DATA:
            out.append(("DATA", packet.data.connectID, packet.data.data))
        elif packet.type == pb.CLOSE_REQ:
            out.append(("CLOSE_REQ", packet.closeRequest.connectID, b""))
        elif packet.type == pb.DIAL_RSP:
            out.append(("DIAL_RSP", packet.dialResponse.connectID, b""))
    return out


async def test_bytes_sent_while_the_stream_is_busy_travel_in_one_packet_per_connection() -> None:
    stream = SlowStream()
    sender = PacketSender(stream.write)
    sender.start()
    sender.send(wire.dial_response(7, connect_id=1))  # in flight: the stream is busy
    await asyncio.sleep(0)
    for index in range(20):
        sender.send_data(1, f"a{index};".encode())
        sender.send_data(2, f"b{index};".encode())
    await stream.drain(sender)
    await sender.close()
    assert _summary(stream.written) == [
        ("DIAL_RSP", 1, b""),
        ("DATA", 1, b"".join(f"a{i};".encode() for i in range(20))),
        ("DATA", 2, b"".join(f"b{i};".encode() for i in range(20))),
    ]


async def test_bytes_after_a_close_are_never_moved_before_it() -> None:
    stream = SlowStream()
    sender = PacketSender(stream.write)
    sender.start()
    sender.send(wire.dial_response(7, connect_id=9))
    await asyncio.sleep(0)
    sender.send_data(1, b"first")
    sender.send(wire.close_request(1))
    sender.send_data(1, b"late")
    sender.send_data(1, b"!")
    await stream.drain(sender)
    await sender.close()
    assert _summary(stream.written)[1:] == [
        ("DATA", 1, b"first"),
        ("CLOSE_REQ", 1, b""),
        ("DATA", 1, b"late!"),
    ]


async def test_a_packet_being_written_is_not_changed_and_packets_stay_below_the_chunk_size() -> None:
    stream = SlowStream()
    sender = PacketSender(stream.write)
    sender.start()
    sender.send_data(1, b"x")  # taken by the writer at once
    await asyncio.sleep(0)
    big = b"y" * (wire.DATA_CHUNK_BYTES // 2 + 1)
    sender.send_data(1, b"z")
    sender.send_data(1, big)
    sender.send_data(1, big)
    await stream.drain(sender)
    await sender.close()
    sizes = [(kind, len(data)) for kind, _, data in _summary(stream.written)]
    assert sizes == [("DATA", 1), ("DATA", 1 + len(big)), ("DATA", len(big))]
    assert b"".join(data for _, _, data in _summary(stream.written)) == b"x" + b"z" + big + big
