"""Where each process's CPU goes by library (the interpreter, the kernel, TLS, the event loop, …), from perf.

py-spy names Python frames and charges what C code does (a TLS write, uvloop, the kernel's send) to the
Python line that called it, which makes a socket write look like Python's cost. `perf record -a` samples
every core at a fixed rate and names the shared object each sample was in, so the split between
CPython's interpreter and the C libraries under it is measured, not guessed. Linux only; needs `perf`
and the right to sample every CPU (root, or kernel.perf_event_paranoid <= 0).
"""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RATE_HZ = 499  # not a divisor of the kernel's tick, so samples do not beat with periodic work

# The library a sample was in, by a part of its path; first match wins.
_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("kernel", ("[kernel", "kallsyms")),
    ("CPython interpreter", ("libpython", "/bin/python")),
    ("TLS (OpenSSL)", ("libcrypto", "libssl", "/_ssl.")),
    ("SQLite", ("sqlite3",)),
    ("libc (malloc, memcpy)", ("/libc.so", "/libc-", "/libm.so", "/ld-linux")),
)
_SITE_PACKAGE = re.compile(r"site-packages/([A-Za-z0-9_]+)")
_SAMPLE = re.compile(r"^\s*(\d+)\s+\S+\s+\((.*)\)\s*$")


def start(out: Path) -> subprocess.Popen[bytes] | None:
    """Start sampling every CPU into `out`; None (and why, printed) when perf cannot run here."""
    perf = shutil.which("perf")
    if perf is None:
        print("PROFILE=native needs Linux perf (linux-tools / linux-perf) on PATH")
        return None
    return subprocess.Popen(
        [perf, "record", "-a", "-F", str(RATE_HZ), "-e", "cpu-clock", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def interrupt(recorder: subprocess.Popen[bytes]) -> bytes:
    """Stop a sampling profiler the way that makes it write its output (SIGINT, for perf and py-spy
    alike) and wait for it; what it said on stderr."""
    recorder.send_signal(2)
    try:
        return recorder.communicate(timeout=60)[1] or b""
    except subprocess.TimeoutExpired:
        recorder.kill()
        return b""


def stop(profiler: subprocess.Popen[bytes], out: Path, roles: Mapping[int, str]) -> dict[str, Any]:
    """Stop sampling and split the samples by process role and library; {"error": …} if perf failed."""
    err = interrupt(profiler)
    if not out.exists():
        return {"error": err.decode(errors="replace").strip()[-500:] or "perf wrote no data"}
    script = subprocess.run(
        ["perf", "script", "-i", str(out), "-F", "pid,ip,dso"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if script.returncode != 0:
        return {"error": script.stderr.strip()[-500:]}
    return summarise(script.stdout.splitlines(), roles, RATE_HZ)


def library(dso: str) -> str:
    """The group a shared object's path belongs to: a named group, a site-package, or `other`."""
    for name, parts in _GROUPS:
        if any(part in dso for part in parts):
            return name
    package = _SITE_PACKAGE.search(dso)
    if package is not None:
        return package.group(1)
    if "lib-dynload" in dso:
        return "CPython interpreter"  # the standard library's C modules (_asyncio, _json, …)
    return "other"


def summarise(lines: list[str], roles: Mapping[int, str], rate_hz: int) -> dict[str, Any]:
    """Per role: CPU seconds sampled and each library's share of them, largest first.

    `lines` is `perf script -F pid,ip,dso` output; pid 0 is the idle task, and processes not in `roles`
    (perf itself, anything else running) are counted as `other`.
    """
    samples: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in lines:
        match = _SAMPLE.match(line)
        if match is None:
            continue
        pid = int(match.group(1))
        role = roles.get(pid, "idle" if pid == 0 else "other")
        samples[role][library(match.group(2))] += 1
    result: dict[str, Any] = {}
    for role, counts in sorted(samples.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(counts.values())
        result[role] = {
            "cpu_s": round(total / rate_hz, 2),
            "by_library": [(name, round(100 * n / total, 1)) for name, n in counts.most_common()],
        }
    return result
