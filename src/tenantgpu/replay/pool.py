"""The process pool the replay's runs fan out to."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

__all__ = ["process_pool"]


@contextlib.contextmanager
def process_pool(jobs: int) -> Iterator[ProcessPoolExecutor]:
    """A pool of `jobs` forked workers. A forked worker inherits a copy of every object of its parent,
    and its collector would finalize the inherited ones that are, or become, garbage there: a gRPC
    channel left over in a long-lived parent (a test run) waits in its finalizer on a thread the fork
    did not copy, and the worker spun for ever. The parent's objects are frozen (`gc.freeze`, as the gc
    documentation advises before a fork) while the pool lives, so a worker collects only what it made."""
    gc.freeze()
    try:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            yield pool
    finally:
        gc.unfreeze()
