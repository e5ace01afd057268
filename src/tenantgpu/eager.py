"""Starting a coroutine at once, up to its first wait, and running the rest as a task.

`asyncio.create_task` runs nothing of the coroutine until the loop's next turn, and under load a turn of
the lab's processes takes milliseconds. Where a handler starts work whose first step is a request (the
HAMi scheduler's bind, the device plugin's report of Allocate), starting it at once puts the request on
the wire in this turn. This is what Python 3.12's eager tasks do; the project supports 3.11.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def start(coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Future[T]:
    """Run `coro` now until it first waits, then on as a task; a coroutine that finishes without waiting
    gives a future that is already done. Like a task, the first step runs in a copy of the context."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    try:
        first = context.run(coro.send, None)
    except StopIteration as done:
        future: asyncio.Future[T] = loop.create_future()
        future.set_result(done.value)
        return future
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        future = loop.create_future()
        if isinstance(exc, asyncio.CancelledError):
            future.cancel()
        else:
            future.set_exception(exc)
        return future
    return loop.create_task(_Resumed(coro, first), name=name, context=context)


class _Resumed(collections.abc.Coroutine):  # type: ignore[type-arg]
    """What the task drives in place of the started coroutine: its first step hands the task what the
    coroutine waits on; after that, and for a cancellation even before, it passes the task's sends and
    throws straight to the coroutine, which so sees a cancellation as it would in a task of its own."""

    __slots__ = ("_coro", "_first", "_started")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first
        self._started = False

    def send(self, value: Any) -> Any:
        if not self._started:
            self._started = True
            first, self._first = self._first, None
            return first
        return self._coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        if not self._started and asyncio.isfuture(self._first):
            # A task cancelled before its first step cancels nothing itself; what the coroutine waits on
            # is cancelled here, as a task cancels the future it waits on.
            self._first.cancel()
        self._started = True
        self._first = None
        if val is None and tb is None:
            return self._coro.throw(typ)
        return self._coro.throw(typ, val, tb)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, Any, Any]:
        raise TypeError("only the task that started it drives a resumed coroutine")
