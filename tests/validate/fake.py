"""A small in-memory stand-in for one cluster, shaped like the suite's `Cluster` interface (JSON in, JSON out)."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any

from tenantgpu.validate.cluster import JSON, ApiError, Unreachable

_uids = itertools.count(1)


class FakeCluster:
    """Objects by kind; `on_create_pod` lets a test play the webhook and scheduler for created pods."""

    def __init__(self, name: str, *, server: str | None = None, ca: str | None = None) -> None:
        self.name = name
        self.kubeconfig = f"/fake/{name}.kubeconfig"
        self._server = server or f"https://127.0.0.1:{6443 + len(name)}/{name}"
        self._ca = ca or f"ca-of-{name}"
        self.objects: dict[str, dict[tuple[str | None, str], JSON]] = {}
        self.logs: dict[tuple[str, str], str] = {}
        self.on_create_pod: Callable[[FakeCluster, JSON], None] | None = None
        self.unreachable: str | None = None
        self.accepts_foreign_credentials = False
        self.deleted: list[tuple[str, str | None, str]] = []

    # the Cluster interface
    def server(self) -> str:
        return self._server

    def ca_fingerprint(self) -> str | None:
        return self._ca

    def version(self) -> JSON:
        self._reach()
        return {"gitVersion": "v1.31.4"}

    def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[JSON]:
        self._reach()
        items = [
            copy.deepcopy(obj)
            for (ns, _), obj in sorted(self.objects.get(kind, {}).items(), key=lambda kv: str(kv[0]))
            if namespace is None or ns == namespace
        ]
        if label_selector:
            key, _, value = label_selector.partition("=")
            items = [o for o in items if (o["metadata"].get("labels") or {}).get(key) == value]
        return items

    def get(self, kind: str, name: str, namespace: str | None = None) -> JSON | None:
        self._reach()
        obj = self.objects.get(kind, {}).get((namespace, name))
        return copy.deepcopy(obj) if obj else None

    def create(self, kind: str, body: JSON, namespace: str | None = None) -> JSON:
        self._reach()
        obj = copy.deepcopy(body)
        obj.setdefault("metadata", {})
        if namespace:
            obj["metadata"]["namespace"] = namespace
        obj["metadata"].setdefault("uid", f"uid-{next(_uids)}")
        key = (namespace, obj["metadata"]["name"])
        if key in self.objects.get(kind, {}):
            raise ApiError(409, "AlreadyExists", f"{kind} {key} already exists")
        if kind == "Pod":
            obj.setdefault("status", {"phase": "Pending"})
            obj["spec"].setdefault("schedulerName", "default-scheduler")
        self.objects.setdefault(kind, {})[key] = obj
        if kind == "Pod" and self.on_create_pod:
            self.on_create_pod(self, obj)
        return copy.deepcopy(obj)

    def patch(self, kind: str, name: str, body: JSON, namespace: str | None = None) -> JSON:
        obj = self.objects[kind][(namespace, name)]
        _merge(obj, body)
        return copy.deepcopy(obj)

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        self._reach()
        self.deleted.append((kind, namespace, name))
        self.objects.get(kind, {}).pop((namespace, name), None)
        if kind == "Namespace":
            for bucket in self.objects.values():
                for key in [k for k in bucket if k[0] == name]:
                    bucket.pop(key)

    def pod_log(self, name: str, namespace: str) -> str:
        return self.logs.get((namespace, name), "")

    def with_credentials_against(self, other: Any) -> Any:
        return _ForeignCredentials(self, other)

    # helpers for tests
    def add(self, kind: str, obj: JSON, namespace: str | None = None) -> JSON:
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {}).setdefault("uid", f"uid-{next(_uids)}")
        if namespace:
            obj["metadata"]["namespace"] = namespace
        self.objects.setdefault(kind, {})[(namespace, obj["metadata"]["name"])] = obj
        return obj

    def _reach(self) -> None:
        if self.unreachable:
            raise Unreachable(f"{self._server}: {self.unreachable}")


class _ForeignCredentials:
    def __init__(self, mine: FakeCluster, theirs: FakeCluster) -> None:
        self.mine, self.theirs = mine, theirs

    def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[JSON]:
        if self.theirs.accepts_foreign_credentials:
            return self.theirs.list(kind)
        raise ApiError(401, "Unauthorized", "Unauthorized")


def _merge(target: JSON, patch: JSON) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def node(name: str, *, ready: bool = True, register: str | None = None) -> JSON:
    annotations = {"hami.io/node-nvidia-register": register} if register is not None else {}
    return {
        "metadata": {"name": name, "annotations": annotations},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def register_json(*gpus: tuple[str, str, int]) -> str:
    """v2.10 JSON for (uuid, type, devmem) GPUs, with HAMi's omitempty on index 0."""
    import json

    items = []
    for index, (uuid, gpu_type, devmem) in enumerate(gpus):
        item: dict[str, Any] = {"id": uuid}
        if index:
            item["index"] = index
        item.update(
            {
                "count": 10,
                "devmem": devmem,
                "devcore": 100,
                "type": gpu_type,
                "mode": "hami-core",
                "health": True,
            }
        )
        items.append(item)
    return json.dumps(items)
