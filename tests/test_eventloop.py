"""The event loop runner every lab process uses."""

from __future__ import annotations

import asyncio
import signal

from tenantgpu import eventloop


def test_runs_on_uvloop_and_returns_the_result() -> None:
    async def main() -> str:
        return type(asyncio.get_running_loop()).__module__.split(".")[0]

    assert eventloop.run(main()) == "uvloop"


def test_ctrl_c_raises_keyboard_interrupt_again_after_a_run_that_handled_signals() -> None:
    # A process that ran a lab in the foreground (which stops on SIGINT) must still stop on Ctrl-C later.
    async def main() -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, lambda: None)

    before = signal.getsignal(signal.SIGINT)
    eventloop.run(main())
    assert signal.getsignal(signal.SIGINT) is before
