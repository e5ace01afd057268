"""A container's log as the kubelet keeps it for `kubectl logs`: lines with the time each was written.

Two kinds: `ContainerLog`, what the simulated container itself writes (its environment, `nvidia-smi`,
its command's output), and `ComponentContainerLog`, for the container that stands for a lab component
running in the worker process (HAMi's scheduler and device plugin, konnectivity's agent): its log is
that component's klog output since the container started. Both answer the same four calls.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tenantgpu.klog import ComponentLog
from tenantgpu.node import programs

__all__ = [
    "AnyContainerLog",
    "ComponentContainerLog",
    "ContainerLog",
    "component_of",
    "log_stamp",
    "render_lines",
]

Line = tuple[str, str]  # (RFC 3339 time with microseconds, text)

# The labels that name a system pod's component: HAMi's chart sets the first, Kamaji's konnectivity
# add-on the second.
COMPONENT_LABELS = ("app.kubernetes.io/component", "k8s-app")
SYSTEM_NAMESPACE = "kube-system"


def component_of(pod: Mapping[str, Any]) -> str:
    """The component a kube-system pod runs, by its labels; "" for any other pod."""
    meta = pod.get("metadata") or {}
    if meta.get("namespace") != SYSTEM_NAMESPACE:
        return ""
    labels = meta.get("labels") or {}
    return next((labels[key] for key in COMPONENT_LABELS if key in labels), "")


def log_stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def render_lines(lines: list[Line], *, tail_lines: int | None = None, timestamps: bool = False) -> str:
    """`kubectl logs` text: the last `tail_lines` (all when None, none when 0), with times if asked."""
    if tail_lines == 0:
        return ""
    chosen = lines[-tail_lines:] if tail_lines else lines
    return "".join(f"{ts} {text}\n" if timestamps else f"{text}\n" for ts, text in chosen)


@dataclass
class ContainerLog:
    """One container's output lines with their timestamps."""

    lines: list[Line] = field(default_factory=list)

    def write(self, line: str, stamp: str | None = None) -> None:
        """Append `line` (split at newlines); `stamp` is the time it was written, now if not given."""
        if stamp is None:
            stamp = log_stamp()
        for part in line.splitlines() or [""]:
            self.lines.append((stamp, part))

    def command(self, command: list[str], output: programs.ExecResult, stamp: str) -> None:
        """A command's line, as a shell echoes it, and what it printed."""
        self.write(f"$ {shlex.join(command)}", stamp)
        for line in (output.stdout + output.stderr).splitlines():
            self.write(line, stamp)

    def render(self, *, tail_lines: int | None = None, timestamps: bool = False) -> str:
        return render_lines(self.lines, tail_lines=tail_lines, timestamps=timestamps)

    def count(self) -> int:
        """How many lines have been written: a point to `render_from` later (`kubectl logs -f`)."""
        return len(self.lines)

    def render_from(self, count: int, *, timestamps: bool = False) -> str:
        return render_lines(self.lines[count:], timestamps=timestamps)


class ComponentContainerLog:
    """The log of a container that stands for a component: the component's start-up lines (stamped no
    earlier than the container's start, as a process started in it would have written them), then
    what it logged since, then whatever the kubelet adds when the container ends."""

    def __init__(self, component: ComponentLog, started: float | None = None) -> None:
        self.component = component
        self.started = time.time() if started is None else started
        self._first = component.written  # the component's first line that is this container's own
        self._ending = ContainerLog()

    def _lines(self) -> list[Line]:
        opened = datetime.fromtimestamp(self.started, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lines = [(max(e.stamp(), opened), e.render()) for e in self.component.startup]
        lines += [(e.stamp(), e.render()) for e in self.component.since(max(self._first, len(lines)))]
        return lines + self._ending.lines

    def _dropped(self) -> int:
        """Lines of this container that have left the component's window."""
        first = self.component.written - self.component.window()
        return max(0, first - max(self._first, len(self.component.startup)))

    def write(self, line: str, stamp: str | None = None) -> None:
        self._ending.write(line, stamp)

    def command(self, command: list[str], output: programs.ExecResult, stamp: str) -> None:
        self._ending.command(command, output, stamp)

    def render(self, *, tail_lines: int | None = None, timestamps: bool = False) -> str:
        return render_lines(self._lines(), tail_lines=tail_lines, timestamps=timestamps)

    def count(self) -> int:
        startup = len(self.component.startup)
        own = self.component.written - max(self._first, startup)
        return startup + own + len(self._ending.lines)

    def render_from(self, count: int, *, timestamps: bool = False) -> str:
        return render_lines(self._lines()[max(0, count - self._dropped()) :], timestamps=timestamps)


AnyContainerLog = ContainerLog | ComponentContainerLog
