"""The lab as an operating-system process: progress messages, the readiness pipe of a detached lab,
and stopping it; light on imports, so `up -d` and `down` answer fast."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenantgpu.lab.state import StateDir

# How many processes serve the lab (see lab.workerpool and lab.datastores); named here, where the CLI
# reads them without importing the lab.
WORKER_PROCESSES_ENV = "TENANTGPU_WORKER_PROCESSES"
CONTROL_PLANE_PROCESSES_ENV = "TENANTGPU_CONTROL_PLANE_PROCESSES"


def ready_timeout() -> float:
    """How long `up` waits for everything to be Ready (TENANTGPU_READY_TIMEOUT seconds, default 300)."""
    return float(os.environ.get("TENANTGPU_READY_TIMEOUT", "300"))


class LabError(Exception):
    """The lab could not be started or stopped; the message is one line for the user."""


def process_setting(setting: str | None, env: str, what: str) -> int | None:
    """A process count from the command line or the environment: a number, or None for `auto`."""
    value = (setting or os.environ.get(env) or "auto").strip().lower()
    if value == "auto":
        return None
    try:
        wanted = int(value)
    except ValueError:
        raise LabError(f"{what}: expected a number or auto, got {value!r}") from None
    if wanted < 0:
        raise LabError(f"{what}: expected 0 or more, got {wanted}")
    return wanted


class LabAlreadyRunning(LabError):
    pass


@dataclass(frozen=True)
class Progress:
    """One step the lab reports while it comes up: `what` names the thing, `state` where it is."""

    what: str
    state: str
    detail: str = ""
    # how a thing that is ready shows it: a tenant as its TCP's status says (`Ready`, `WriteLimited`)
    shown: str = "Ready"

    def as_dict(self) -> dict[str, str]:
        return {"what": self.what, "state": self.state, "detail": self.detail, "shown": self.shown}


ProgressSink = Callable[[Progress], None]


def _ignore(_: Progress) -> None:
    return None


def already_running_message(state: StateDir, pid: int | None) -> str:
    return f"a lab is already running in {state.root} (pid {pid}); stop it with `tenantgpu down`"


# --- detached: a child process in its own session ------------------------------------------------


class PipeReporter:
    """The child's side of the readiness pipe: one JSON line per progress step, then `ready` or `error`."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "w", buffering=1)

    def progress(self, step: Progress) -> None:
        self._send({"event": "progress", **step.as_dict()})

    def ready(self, endpoints: dict[str, str]) -> None:
        self._send({"event": "ready", "endpoints": endpoints})
        self.close()

    def error(self, message: str) -> None:
        self._send({"event": "error", "message": message})
        self.close()

    def _send(self, message: dict[str, Any]) -> None:
        if self._file.closed:
            return
        with contextlib.suppress(OSError):
            self._file.write(json.dumps(message) + "\n")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()


GO_AHEAD = b"go\n"  # what the caller writes to a detached lab's stdin once the lab file checked out


class DetachedLab:
    """A lab process started in a new session that waits for the go-ahead before it touches anything.

    The child spends most of its start-up importing the lab; the caller checks the lab file meanwhile, so
    the two overlap. Until `run` sends the go-ahead over the child's stdin, the child has created nothing:
    `abort` ends it, and if the caller dies instead, the child finds its stdin closed and exits quietly.
    """

    def __init__(self, state: StateDir, lab_file: str | None) -> None:
        pid = state.running_pid()
        if pid is not None:
            raise LabAlreadyRunning(already_running_message(state, pid))
        self.state = state
        self._ready_fd, write_fd = os.pipe()
        go_read, self._go_fd = os.pipe()
        argv = [
            sys.executable,
            "-m",
            "tenantgpu",
            "up",
            "--state-dir",
            str(state.root),
            "--ready-fd",
            str(write_fd),
        ]
        if lab_file is not None:
            argv += ["-f", str(Path(lab_file).absolute())]
        # Until the go-ahead the child writes to the caller's stderr (an import that fails shows there);
        # after it, to DIR/logs/lab.log (see await_go_ahead).
        self.child = subprocess.Popen(
            argv,
            stdin=go_read,
            stdout=subprocess.DEVNULL,
            pass_fds=(write_fd,),
            start_new_session=True,
            close_fds=True,
        )
        os.close(write_fd)
        os.close(go_read)

    def abort(self) -> None:
        """End the child without starting anything: before the go-ahead it has nothing to clean up, and
        killing it spares the caller the rest of its imports."""
        with contextlib.suppress(OSError):
            os.close(self._go_fd)
        with contextlib.suppress(OSError):
            os.close(self._ready_fd)
        self.child.kill()
        _reap(self.child, 5)

    def run(self, progress: ProgressSink, *, timeout: float | None = None) -> dict[str, str]:
        """Create the state directory, let the child start the lab, and return once it is ready."""
        code = self.child.poll()
        if code is not None:
            os.close(self._go_fd)
            os.close(self._ready_fd)
            # It failed before it had a log (its error went to this terminal's stderr).
            raise LabError(f"the lab process exited (code {code}) before it started")
        try:
            self.state.create()
        except BaseException:
            self.abort()
            raise
        try:
            os.write(self._go_fd, GO_AHEAD)
        except OSError:
            pass  # the child is gone already; its exit code is reported below
        finally:
            os.close(self._go_fd)
        deadline = time.monotonic() + (timeout or ready_timeout())
        with os.fdopen(self._ready_fd, "r") as pipe:
            for line in pipe:
                message = json.loads(line)
                event = message.pop("event")
                if event == "progress":
                    progress(Progress(**message))
                elif event == "ready":
                    return dict(message.get("endpoints") or {})
                elif event == "error":
                    _reap(self.child, 5)
                    raise LabError(message["message"])
                if time.monotonic() > deadline:
                    break
        code = _reap(self.child, 5)
        raise LabError(f"the lab process exited (code {code}) before it was ready; see {self.state.log_file}")


def await_go_ahead(state: StateDir) -> bool:
    """The detached child's side: wait for the caller's go-ahead, then log to DIR/logs/lab.log.

    False when the caller let go without it (a broken lab file, or the caller died): nothing was started.
    """
    received = b""
    while not received.endswith(b"\n"):
        chunk = os.read(0, 16)
        if not chunk:
            return False
        received += chunk
    if received != GO_AHEAD:
        return False
    log_fd = os.open(state.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null_fd, 0), (log_fd, 1), (log_fd, 2)):
        os.dup2(fd, target)
    os.close(log_fd)
    os.close(null_fd)
    return True


def _reap(child: subprocess.Popen[bytes], timeout: float) -> int | None:
    try:
        return child.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def stop_lab(state: StateDir, *, timeout: float = 30.0) -> int | None:
    """SIGTERM the lab process and wait until it has let go of the state directory; returns its pid."""
    pid = state.running_pid()
    if pid is None:
        return None
    if pid > 0:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while state.running_pid() is not None:
        if time.monotonic() > deadline:
            if pid > 0:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
            break
        time.sleep(0.05)
    return pid
