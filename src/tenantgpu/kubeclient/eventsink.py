"""client-go's event broadcaster with its sink: a component records an Event and goes on; one task per
broadcaster writes the recorded Events to the API in order, one request at a time.

That is how `record.NewBroadcaster()` + `StartRecordingToSink` behave: `Eventf` only queues the event
(a queue of 1000; when it is full the event is dropped, and client-go logs that it was), and a single
goroutine takes the events off the queue and creates (or, for a repeat, patches) each before the next.
Under a burst the Events of a busy scheduler therefore trail the pods they tell of, instead of
competing with the pods' own writes; a component that stops drops what is still queued, as
`Shutdown()` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tenantgpu.kubeclient.client import KubeClient

log = logging.getLogger(__name__)

MAX_QUEUED_EVENTS = 1000  # client-go's maxQueuedEvents


class EventBroadcaster:
    """One component's recorder and sink: `record()` queues, a task started on first use writes."""

    def __init__(
        self,
        client: KubeClient,
        component: str,
        *,
        host: str | None = None,
        max_queued: int = MAX_QUEUED_EVENTS,
    ) -> None:
        self.client = client
        self.component = component
        self.host = host
        self._queue: asyncio.Queue[tuple[dict[str, Any], str, str, str, dict[str, Any] | None]] = (
            asyncio.Queue(maxsize=max_queued)
        )
        self._sender: asyncio.Task[None] | None = None
        self.dropped = 0

    def record(
        self,
        involved: dict[str, Any],
        reason: str,
        message: str,
        *,
        warning: bool = False,
        reference: dict[str, Any] | None = None,
    ) -> None:
        """Queue an Event about `involved`; returns at once. A full queue drops it (counted in
        `dropped`), as client-go's broadcaster does under a flood."""
        try:
            self._queue.put_nowait((involved, reason, message, "Warning" if warning else "Normal", reference))
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning("%s: event queue full, dropped %s event on %s", self.component, reason,
                        (involved.get("metadata") or {}).get("name"))  # fmt: skip
            return
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send(), name=f"events-{self.component}")

    async def _send(self) -> None:
        while True:
            involved, reason, message, kind, reference = await self._queue.get()
            try:
                await self.client.create_event(
                    involved, reason=reason, message=message, type=kind, component=self.component,
                    host=self.host, reference=reference, decode=False,
                )  # fmt: skip
            except asyncio.CancelledError:
                raise
            except Exception as err:  # best effort: a lost event must not stop the ones after it
                log.debug("event %s on %s: %s", reason, (involved.get("metadata") or {}).get("name"), err)
            finally:
                self._queue.task_done()

    async def flush(self) -> None:
        """Wait until every Event recorded so far has been written (or has failed)."""
        if self._sender is not None and not self._sender.done():
            await self._queue.join()

    async def close(self) -> None:
        """Stop writing; what is still queued is dropped, as client-go's Shutdown() leaves it."""
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
            self._sender = None
        while not self._queue.empty():
            self._queue.get_nowait()
            self._queue.task_done()
