"""SPDY/3.1 framing, as Kubernetes' streaming connections use it (moby/spdystream under client-go).

kubectl opens `exec` (up to 1.29, and as newer kubectl's fallback) and `port-forward` (always, on its
own or tunnelled through a WebSocket from 1.31) as one SPDY connection carrying several streams. A
frame is either a control frame (SYN_STREAM opens a stream, SYN_REPLY accepts it, RST_STREAM refuses
or cancels it, PING, GOAWAY, WINDOW_UPDATE…) or a data frame of one stream; the FIN flag ends a
stream in the sender's direction. Header blocks are zlib streams, one per connection and direction,
primed with SPDY/3's dictionary: a stream's headers (port-forward's `streamType`, `port`, `requestID`)
cannot be read without it.
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from dataclasses import dataclass

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
# RST_STREAM status codes
PROTOCOL_ERROR, REFUSED_STREAM, CANCEL = 1, 3, 5
MAX_DATA = 32 * 1024

# The header-compression dictionary of SPDY/3 (draft-mbelshe-httpbis-spdy-00, 2.6.10.1): length-prefixed
# header names and common values, then a run of status codes, reason phrases, dates and media types.
# Its zlib dictionary id (adler32) is 0xe3c6a7c2, which every SPDY/3 header block declares.
_DICTIONARY_WORDS = (
    *[
        "options",
        "head",
        "post",
        "put",
        "delete",
        "trace",
        "accept",
        "accept-charset",
        "accept-encoding",
        "accept-language",
        "accept-ranges",
        "age",
        "allow",
        "authorization",
        "cache-control",
        "connection",
        "content-base",
        "content-encoding",
        "content-language",
        "content-length",
        "content-location",
        "content-md5",
        "content-range",
        "content-type",
        "date",
        "etag",
        "expect",
        "expires",
        "from",
        "host",
        "if-match",
        "if-modified-since",
        "if-none-match",
        "if-range",
        "if-unmodified-since",
        "last-modified",
        "location",
        "max-forwards",
        "pragma",
        "proxy-authenticate",
        "proxy-authorization",
        "range",
        "referer",
        "retry-after",
        "server",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "vary",
        "via",
        "warning",
        "www-authenticate",
        "method",
        "get",
        "status",
    ],
    *("200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive", "origin"),
)
_DICTIONARY_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = (
    b"".join(struct.pack(">I", len(word)) + word.encode() for word in _DICTIONARY_WORDS)
    + _DICTIONARY_TAIL.encode()
)

Headers = dict[str, list[str]]


@dataclass(frozen=True)
class Frame:
    control: bool
    kind: int  # control frame type, or 0 for data
    stream_id: int
    flags: int
    payload: bytes

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


class FrameReader:
    """Splits a connection's bytes into frames; `frames` yields them, then None at the end.

    It has the `feed_data`/`feed_eof` of an aiohttp parser, so an upgraded aiohttp connection can hand
    it what arrives; anything else may call them too.
    """

    def __init__(self) -> None:
        self.frames: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._buffer = bytearray()

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self._buffer += data
        start = 0
        buffer = self._buffer
        while len(buffer) - start >= 8:
            length = int.from_bytes(buffer[start + 5 : start + 8], "big")
            end = start + 8 + length
            if len(buffer) < end:
                break
            head, payload = buffer[start : start + 8], bytes(buffer[start + 8 : end])
            flags = head[4]
            if head[0] & 0x80:
                kind = int.from_bytes(head[2:4], "big")
                stream_id = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF if len(payload) >= 4 else 0
                self.frames.put_nowait(Frame(True, kind, stream_id, flags, payload))
            else:
                stream_id = int.from_bytes(head[:4], "big") & 0x7FFFFFFF
                self.frames.put_nowait(Frame(False, 0, stream_id, flags, payload))
            start = end
        if start:
            del buffer[:start]
        return False, b""

    def feed_eof(self) -> None:
        self.frames.put_nowait(None)


class FrameWriter:
    """Writes SPDY/3 frames with `write(bytes)` (a transport's, or any other)."""

    def __init__(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        # One compression context for every header block this side sends, as SPDY requires.
        self._headers = zlib.compressobj(zdict=DICTIONARY)

    def _write(self, data: bytes) -> None:
        # a stream's task may still end its streams after the connection went: nothing to tell anyone
        if not self._transport.is_closing():
            self._transport.write(data)  # type: ignore[attr-defined]

    def control(self, kind: int, flags: int, payload: bytes) -> None:
        self._write(struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload)

    def header_block(self, headers: Headers) -> bytes:
        raw = struct.pack(">I", len(headers))
        for name, values in headers.items():
            value = "\x00".join(values).encode()
            raw += (
                struct.pack(">I", len(name)) + name.lower().encode() + struct.pack(">I", len(value)) + value
            )
        return self._headers.compress(raw) + self._headers.flush(zlib.Z_SYNC_FLUSH)

    def syn_stream(self, stream_id: int, headers: Headers, *, fin: bool = False) -> None:
        """Open a stream (a client's frame; the server side of this project only answers them)."""
        payload = struct.pack(">IIH", stream_id, 0, 0) + self.header_block(headers)
        self.control(SYN_STREAM, FLAG_FIN if fin else 0, payload)

    def syn_reply(self, stream_id: int) -> None:
        self.control(SYN_REPLY, 0, struct.pack(">I", stream_id) + self.header_block({}))

    def rst_stream(self, stream_id: int, status: int) -> None:
        self.control(RST_STREAM, 0, struct.pack(">II", stream_id, status))

    def data(self, stream_id: int, payload: bytes, *, fin: bool) -> None:
        chunks = [payload[i : i + MAX_DATA] for i in range(0, len(payload), MAX_DATA)] or [b""]
        for i, chunk in enumerate(chunks):
            flags = FLAG_FIN if fin and i == len(chunks) - 1 else 0
            self._write(struct.pack(">II", stream_id, (flags << 24) | len(chunk)) + chunk)


class HeaderDecoder:
    """Reads the header blocks one side of a connection sends (one zlib stream for all of them)."""

    def __init__(self) -> None:
        self._zlib = zlib.decompressobj(zdict=DICTIONARY)

    def decode(self, block: bytes) -> Headers:
        """The block's headers, names lower-cased, each value split at NUL; ValueError when unreadable."""
        try:
            raw = self._zlib.decompress(block)
        except zlib.error as err:
            raise ValueError(f"error decompressing header block: {err}") from err
        try:
            (count,) = struct.unpack_from(">I", raw, 0)
            at = 4
            headers: Headers = {}
            for _ in range(count):
                (size,) = struct.unpack_from(">I", raw, at)
                name = raw[at + 4 : at + 4 + size].decode().lower()
                at += 4 + size
                (size,) = struct.unpack_from(">I", raw, at)
                value = raw[at + 4 : at + 4 + size].decode()
                at += 4 + size
                headers.setdefault(name, []).extend(value.split("\x00"))
        except (struct.error, UnicodeDecodeError) as err:
            raise ValueError(f"malformed header block: {err}") from err
        return headers


def syn_stream_headers(frame: Frame, decoder: HeaderDecoder) -> Headers:
    """The headers of a SYN_STREAM frame (stream id, associated id and priority come first)."""
    return decoder.decode(frame.payload[10:])
