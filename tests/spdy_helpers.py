"""What the SPDY tests share: a transport that keeps what is written to it, and the frames in bytes."""

from __future__ import annotations

from tenantgpu.spdyframes import Frame, FrameReader


class TransportSink:
    """Stands in for a transport under a `FrameWriter`: keeps every byte written."""

    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    def is_closing(self) -> bool:
        return False


def frames_of(data: bytes, chunk: int | None = None) -> list[Frame]:
    """The frames in `data`, fed to a reader whole or `chunk` bytes at a time (as TCP may deliver them)."""
    reader = FrameReader()
    step = chunk or max(len(data), 1)
    for i in range(0, len(data), step):
        reader.feed_data(data[i : i + step])
    frames = []
    while not reader.frames.empty():
        frame = reader.frames.get_nowait()
        assert frame is not None
        frames.append(frame)
    return frames
