"""The replay's process pool: a forked worker does not finalize the objects it inherited."""

from __future__ import annotations

import gc
import os
from pathlib import Path

from tenantgpu.replay.pool import process_pool

_KEPT: list[object] = []  # what the parent holds; a worker lets go of its copy


class _Leftover:
    """Stands for an object a long-lived parent holds in a reference cycle (a gRPC channel in a test
    run), whose finalizer must not run in a worker: the real one waits on a thread the fork did not copy."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark
        self.cycle = self

    def __del__(self) -> None:
        self.mark.write_text(str(os.getpid()))


def _drop_and_collect() -> int:
    _KEPT.clear()
    gc.collect()
    return os.getpid()


def test_a_forked_worker_does_not_finalize_what_it_inherited(tmp_path: Path) -> None:
    mark = tmp_path / "finalized"
    _KEPT.append(_Leftover(mark))
    try:
        with process_pool(2) as pool:
            workers = {pool.submit(_drop_and_collect).result() for _ in range(4)}
        assert workers and os.getpid() not in workers
        assert not mark.exists()  # no worker ran the finalizer of its inherited copy
    finally:
        _KEPT.clear()
    gc.collect()
    assert mark.read_text() == str(os.getpid())  # the parent still finalizes its own, once let go
