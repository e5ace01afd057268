"""HAMi's node lock (`hami.io/mutex.lock` on the Node): the rules as pure functions, and the API calls.

One HAMi pod per node may be between Bind and the device plugin's Allocate. The value is
`<RFC3339>,<namespace>,<pod>` (legacy: a bare RFC3339 time). Rules follow HAMi v2.10's
`pkg/util/nodelock` (tag v2.10.0): absent ⇒ set; older than the timeout ⇒ force release and set; held by
this very pod ⇒ already acquired; held by another pod that no longer exists ⇒ release and set; otherwise
the bind fails with "node <n> has been locked within <timeout>: node lock contention". Release is by
owner only unless forced.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

from tenantgpu.kubeclient import ApiError, KubeClient
from tenantgpu.kubeclient.client import sleep_backoff

NODE_LOCK = "hami.io/mutex.lock"
_SEP = ","
_RETRY_STEPS = 5  # HAMi's DefaultStrategy: 5 steps from 100 ms, factor 2, jitter 0.5
# Go's `%+v` of that wait.Backoff, as HAMi's errors print it.
_STRATEGY = "{Duration:100ms Factor:2 Jitter:0.5 Steps:5 Cap:0s}"


class NodeLockError(Exception):
    """The node is locked by another pod (HAMi's "node lock contention")."""


class NodeLockWriteError(Exception):
    """The lock could not be written after HAMi's retries (e.g. the scheduler may not patch nodes)."""


@dataclass(frozen=True)
class LockHolder:
    """A parsed lock value; namespace/pod are empty for the legacy bare-timestamp form."""

    locked_at: datetime
    namespace: str
    pod: str


class LockVerdict(Enum):
    FREE = "free"  # no lock: set it
    HELD = "held"  # this pod holds it already (v2.10 treats it as acquired)
    EXPIRED = "expired"  # older than the timeout: force release, then set
    HOLDER_CHECK = "holder-check"  # another pod holds it: release only if that pod is gone
    CONTENDED = "contended"  # live lock we may not break


def format_lock(now: datetime, namespace: str, pod: str) -> str:
    return f"{now.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}{_SEP}{namespace}{_SEP}{pod}"


def parse_lock(value: str) -> LockHolder:
    """Parse a lock value; raises ValueError on a malformed one, as HAMi's ParseNodeLock does."""
    if _SEP not in value:
        return LockHolder(_parse_rfc3339(value), "", "")
    parts = value.split(_SEP)
    if len(parts) != 3:
        raise ValueError(f"malformed lock annotation: expected 3 parts, got {len(parts)} from {value}")
    return LockHolder(_parse_rfc3339(parts[0]), parts[1], parts[2])


def _parse_rfc3339(text: str) -> datetime:
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"lock time {text!r} has no zone")
    return parsed


def judge_lock(
    value: str | None, namespace: str, pod: str, now: datetime, timeout: timedelta
) -> tuple[LockVerdict, LockHolder | None]:
    """What the scheduler may do with the node's current lock value for pod namespace/pod."""
    if value is None:
        return LockVerdict.FREE, None
    holder = parse_lock(value)
    if now - holder.locked_at > timeout:
        return LockVerdict.EXPIRED, holder
    if (holder.namespace, holder.pod) == (namespace, pod):
        return LockVerdict.HELD, holder
    if holder.namespace and holder.pod:
        return LockVerdict.HOLDER_CHECK, holder
    return LockVerdict.CONTENDED, holder


def owned_by(value: str | None, namespace: str, pod: str) -> bool:
    return value is not None and value.endswith(f"{_SEP}{namespace}{_SEP}{pod}")


def format_timeout(timeout: timedelta) -> str:
    """Go's time.Duration spelling, as HAMi's error text shows it (`5m0s`)."""
    total = timeout.total_seconds()
    minutes, seconds = divmod(int(total), 60)
    hours, minutes = divmod(minutes, 60)
    frac = total - int(total)
    sec = f"{seconds + frac:g}s"
    if hours:
        return f"{hours}h{minutes}m{sec}"
    if minutes:
        return f"{minutes}m{sec}"
    return sec


def contention_message(node: str, timeout: timedelta) -> str:
    return f"node {node} has been locked within {format_timeout(timeout)}: node lock contention"


# --- the API side -----------------------------------------------------------------------------


def _lock_value(node: dict[str, Any]) -> str | None:
    return ((node.get("metadata") or {}).get("annotations") or {}).get(NODE_LOCK)


async def _patch_lock(
    client: KubeClient,
    node_name: str,
    value: str | None,
    node: dict[str, Any] | None = None,
    *,
    decode: bool = True,
) -> dict[str, Any]:
    """Merge-patch the lock with the node's resourceVersion (optimistic concurrency), retried like HAMi.

    A node object the caller already holds (from a watch) saves the first GET; a stale one just costs a
    409 Conflict and a retry with a fresh read.
    """
    last: Exception | None = None
    for attempt in range(_RETRY_STEPS):
        try:
            if node is None:
                node = await client.get("nodes", node_name)
            rv = node["metadata"]["resourceVersion"]
            if value is not None and _lock_value(node) is not None:
                raise NodeLockError(f"node {node_name} is locked: node lock contention")
            patch = {"metadata": {"annotations": {NODE_LOCK: value}, "resourceVersion": rv}}
            return await client.patch("nodes", node_name, patch, decode=decode)
        except ApiError as err:
            last, node = err, None
            if err.code == 404:
                raise
            if err.code != 409:
                await sleep_backoff(attempt)
    assert last is not None
    # HAMi's SetNodeLock / ReleaseNodeLock wrap the last API error so (client-go's text is the Status's).
    what = "set" if value is not None else "release"
    raise NodeLockWriteError(
        f"failed to {what} node lock (node={node_name}, retry strategy={_STRATEGY}): {last.message}"
    ) from last


class NodeLocks:
    """Takes and releases HAMi node locks through the API; serialises attempts per node in-process."""

    def __init__(self, client: KubeClient, timeout: timedelta = timedelta(minutes=5)) -> None:
        self.client = client
        self.timeout = timeout
        self._local: dict[str, asyncio.Lock] = {}

    def _mutex(self, node: str) -> asyncio.Lock:
        return self._local.setdefault(node, asyncio.Lock())

    async def lock(
        self, node_name: str, namespace: str, pod: str, *, node: dict[str, Any] | None = None
    ) -> None:
        """Acquire the lock for namespace/pod or raise NodeLockError."""
        async with self._mutex(node_name):
            if node is None:
                node = await self.client.get("nodes", node_name)
            value = _lock_value(node)
            try:
                verdict, holder = judge_lock(value, namespace, pod, datetime.now(UTC), self.timeout)
            except ValueError as err:
                raise NodeLockError(str(err)) from err
            if verdict is LockVerdict.HOLDER_CHECK:
                assert holder is not None
                try:
                    await self.client.get("pods", holder.pod, holder.namespace)
                except ApiError as err:
                    if err.code != 404:
                        raise
                    verdict = LockVerdict.EXPIRED  # dangling: the holder pod is gone
                else:
                    verdict = LockVerdict.CONTENDED
            if verdict is LockVerdict.HELD:
                return
            if verdict is LockVerdict.CONTENDED:
                raise NodeLockError(contention_message(node_name, self.timeout))
            if verdict is LockVerdict.EXPIRED:
                node = await _patch_lock(self.client, node_name, None, node)
            lock = format_lock(datetime.now(UTC), namespace, pod)
            await _patch_lock(self.client, node_name, lock, node, decode=False)

    async def release(self, node_name: str, namespace: str, pod: str, *, force: bool = False) -> bool:
        """Release if held by namespace/pod (or `force`); returns whether a lock was removed."""
        async with self._mutex(node_name):
            return await release_node_lock(self.client, node_name, namespace, pod, force=force)


async def release_node_lock(
    client: KubeClient,
    node_name: str,
    namespace: str,
    pod: str,
    *,
    force: bool = False,
    node: dict[str, Any] | None = None,
) -> bool:
    """The device plugin's and the scheduler's release: owner-checked merge patch setting the key to null.

    `node` is a recent view of the Node (saves a GET); a stale one is corrected by a fresh read, also
    when it shows no lock or another pod's: a watched view may not show the lock this pod took yet, and
    giving up on it would leave the node locked until the lock expires.
    """
    fresh = node is None
    for _ in range(_RETRY_STEPS):
        if node is None:
            node = await client.get("nodes", node_name)
            fresh = True
        value = _lock_value(node)
        if value is None or not (force or owned_by(value, namespace, pod)):
            if fresh:
                return False
            node = None
            continue
        patch = {
            "metadata": {
                "annotations": {NODE_LOCK: None},
                "resourceVersion": node["metadata"]["resourceVersion"],
            }
        }
        try:
            await client.patch("nodes", node_name, patch, decode=False)
            return True
        except ApiError as err:
            if err.code != 409:
                raise
            node = None  # stale view: read again and re-check the owner
    return False
