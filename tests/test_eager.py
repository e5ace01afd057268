"""eager.start: a coroutine's first step runs at once, the rest as a task, with a task's semantics."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from tenantgpu import eager

LOOPS = [pytest.param(asyncio.new_event_loop, id="asyncio"), pytest.param(uvloop.new_event_loop, id="uvloop")]


def _run(loop_factory: Callable[[], asyncio.AbstractEventLoop], main: Coroutine[Any, Any, Any]) -> Any:
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main)


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_the_first_step_runs_before_start_returns_and_the_rest_as_a_task(loop_factory) -> None:  # type: ignore[no-untyped-def]
    steps: list[str] = []

    async def work(answer: asyncio.Future[int]) -> int:
        steps.append("sent")  # e.g. a request written to its connection
        value = await answer
        await asyncio.sleep(0)
        steps.append("answered")
        return value + 1

    async def main() -> None:
        answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        task = eager.start(work(answer))
        assert steps == ["sent"] and not task.done()
        answer.set_result(41)
        assert await task == 42
        assert steps == ["sent", "answered"]

    _run(loop_factory, main())


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_a_coroutine_that_never_waits_gives_a_done_future(loop_factory) -> None:  # type: ignore[no-untyped-def]
    async def quick() -> str:
        return "done"

    async def fails() -> None:
        raise ValueError("bad input")

    async def main() -> None:
        done = eager.start(quick())
        assert done.done() and done.result() == "done"
        failed = eager.start(fails())
        assert failed.done()
        with pytest.raises(ValueError, match="bad input"):
            await failed

    _run(loop_factory, main())


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_errors_after_a_wait_reach_whoever_awaits(loop_factory) -> None:  # type: ignore[no-untyped-def]
    async def fails_later() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("lost the lock")

    async def main() -> None:
        outcome = await asyncio.gather(eager.start(fails_later()), return_exceptions=True)
        assert isinstance(outcome[0], RuntimeError)

    _run(loop_factory, main())


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_cancelling_the_task_cancels_the_waiting_coroutine(loop_factory) -> None:  # type: ignore[no-untyped-def]
    cleaned: list[str] = []

    async def waits_forever() -> None:
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            cleaned.append("cancelled")
            raise

    async def main() -> None:
        task = eager.start(waits_forever())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert cleaned == ["cancelled"] and task.cancelled()

    _run(loop_factory, main())


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_the_coroutine_runs_in_a_copy_of_the_context(loop_factory) -> None:  # type: ignore[no-untyped-def]
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="caller")

    async def sets_and_reads() -> tuple[str, str]:
        var.set("task")
        first = var.get()
        await asyncio.sleep(0)
        return first, var.get()  # still the task's value after the wait

    async def main() -> None:
        task = eager.start(sets_and_reads())
        assert var.get() == "caller"  # the first step's change stayed in the task's context
        assert await task == ("task", "task")

    _run(loop_factory, main())


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_a_cancellation_before_the_task_first_runs_reaches_the_coroutine(loop_factory) -> None:  # type: ignore[no-untyped-def]
    """The kubelet cancels a pod's start when the pod is deleted, possibly in the same loop turn: the
    started coroutine must see the CancelledError (and clean up), not be dropped half-way."""
    cleaned: list[str] = []
    waited_on: list[asyncio.Future[None]] = []

    async def waits_forever() -> None:
        waited_on.append(asyncio.get_running_loop().create_future())
        try:
            await waited_on[0]
        finally:
            cleaned.append("cleaned up")

    async def main() -> None:
        task = eager.start(waits_forever())
        task.cancel()  # before the loop turns: the task has not run a step of its own yet
        with pytest.raises(asyncio.CancelledError):
            await task
        assert cleaned == ["cleaned up"] and task.cancelled()
        assert waited_on[0].cancelled()  # as a task cancels what it waits on (a dial, a response)

    _run(loop_factory, main())
