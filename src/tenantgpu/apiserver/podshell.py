"""`kubectl exec -it POD -- bash`: a shell that reads its commands from the client, line by line.

The simulated containers run their programs to completion at once (`podexec`), so a shell is a loop
here: each line the client types goes to the pod's kubelet as `<shell> -c '<line>'` (through the tunnel,
like any exec), and its output comes back before the next prompt. With a terminal (`-t`) this side is
the terminal's line discipline too, as a pty in the container would be: it echoes what is typed, erases
on backspace, ends a line on Enter, answers Ctrl-C with `^C` and a new prompt, and ends the shell on
Ctrl-D at an empty line (bash prints `exit`). Without a terminal (`-i` with piped input) the lines are
read as they come, with no prompt and no echo, until the input ends. `exit [N]` ends the shell with
status N; the shell's status is the last command's. The prompt is bash's `root@<pod>:/# ` or dash's `# `
(the CUDA images run as root in `/`).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tenantgpu.apiserver import podexec, spdy
from tenantgpu.spdyframes import GOAWAY, PING

# The shells a container image has; `kubectl exec -i` into one of them (without arguments) starts a
# session. The simulated runtime runs `sh -c` around its programs with the same names (`node/programs`).
SHELLS = ("sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash")
INTERRUPT = "\x03"  # a line the terminal ended with Ctrl-C
END = None  # the input ended (Ctrl-D at an empty line, or the client closed stdin)

Line = str | None
# runs one command line on the kubelet; answers with `stdout`, `stderr` and `exit_code`
RunLine = Callable[[list[str]], Awaitable[Any]]


@dataclass(frozen=True)
class Result:
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


def is_session(command: list[str], stdin: bool) -> bool:
    """Whether an exec asks for an interactive shell: a shell alone, with the client's stdin."""
    return stdin and len(command) == 1 and command[0] in SHELLS


def prompt(shell: str, pod: str) -> str:
    return f"root@{pod}:/# " if shell.rpartition("/")[2] == "bash" else "# "


@dataclass
class LineDiscipline:
    """What a terminal in canonical mode does with the keys a raw-mode kubectl sends."""

    buffer: str = ""
    _escape: str = field(default="", repr=False)

    def feed(self, data: str) -> tuple[str, list[Line]]:
        """The echo to show, and the lines the keys completed (INTERRUPT for Ctrl-C, END for Ctrl-D)."""
        echo, lines = "", []
        for key in data:
            if self._escape:  # an arrow or function key's sequence: no line editing here
                self._escape += key
                if len(self._escape) >= 3 or (len(self._escape) == 2 and key != "["):
                    self._escape = ""
                continue
            if key == "\x1b":
                self._escape = key
            elif key in ("\r", "\n"):
                echo += "\r\n"
                lines.append(self.buffer)
                self.buffer = ""
            elif key in ("\x7f", "\b"):
                if self.buffer:
                    self.buffer = self.buffer[:-1]
                    echo += "\b \b"
            elif key == INTERRUPT:
                echo += "^C\r\n"
                self.buffer = ""
                lines.append(INTERRUPT)
            elif key == "\x04":
                if not self.buffer:
                    lines.append(END)
            elif key == "\x15":  # Ctrl-U: the whole line
                echo += "\b \b" * len(self.buffer)
                self.buffer = ""
            elif key >= " ":
                self.buffer += key
                echo += key
        return echo, lines


@dataclass
class PipedLines:
    """Lines of piped input, as a shell reads a script from stdin."""

    buffer: str = ""

    def feed(self, data: str) -> tuple[str, list[Line]]:
        self.buffer += data
        *lines, self.buffer = self.buffer.split("\n")
        return "", list(lines)

    def end(self) -> list[Line]:
        rest, self.buffer = self.buffer, ""
        return ([rest] if rest else []) + [END]


def exit_status(words: list[str], last: int) -> int | str:
    """`exit` and `exit N` as dash reads them: the status, or the error text for a bad operand."""
    if len(words) == 1:
        return last
    if len(words) == 2 and words[1].isdigit():
        return int(words[1]) % 256
    return f"exit: Illegal number: {' '.join(words[1:])}"


Output = Callable[[str, str], Awaitable[None]]  # (stream "stdout" | "stderr", text)


async def run(
    shell: str,
    pod: str,
    tty: bool,
    keys: AsyncIterator[str | None],
    output: Output,
    run_line: RunLine,
) -> int:
    """Serve one shell session: read `keys` (None once the input ends), write through `output`, run each
    line with `run_line`; returns the shell's exit status."""
    discipline: LineDiscipline | PipedLines = LineDiscipline() if tty else PipedLines()
    shown_prompt = prompt(shell, pod) if tty else ""
    status = 0

    async def say(stream: str, text: str) -> None:
        if text:
            await output("stdout" if tty else stream, text.replace("\n", "\r\n") if tty else text)

    await say("stdout", shown_prompt)
    async for data in keys:
        if data is None:
            lines: list[Line] = discipline.end() if isinstance(discipline, PipedLines) else [END]
            echo = ""
        else:
            echo, lines = discipline.feed(data)
        if echo:
            await output("stdout", echo)
        for line in lines:
            if line is END:
                if tty:
                    await output("stdout", "exit\r\n")
                return status
            if line == INTERRUPT:
                status = 130
                await say("stdout", shown_prompt)
                continue
            try:
                words = shlex.split(line)
            except ValueError:
                words = [line]
            if words and words[0] == "exit":
                ended = exit_status(words, status)
                if isinstance(ended, int):
                    if tty:
                        await output("stdout", "exit\r\n")
                    return ended
                await say("stderr", f"{shell}: 1: {ended}\n")
                status = 2
            elif words:
                result = await run_line([shell, "-c", line])
                await say("stdout", result.stdout)
                await say("stderr", result.stderr)
                status = result.exit_code
            await say("stdout", shown_prompt)
    return status


# --- the two wires ----------------------------------------------------------------------------------

CLIENT_SIZE_WAIT = 1.0  # a terminal client sends its size first; the prompt waits for it this long


def _decoder() -> Callable[[bytes], str]:
    """Keys as text; a character split between two messages is put together."""
    return codecs.getincrementaldecoder("utf-8")(errors="replace").decode


async def _keys(queue: asyncio.Queue[str | None]) -> AsyncIterator[str | None]:
    while True:
        key = await queue.get()
        yield key
        if key is None:
            return


async def serve_websocket(
    request: web.Request, options: podexec.ExecOptions, pod: str, run_line: RunLine
) -> web.StreamResponse:
    ws, protocol = await podexec.accept_websocket(request, "exec")
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    sized = asyncio.Event()
    decode = _decoder()

    async def read() -> None:
        async for message in ws:
            # kube reads a text message as bytes too (the Python client sends strings as text)
            raw = message.data.encode() if message.type == WSMsgType.TEXT else message.data
            if message.type not in (WSMsgType.BINARY, WSMsgType.TEXT) or not raw:
                continue
            channel, data = raw[0], raw[1:]
            if channel == 0:
                queue.put_nowait(decode(data))
            elif channel == podexec.RESIZE:
                sized.set()
            elif channel == podexec.CLOSE_SIGNAL and data[:1] == b"\x00":
                queue.put_nowait(None)  # v5: the client's stdin ended
        queue.put_nowait(None)

    async def output(stream: str, text: str) -> None:
        channel = podexec.STDOUT if stream == "stdout" else podexec.STDERR
        await ws.send_bytes(bytes([channel]) + text.encode())

    reading = asyncio.ensure_future(read())
    try:
        if options.tty:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(sized.wait(), CLIENT_SIZE_WAIT)
        status = await run(options.command[0], pod, options.tty, _keys(queue), output, run_line)
        end = podexec.error_status(protocol, options.command, Result(exit_code=status))
        if end is not None and not reading.done():
            await ws.send_bytes(bytes([podexec.ERROR]) + end)
    finally:
        await podexec.stop_tasks(reading)
        with contextlib.suppress(Exception):
            await ws.close()
    return ws


async def serve_spdy(
    request: web.Request, options: podexec.ExecOptions, pod: str, run_line: RunLine
) -> web.StreamResponse:
    session = spdy.StreamSession(request, options)
    try:
        if not await session.open():
            return session.response
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        decode = _decoder()
        stdin = session.streams.get("stdin")
        assert session.writer is not None
        writer = session.writer

        async def read() -> None:
            while (frame := await session.reader.frames.get()) is not None:
                if frame.control and frame.kind == PING:
                    writer.control(PING, 0, frame.payload)
                elif frame.control and frame.kind == GOAWAY:
                    break
                elif not frame.control and frame.stream_id == stdin:
                    if frame.payload:
                        queue.put_nowait(decode(frame.payload))
                    if frame.fin:
                        queue.put_nowait(None)
            queue.put_nowait(None)

        async def output(stream: str, text: str) -> None:
            session.send(stream, text.encode(), fin=False)

        reading = asyncio.ensure_future(read())
        try:
            status = await run(options.command[0], pod, options.tty, _keys(queue), output, run_line)
        finally:
            await podexec.stop_tasks(reading)
        for stream in ("stdout", "stderr"):
            session.send(stream, b"", fin=True)
        end = podexec.error_status(session.protocol, options.command, Result(exit_code=status))
        session.send("error", end or b"", fin=True)
        await session.until_client_leaves(spdy.CLOSE_TIMEOUT)
    finally:
        session.close()
    return session.response
