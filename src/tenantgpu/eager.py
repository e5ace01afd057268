"""Starting a coroutine at once, up to its first wait, and running the rest as a task.

`asyncio.create_task` runs nothing of the coroutine until the loop's next turn, and under load a turn of
the lab's processes takes milliseconds. Where a handler starts work whose first step is a request (the
HAMi scheduler's bind, the device plugin's report of Allocate), starting it at once puts the request on
the wire in this turn. This is what Python 3.12's eager tasks do; the project supports 3.11.
"""

from __future__ import annotations

import asyncio
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
    return loop.create_task(_resume(coro, first), name=name, context=context)


async def _resume(coro: Coroutine[Any, Any, T], first: Any) -> T:
    return await _Resumed(coro, first)


class _Resumed:
    """Hands the task what the started coroutine waits on, and the task's answers back to it."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, waiting_on = self._coro, self._first
        self._first = None
        while True:
            try:
                answer = yield waiting_on
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # what the task throws in (a cancellation) goes to the coroutine
                try:
                    waiting_on = coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    waiting_on = coro.send(answer)
                except StopIteration as done:
                    return done.value
