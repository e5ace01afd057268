"""Runs a process's main coroutine on uvloop when it is installed, else on asyncio's own loop.

Every long-running tenantgpu process is a server on the wire; uvloop's C event loop and TLS transport
roughly double what one core serves (see the README's benchmarks). The fallback keeps platforms without
uvloop (Windows) working.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, on uvloop if it can be imported."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on every platform it supports
        return asyncio.run(main)
    return uvloop.run(main)


def loop_name() -> str:
    """The running loop's implementation, for benchmark reports."""
    return type(asyncio.get_running_loop()).__module__.split(".")[0]
