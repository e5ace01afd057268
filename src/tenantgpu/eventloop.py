"""Runs a process's main coroutine on uvloop when it is installed, else on asyncio's own loop.

Every long-running tenantgpu process is a server on the wire; uvloop's C event loop and TLS transport
roughly double what one core serves (see the README's benchmarks). The fallback keeps platforms without
uvloop (Windows) working.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, on uvloop if it can be imported."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on every platform it supports
        return asyncio.run(main)
    # uvloop leaves its own handler on signals given to `add_signal_handler` after the loop closes,
    # which would swallow a later Ctrl-C in the same process; put back what was there before.
    saved = _signal_handlers()
    try:
        return uvloop.run(main)
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)


def _signal_handlers() -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
