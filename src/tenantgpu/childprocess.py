"""A child process of the lab, driven by JSON lines: the parent's `ChildProcess` and the child's `CommandLoop`.

The lab spreads its work over processes so that it uses more than one core (worker nodes in one, tenant
API servers of a second DataStore in another). Each child reads one JSON command per line on its stdin
and writes JSON lines on its stdout:

    {"id": 1, "op": "<op>", ...}
      -> {"id": 1, "progress": {...}}                      (any number)
      -> {"id": 1, "ok": true, "result": {...}}  or  {"id": 1, "error": "one line"}
    {"op": "stop"}  -> the child shuts down in order, then {"op": "stopped"}

The child announces `{"op": "ready"}` once it can take commands. End of input means the parent is gone
(even by kill -9): the child shuts down and exits, so no child outlives its lab.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tenantgpu.apiserver.gcpolicy import CollectorPolicy

log = logging.getLogger(__name__)

Message = dict[str, Any]
ProgressCallback = Callable[[Message], None]


class ChildError(Exception):
    """A child answered with an error, or exited before it answered."""


@dataclass
class _Call:
    progress: ProgressCallback | None
    done: asyncio.Future[Message]


@dataclass
class ChildProcess:
    """The parent's handle on one child: `await start()`, `await call(op, ...)`, `await stop()`."""

    name: str  # for messages: "worker process 0"
    module: str
    args: list[str]
    log_hint: str = ""  # where the child's own log lines go, for error messages
    # Called with the exit code when the child exits without having been asked to stop (it crashed).
    on_exit: Callable[[int], None] | None = None
    process: asyncio.subprocess.Process | None = None
    _stopping: bool = False
    _calls: dict[int, _Call] = field(default_factory=dict)
    _next_id: int = 0
    _reader: asyncio.Task[None] | None = None
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    _gone: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def _see_log(self) -> str:
        return f"; see {self.log_hint}" if self.log_hint else ""

    async def spawn(self) -> None:
        """Start the process; `wait_ready` waits for it to take commands (several children import at once)."""
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            self.module,
            *self.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        self._reader = asyncio.create_task(self._read(), name=self.name)

    async def wait_ready(self) -> None:
        ready = asyncio.ensure_future(self._ready.wait())
        gone = asyncio.ensure_future(self._gone.wait())
        try:
            await asyncio.wait({ready, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
            gone.cancel()
        if not self._ready.is_set():
            raise ChildError(f"{self.name} exited before it was ready{self._see_log()}")

    async def start(self, timeout: float) -> None:
        await self.spawn()
        try:
            async with asyncio.timeout(timeout):
                await self.wait_ready()
        except TimeoutError:
            raise ChildError(f"{self.name} not ready after {timeout:.0f}s") from None

    def send(self, message: Message) -> None:
        stdin = None if self.process is None else self.process.stdin
        if stdin is None or stdin.is_closing() or self._gone.is_set():
            raise ChildError(f"{self.name} is not running")
        stdin.write((json.dumps(message) + "\n").encode())

    async def call(self, op: str, progress: ProgressCallback | None = None, **fields: Any) -> Message:
        """Send one command and wait for its answer; returns the answer's `result` (empty if it had none)."""
        self._next_id += 1
        call_id = self._next_id
        call = _Call(progress, asyncio.get_running_loop().create_future())
        self._calls[call_id] = call
        try:
            self.send({"id": call_id, "op": op, **fields})
            return await call.done
        finally:
            self._calls.pop(call_id, None)

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        try:
            while line := await self.process.stdout.readline():
                try:
                    message = json.loads(line)
                except ValueError:
                    log.warning("%s: %s", self.name, line.decode(errors="replace").rstrip())
                    continue
                self._on_message(message)
        finally:
            self._gone.set()
            code = await self.process.wait()
            for call in self._calls.values():
                if not call.done.done():
                    call.done.set_exception(ChildError(f"{self.name} exited (code {code}){self._see_log()}"))
            if not self._stopping and self.on_exit is not None:
                self.on_exit(code)

    def _on_message(self, message: Message) -> None:
        if message.get("op") == "ready":
            self._ready.set()
            return
        call = self._calls.get(message.get("id", -1))
        if call is None or call.done.done():
            return
        if "progress" in message:
            if call.progress is not None:
                call.progress(message["progress"])
        elif "error" in message:
            call.done.set_exception(ChildError(str(message["error"])))
        elif message.get("ok"):
            call.done.set_result(message.get("result") or {})

    async def stop(self, timeout: float) -> None:
        """Ask the child to shut down in order; kill it if it has not exited after `timeout` seconds."""
        if self.process is None:
            return
        self._stopping = True
        with contextlib.suppress(ChildError, OSError):
            self.send({"op": "stop"})
        try:
            await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            log.warning("%s did not stop; killing it", self.name)
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader


# --- the child's side ------------------------------------------------------------------------------------

Handler = Callable[[Message, Callable[[Message], None]], Awaitable[Message | None]]


class CommandLoop:
    """Runs in the child: reads commands, runs each handler as its own task, writes the answers."""

    def __init__(self, handlers: dict[str, Handler]) -> None:
        self.handlers = handlers
        self._tasks: set[asyncio.Task[None]] = set()

    @staticmethod
    def send(message: Message) -> None:
        # One line per write keeps each message whole for the reader.
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    async def _answer(self, command: Message, handler: Handler) -> None:
        command_id = command.get("id")

        def progress(step: Message) -> None:
            self.send({"id": command_id, "progress": step})

        try:
            result = await handler(command, progress)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.exception("%s failed", command.get("op"))
            self.send({"id": command_id, "error": str(err) or type(err).__name__})
            return
        self.send({"id": command_id, "ok": True, "result": result or {}})

    def dispatch(self, command: Message) -> bool:
        """Start answering one command; False once asked to stop."""
        op = command.get("op")
        if op == "stop":
            return False
        handler = self.handlers.get(str(op))
        if handler is None:
            self.send({"id": command.get("id"), "error": f"unknown op {op!r}"})
            return True
        task = asyncio.create_task(self._answer(command, handler), name=f"command-{op}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def run(self) -> None:
        """Serve commands until `stop`, SIGTERM or the end of input; commands still running are cancelled."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=2**20)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        terminated = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, terminated.set)
        self.send({"op": "ready"})
        try:
            while not terminated.is_set():
                reading = asyncio.ensure_future(reader.readline())
                ending = asyncio.ensure_future(terminated.wait())
                await asyncio.wait({reading, ending}, return_when=asyncio.FIRST_COMPLETED)
                ending.cancel()
                if not reading.done():
                    reading.cancel()
                    break
                line = reading.result()
                if not line:
                    log.info("the lab is gone; shutting down")
                    break
                try:
                    command = json.loads(line)
                except ValueError:
                    log.error("ignoring a command that is not JSON: %r", line[:80])
                    continue
                if not self.dispatch(command):
                    break
        finally:
            loop.remove_signal_handler(signal.SIGTERM)
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def stopped(self) -> None:
        self.send({"op": "stopped"})


def prepare_child(label: str, log_level: str) -> None:
    """The start of every child's `main`: its log lines carry its label, and Ctrl-C is the lab's to handle."""
    logging.basicConfig(level=log_level, format=f"%(asctime)s %(levelname)s [{label}] %(name)s: %(message)s")
    # Ctrl-C in the terminal reaches the whole process group; the lab alone decides when a child stops, so
    # that it shuts down in order (worker processes drain their tunnels first).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from tenantgpu.lab.supervisor import tune_for_many_tenants

    tune_for_many_tenants()


async def serve_commands(handlers: dict[str, Handler], shutdown: Callable[[], Awaitable[None]]) -> None:
    """Serve the lab's commands until it says stop or is gone, then shut down in order and say so."""
    commands = CommandLoop(handlers)
    collector = CollectorPolicy()
    collector.start()
    try:
        await commands.run()
    finally:
        collector.stop()
        await shutdown()
        commands.stopped()
