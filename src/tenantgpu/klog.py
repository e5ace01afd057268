"""What a lab component would print to its container's stderr, in klog's text format.

HAMi's scheduler and device plugin and konnectivity's agent log with klog; on a real cluster
`kubectl logs -n kube-system deploy/hami-scheduler -c vgpu-scheduler-extender` is where one reads why a
pod went where it went. The lab runs these components inside its worker process, so each keeps a
`ComponentLog` and the kubelet shows it as the log of the container that stands for the component.

A line is klog's header and text:
`I1207 06:44:48.123456       1 scheduler.go:1068] "Starting schedule filter process" pod="web" …`
(severity and date, time with microseconds, the process id, which is 1 in a container, the source
file and line of the upstream call, then the message). Structured calls (klog's `InfoS`/`ErrorS`)
quote the message and write `key=value` pairs, strings quoted and numbers bare; printf-style calls
(`Infof`) write their text as it is. The message texts and source lines are the upstream calls'
(HAMi v2.10.0, apiserver-network-proxy); the values Go prints with `%v` for its own structs are
rendered more plainly.

Entries are kept as given and rendered when read, so logging costs a component almost nothing on a
pod's way; the newest `capacity` entries are kept, plus the lines of the component's start.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from tenantgpu.goquote import go_quote

__all__ = ["ComponentLog", "Entry", "go_map", "kobj"]

DEFAULT_CAPACITY = 1000  # about 250 KB per component when full
# A component that never gets started (an agent whose server never answers) keeps logging; past this
# many start-up lines the rest go to the window, so that nothing grows without bound.
STARTUP_LIMIT = 50
_PID = 1  # a container's main process


@dataclass(frozen=True, slots=True)
class Entry:
    """One klog call: when, its severity letter (I, W, E), the upstream `file.go:line`, its message and,
    for a structured call, its key/value pairs (None: a printf-style line, `message` as printed)."""

    at: float
    severity: str
    source: str
    message: str
    values: tuple[tuple[str, object], ...] | None = None

    def render(self) -> str:
        moment = datetime.fromtimestamp(self.at, UTC)
        header = f"{self.severity}{moment:%m%d %H:%M:%S}.{moment.microsecond:06d} {_PID:>7} {self.source}] "
        if self.values is None:
            return header + self.message
        return header + go_quote(self.message) + "".join(f" {k}={_value(v)}" for k, v in self.values)

    def stamp(self) -> str:
        """The time the container runtime records for the line (`kubectl logs --timestamps`)."""
        return datetime.fromtimestamp(self.at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return go_quote(str(value))


def kobj(namespace: str, name: str) -> str:
    """klog.KObj/KRef: how a namespaced object is named in a structured line."""
    return f"{namespace}/{name}" if namespace else name


def go_map(mapping: Mapping[str, object]) -> str:
    """Go's `%v` of a map[string]string: `map[k1:v1 k2:v2]`, keys sorted as fmt sorts them."""
    return "map[" + " ".join(f"{k}:{mapping[k]}" for k in sorted(mapping)) + "]"


class ComponentLog:
    """A component's klog output: the lines of its start, kept, and a window of the newest ones.

    `written` counts every entry ever made, so a reader can ask for what came after a point even when
    older entries have left the window.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.startup: list[Entry] = []
        self._recent: deque[Entry] = deque(maxlen=capacity)
        self.written = 0
        self._starting = True

    def started(self) -> None:
        """The component is up: later lines go to the window, not to the start-up lines."""
        self._starting = False

    def info(self, source: str, message: str, **values: object) -> None:
        """klog.InfoS."""
        self._add(Entry(time.time(), "I", source, message, tuple(values.items())))

    def error(self, source: str, err: object, message: str, **values: object) -> None:
        """klog.ErrorS: the error, when there is one, comes first among the values."""
        pairs = tuple(values.items())
        if err is not None:
            pairs = (("err", str(err)), *pairs)
        self._add(Entry(time.time(), "E", source, message, pairs))

    def infof(self, source: str, text: str) -> None:
        """klog.Infof / Infoln, with the text already formatted."""
        self._add(Entry(time.time(), "I", source, text))

    def warningf(self, source: str, text: str) -> None:
        self._add(Entry(time.time(), "W", source, text))

    def errorf(self, source: str, text: str) -> None:
        self._add(Entry(time.time(), "E", source, text))

    def _add(self, entry: Entry) -> None:
        self.written += 1
        if self._starting and len(self.startup) < STARTUP_LIMIT:
            self.startup.append(entry)
        else:
            self._recent.append(entry)

    def since(self, seq: int) -> list[Entry]:
        """The entries of the window numbered `seq` or later (numbering counts start-up lines too); those
        that have already left the window are not returned."""
        first = self.written - len(self._recent)
        if seq <= first:
            return list(self._recent)
        return list(itertools.islice(self._recent, seq - first, None))

    def window(self) -> int:
        """How many entries the window holds now."""
        return len(self._recent)

    def lines(self) -> list[str]:
        return [e.render() for e in (*self.startup, *self._recent)]
