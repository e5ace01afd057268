"""Namespace GPU quotas as HAMi tracks them (`pkg/device/quota.go`): `limits.<memory|core resource>` only."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tenantgpu.gpushare.quantity import QuantityError, as_int64


@dataclass
class _Entry:
    used: int = 0
    limits: dict[str, int] = field(default_factory=dict)  # quota object name -> limit, in arrival order

    def limit(self) -> int | None:
        # HAMi keeps one limit per namespace and resource: the last ResourceQuota written wins.
        return next(reversed(self.limits.values())) if self.limits else None


class QuotaBook:
    """Per namespace: used and limit of the vendor memory (MiB) and core resources."""

    def __init__(self, resources: Iterable[str], memory_factor: int = 1, memory_resource: str = "") -> None:
        self._resources = frozenset(resources)
        self._memory_resource = memory_resource
        self._memory_factor = memory_factor
        self._book: dict[str, dict[str, _Entry]] = {}

    def _entry(self, namespace: str, resource: str) -> _Entry:
        return self._book.setdefault(namespace, {}).setdefault(resource, _Entry())

    def upsert_quota(self, quota: dict[str, Any]) -> None:
        """Track `spec.hard["limits.<resource>"]` for managed resources; other keys are ignored as by HAMi."""
        meta = quota.get("metadata") or {}
        namespace, name = meta.get("namespace", "default"), meta.get("name", "")
        self.remove_quota(namespace, name)
        for key, value in ((quota.get("spec") or {}).get("hard") or {}).items():
            if not key.startswith("limits."):
                continue
            resource = key[len("limits.") :]
            if resource not in self._resources:
                continue
            try:
                limit = as_int64(value)
            except QuantityError:
                limit = None
            if limit is None:
                continue
            self._entry(namespace, resource).limits[name] = limit

    def remove_quota(self, namespace: str, name: str) -> None:
        for entry in self._book.get(namespace, {}).values():
            entry.limits.pop(name, None)

    def add_usage(self, namespace: str, usage: dict[str, int]) -> None:
        for resource, amount in usage.items():
            self._entry(namespace, resource).used += amount

    def remove_usage(self, namespace: str, usage: dict[str, int]) -> None:
        for resource, amount in usage.items():
            entry = self._entry(namespace, resource)
            entry.used = max(0, entry.used - amount)

    def limited(self, namespace: str) -> bool:
        """Does any managed quota constrain this namespace?"""
        return any(e.limit() is not None for e in self._book.get(namespace, {}).values())

    def fits(self, namespace: str, request: dict[str, int]) -> bool:
        """FitQuota: used + request <= limit for every limited resource (memory limit x memoryFactor)."""
        entries = self._book.get(namespace)
        if not entries:
            return True
        for resource, amount in request.items():
            entry = entries.get(resource)
            if entry is None:
                continue
            limit = entry.limit()
            if limit is None:
                continue
            if resource == self._memory_resource and self._memory_factor > 1:
                limit *= self._memory_factor
            if entry.used + amount > limit:
                return False
        return True

    def used(self, namespace: str, resource: str) -> int:
        entry = self._book.get(namespace, {}).get(resource)
        return entry.used if entry else 0

    def limit(self, namespace: str, resource: str) -> int | None:
        entry = self._book.get(namespace, {}).get(resource)
        return entry.limit() if entry else None
