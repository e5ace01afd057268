"""The generic store: get, list, create, update, patch, delete and watch for every kind.

One code path serves all resources (kube-apiserver's `generic/registry.Store`); what differs per kind
comes from its `Strategy`. Reads come from the watch cache; writes go to the datastore first and are
then recorded in the cache, which tells the watchers.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.admission import AdmissionAttributes, AdmissionChain
from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.disabledfields import DisabledFields
from tenantgpu.apiserver.fieldmanager import FieldManager, keep_managed_times
from tenantgpu.apiserver.fieldtree import unmarshal_message
from tenantgpu.apiserver.fieldversions import LATEST
from tenantgpu.apiserver.jsoncodec import clone, loads
from tenantgpu.apiserver.kinds import VIRTUAL_KINDS, Kind, KindTable
from tenantgpu.apiserver.podresize import resize_base
from tenantgpu.apiserver.serviceips import ServiceNetwork
from tenantgpu.apiserver.sharing import WORKLOAD_KINDS, share_rbac_object, share_workload_object
from tenantgpu.apiserver.storage import Datastore, KeyExists, KeyNotFound, RevisionMismatch
from tenantgpu.apiserver.uids import UidSource
from tenantgpu.apiserver.validation import default as default_object
from tenantgpu.apiserver.validation import validate as validate_object
from tenantgpu.apiserver.watchcache import (
    Entry,
    Event,
    Predicate,
    ResourceCache,
    TriggerField,
    Watcher,
    encode,
)

Obj = dict[str, Any]
Mutation = Callable[[Obj], Obj]

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_UPDATE_RETRIES = 8
_NONE: frozenset[str] = frozenset()
_RESET_ON_CREATE = frozenset({"status"})  # what a create leaves undefaulted for the strategy to fill
# Losing to a write that is still being committed is progress (someone else's), so it is not a failed
# attempt; this only bounds a pathological stream of them.
_MAX_COMMIT_WAITS = 10_000
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def now_rfc3339() -> str:
    return _format_second(int(time.time()))


@functools.lru_cache(maxsize=2)
def _format_second(second: int) -> str:
    # Timestamps have whole-second resolution, so each second is formatted once (a hot path).
    return dt.datetime.fromtimestamp(second, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _cause(item: Any) -> dict[str, str]:
    if isinstance(item, dict):
        return {k: str(v) for k, v in item.items()}
    if hasattr(item, "to_status_cause"):
        return item.to_status_cause()
    return {
        "reason": str(getattr(item, "reason", "FieldValueInvalid")),
        "message": str(getattr(item, "message", item)),
        "field": str(getattr(item, "field", "")),
    }


_METADATA_TYPES = {
    "name": "string",
    "generateName": "string",
    "namespace": "string",
    "resourceVersion": "string",
    "uid": "string",
    "labels": "map[string]string",
    "annotations": "map[string]string",
    "finalizers": "[]string",
}


# Empty maps and lists that kube never returns: these fields are `omitempty` in its Go types, so an empty
# one is gone once the object is encoded (`labels: {}` in a manifest is not stored).
_OMIT_EMPTY_METADATA = ("labels", "annotations", "finalizers", "ownerReferences", "managedFields")
_OMIT_EMPTY_FIELDS = {"ConfigMap": ("data", "binaryData"), "Secret": ("data", "stringData")}


def _omit_empty(kind: Kind, obj: Obj) -> None:
    # `metadata` is always the write's own copy; other fields may be shared with the stored object, so
    # they are only unlinked from `obj`, never changed.
    meta = obj["metadata"]
    for field in _OMIT_EMPTY_METADATA:
        if field in meta and not meta[field]:
            del meta[field]
    for field in _OMIT_EMPTY_FIELDS.get(kind.kind, ()):
        if field in obj and not obj[field]:
            del obj[field]


def _count_generation(kind: Kind, new: Obj, old: Obj, subresource: str) -> None:
    """A new generation when the update changes what the kind's strategy counts, judged on the defaulted
    object as kube's strategies judge it (decoding defaults first): `gpumem: 8000` applied again over a
    stored `8k` is the same spec, so a repeated apply leaves the generation, and the object, as they were.
    A status update (kube's status strategies never count) and a binding (it sets `spec.nodeName`
    without the update strategy) are no new generation."""
    policy = kind.strategy.generation
    old_meta = old["metadata"]
    if policy is None or "generation" not in old_meta or subresource in ("status", "binding"):
        return
    if policy.counts is None:
        fixed = (
            ("metadata", "apiVersion", "kind", "status")
            if kind.has_status
            else ("metadata", "apiVersion", "kind")
        )
        counted: Iterable[str] = (k for k in set(new) | set(old) if k not in fixed)
    else:
        counted = policy.counts
    new_meta = new["metadata"]
    if any(new.get(k) != old.get(k) for k in counted) or any(
        new_meta.get(k) != old_meta.get(k) for k in policy.metadata
    ):
        new_meta["generation"] = int(old_meta["generation"]) + 1
    if policy.template_annotation:
        # kube keeps the template generation in the spec and writes it out as this annotation: what
        # the client sent there is replaced by the stored one, counted when the template changed.
        stored = _template_generation(old_meta, policy.template_annotation)
        changed = (new.get("spec") or {}).get("template") != (old.get("spec") or {}).get("template")
        _set_annotation(new_meta, policy.template_annotation, str(stored + 1 if changed else stored))


def _template_generation(meta: Obj, key: str) -> int:
    """A template generation as apps/v1's conversion reads it from the annotation (at least 1)."""
    try:
        return max(int((meta.get("annotations") or {}).get(key)), 1)
    except (TypeError, ValueError):
        return 1


def _set_annotation(meta: Obj, key: str, value: str) -> None:
    """Sets one annotation on a copy of the annotations (they may be the stored object's)."""
    meta["annotations"] = {**(meta.get("annotations") or {}), key: value}


def _mark_deleting(meta: Obj) -> None:
    """The first mark for deletion (graceful, or held by finalizers) is a new generation, where the
    object has one (kube's BeforeDelete and the store's markAsDeleting)."""
    if not meta.get("deletionTimestamp") and int(meta.get("generation") or 0) > 0:
        meta["generation"] = int(meta["generation"]) + 1


def _has_type(value: Any, wanted: str) -> bool:
    if wanted == "string":
        return isinstance(value, str)
    if wanted == "map[string]string":
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


@contextlib.contextmanager
def _well_formed(kind: Kind) -> Iterator[None]:
    """Strategies, defaulting and validation assume kube's types; a body that breaks them is the
    client's mistake (kube would have failed to decode it), so it becomes 400, never 500."""
    try:
        yield
    except (TypeError, AttributeError, KeyError, IndexError, ValueError) as exc:
        raise errors.bad_request(
            f"unable to decode the {kind.kind}: a field has the wrong type ({exc})"
        ) from exc


class _Attempts:
    """The attempts of one read-modify-write: each lost compare-and-swap waits until the winner is
    committed (so the next attempt reads it from the cache); only losses to already committed writes
    count towards `_UPDATE_RETRIES`."""

    def __init__(self, datastore: Datastore) -> None:
        self._datastore = datastore
        self._failures = 0
        self._waits = 0
        self._started = False
        self.retry = False  # whether the current attempt follows a lost one

    def __aiter__(self) -> _Attempts:
        return self

    async def __anext__(self) -> None:
        if not self._started:
            self._started = True
            return
        self.retry = True
        if await self._datastore.settled() and self._waits < _MAX_COMMIT_WAITS:
            self._waits += 1
            return
        self._failures += 1
        if self._failures >= _UPDATE_RETRIES:
            raise StopAsyncIteration


PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")
# The finalizers through which the garbage collector finishes a deletion that waits for dependents.
ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"


@dataclass
class DeleteOptions:
    grace_period_seconds: int | None = None
    uid: str | None = None
    resource_version: str | None = None
    propagation_policy: str | None = None

    @classmethod
    def parse(cls, body: Obj | None, query: dict[str, str]) -> DeleteOptions:
        body = body or {}
        grace = body.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        pre = body.get("preconditions") or {}
        try:
            grace_value = None if grace is None else int(grace)
        except (TypeError, ValueError) as exc:
            raise errors.bad_request(f"invalid gracePeriodSeconds: {grace!r}") from exc
        policy = body.get("propagationPolicy", query.get("propagationPolicy"))
        orphan = body.get("orphanDependents", query.get("orphanDependents"))
        if policy is not None and policy not in PROPAGATION_POLICIES:
            raise errors.invalid(
                "DeleteOptions",
                "",
                "meta.k8s.io",
                [
                    {
                        "reason": "FieldValueNotSupported",
                        "message": f'Unsupported value: "{policy}": supported values: "Foreground", '
                        '"Background", "Orphan", "nil"',
                        "field": "propagationPolicy",
                    }
                ],
            )
        if orphan is not None and policy is None:
            # The deprecated boolean: true orphans, false lets the garbage collector delete dependents.
            policy = "Orphan" if orphan in (True, "true") else "Background"
        return cls(grace_value, pre.get("uid"), pre.get("resourceVersion"), policy)


def _carry_over(new: Obj, old: Obj, field: str) -> None:
    """Makes `new[field]` what `old` has there (absent if `old` has none), copying only if it differs."""
    if field not in old:
        new.pop(field, None)
    elif field not in new or new[field] != old[field]:
        new[field] = clone(old[field])


# kube-apiserver's watch triggers (the pod and node storages' TriggerFunc): each kubelet watches its own
# pods and its own node, and is offered only their events instead of every pod's and node's.
WATCH_TRIGGERS = {
    ("", "Pod"): TriggerField("spec.nodeName", lambda obj: (obj.get("spec") or {}).get("nodeName") or ""),
    ("", "Node"): TriggerField("metadata.name", lambda obj: obj["metadata"].get("name") or ""),
}


def _shared_fields(new: Obj, old: Obj) -> frozenset[str]:
    """The top-level fields `new` shares with the stored `old` (which nothing may change in place)."""
    return frozenset(k for k, v in new.items() if isinstance(v, dict | list) and old.get(k) is v)


def _binding_base(old: Obj, new: Obj) -> Obj:
    """The object a binding is validated against: `old` with the new spec.nodeName.

    A binding is the one write allowed to set the otherwise immutable spec.nodeName; everything else in
    the spec stays as immutable as in any other update.
    """
    node = (new.get("spec") or {}).get("nodeName")
    return {**old, "spec": {**(old.get("spec") or {}), "nodeName": node}}


class Registry:
    """All stored resources of one API server (one tenant), under its key prefix in the datastore."""

    def __init__(
        self,
        kinds: KindTable,
        datastore: Datastore,
        prefix: str,
        admission: AdmissionChain,
        *,
        window: int = 1000,
        service_network: ServiceNetwork | None = None,
        minor: int = LATEST,
    ) -> None:
        self.kinds = kinds
        # The tenant's minor release: kube's strategies differ by release (a pod's generation).
        self.minor = minor
        self._disabled = DisabledFields(minor)
        self.datastore = datastore
        self._uids = UidSource()
        self.prefix = "/" + prefix.strip("/")
        self.admission = admission
        self.service_network = service_network or ServiceNetwork()
        self._window = window
        self._caches: dict[str, ResourceCache] = {}
        # Service writes take turns from allocation to commit, so two cannot be given one IP or node port.
        self._service_writes = asyncio.Lock()
        # kube's field manager (server-side apply's managedFields); the API server installs it
        self.field_manager: FieldManager | None = None

    # --- start-up -------------------------------------------------------------------------------

    async def load(self) -> None:
        """Fills the caches from the datastore; watch resumes are possible from this revision on."""
        start = self.datastore.revision
        for kind in self.kinds:
            if kind.kind in VIRTUAL_KINDS:
                continue
            cache = ResourceCache(start, self._window, WATCH_TRIGGERS.get((kind.group, kind.kind)))
            if kind.group == "rbac.authorization.k8s.io":
                cache.share = share_rbac_object  # every tenant has the same default roles
            elif kind.kind in WORKLOAD_KINDS:
                cache.share = share_workload_object  # and the same system workloads
            self._caches[kind.key_segment] = cache
            base = f"{self.prefix}/{kind.key_segment}/"
            for kv in await self.datastore.range(base):
                obj = loads(kv.value)
                cache.load(kv.key[len(base) :], Entry(obj, kv.value, kv.revision))
        for name in SYSTEM_NAMESPACES:
            if self.get_object(self.kinds.resource("", "v1", "namespaces"), "", name) is None:  # type: ignore[arg-type]
                await self.create(
                    self.kinds.resource("", "v1", "namespaces"),  # type: ignore[arg-type]
                    "",
                    {"metadata": {"name": name}},
                    UserInfo("system:apiserver", ("system:masters",)),
                )

    def close(self) -> None:
        for cache in self._caches.values():
            cache.close_watchers()

    # --- reads ----------------------------------------------------------------------------------

    def cache(self, kind: Kind) -> ResourceCache:
        return self._caches[kind.key_segment]

    @staticmethod
    def _key(kind: Kind, namespace: str, name: str) -> str:
        return f"{namespace}/{name}" if kind.namespaced else name

    def _storage_key(self, kind: Kind, key: str) -> str:
        return f"{self.prefix}/{kind.key_segment}/{key}"

    @property
    def revision(self) -> int:
        return self.datastore.revision

    def get_object(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        entry = self.cache(kind).objects.get(self._key(kind, namespace, name))
        return None if entry is None else entry.obj

    def get(self, kind: Kind, namespace: str, name: str) -> Entry:
        entry = self.cache(kind).objects.get(self._key(kind, namespace, name))
        if entry is None:
            raise errors.not_found(kind.plural, name, kind.group)
        return entry

    def list(self, kind: Kind, namespace: str | None, predicate: Predicate | None = None) -> list[Entry]:
        """Matching objects sorted by namespace and name (the order `limit`/`continue` pages through)."""
        cache = self.cache(kind)
        if not cache.objects:
            return []
        prefix = f"{namespace}/" if namespace and kind.namespaced else ""
        items = [
            (key, entry) for key, entry in cache.items(prefix) if predicate is None or predicate(entry.obj)
        ]
        items.sort(key=lambda item: item[0])
        return [entry for _, entry in items]

    def watch(
        self,
        kind: Kind,
        namespace: str | None,
        predicate: Predicate | None,
        since: int | None,
        *,
        required: Callable[[str], str | None] | None = None,
    ) -> tuple[Watcher, list[Event]]:
        """Opens a watch; `required(path)` tells the value the predicate requires a field to have, if
        any (a field selector's `path=value`), so the watcher can be indexed by the kind's trigger."""
        trigger = WATCH_TRIGGERS.get((kind.group, kind.kind))
        value = required(trigger.path) if trigger is not None and required is not None else None
        watcher = Watcher(namespace if kind.namespaced else None, predicate, trigger=value)
        return watcher, self.cache(kind).watch(watcher, since)

    def unwatch(self, kind: Kind, watcher: Watcher) -> None:
        self.cache(kind).unwatch(watcher)

    # --- writes ---------------------------------------------------------------------------------

    def _check_type(self, kind: Kind, obj: Any) -> Obj:
        if not isinstance(obj, dict):
            raise errors.bad_request(
                f"the body of the request must be a JSON object, not {type(obj).__name__}"
            )
        api_version = obj.get("apiVersion")
        if api_version and api_version != kind.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({kind.api_version})"
            )
        body_kind = obj.get("kind")
        if body_kind and body_kind != kind.kind:
            raise errors.bad_request(
                f"the kind in the data ({body_kind}) does not match the expected kind ({kind.kind})"
            )
        obj["apiVersion"] = kind.api_version
        obj["kind"] = kind.kind
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise errors.bad_request(unmarshal_message(meta, "metadata", "v1.ObjectMeta"))
        for field, value in meta.items():
            wanted = _METADATA_TYPES.get(field)
            if wanted is not None and value is not None and not _has_type(value, wanted):
                raise errors.bad_request(unmarshal_message(value, f"metadata.{field}", wanted))
        for field in ("spec", "status"):
            value = obj.get(field)
            if value is not None and not isinstance(value, dict):
                raise errors.bad_request(unmarshal_message(value, field, f"v1.{kind.kind}{field.title()}"))
        return meta

    def _validate(self, kind: Kind, obj: Obj, old: Obj | None = None, subresource: str = "") -> None:
        meta = obj["metadata"]
        name = meta.get("name") or ""
        causes = [
            _cause(c)
            for c in validate_object(kind.kind, obj, old=old, subresource=subresource, minor=self.minor)
        ]
        if not causes and (not name or "/" in name or name in (".", "..")):
            # Names become storage keys and URL segments, whatever the kind's own rules say.
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: \"{name}\": may not be empty or contain '/'",
                    "field": "metadata.name",
                }
            )
        if causes:
            raise errors.invalid(kind.kind, name, kind.group, causes)

    @staticmethod
    def _allocates(kind: Kind) -> bool:
        return kind.group == "" and kind.kind == "Service"

    def _writes_of(self, kind: Kind, subresource: str = "") -> contextlib.AbstractAsyncContextManager[Any]:
        """The lock Service writes hold from allocation to commit; other writes need none."""
        if self._allocates(kind) and subresource == "":
            return self._service_writes
        return contextlib.nullcontext()

    def _allocate(self, kind: Kind, obj: Obj, old: Obj | None) -> None:
        """Gives a Service its cluster IP and node ports (kube's REST storage does this after validation)."""
        others = (entry.obj for entry in self.cache(kind).objects.values())
        causes = self.service_network.assign(obj, old, others)
        if causes:
            raise errors.invalid(
                kind.kind, obj["metadata"].get("name") or "", kind.group, [_cause(c) for c in causes]
            )

    def generate_name(self, prefix: str) -> str:
        """`prefix` and five random characters, as kube completes a generateName."""
        return prefix + self._uids.suffix(_GENERATE_ALPHABET)

    async def create(
        self,
        kind: Kind,
        namespace: str,
        obj: Any,
        user: UserInfo,
        *,
        dry_run: bool = False,
        manager: str | None = None,
    ) -> Entry:
        """POST. `manager` names the writer for the field manager (None: not a client's write, or one
        whose managedFields are already worked out, as an apply's)."""
        async with self._writes_of(kind):
            return await self._create(kind, namespace, obj, user, dry_run, manager)

    async def _create(
        self, kind: Kind, namespace: str, obj: Any, user: UserInfo, dry_run: bool, manager: str | None = None
    ) -> Entry:
        meta = self._check_type(kind, obj)
        if kind.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and namespace and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace = namespace or body_ns or ""
        else:
            meta.pop("namespace", None)
            namespace = ""
        generated = not meta.get("name") and bool(meta.get("generateName"))
        for transient in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(transient, None)
        with _well_formed(kind):
            # The store replaces a new object's status (PrepareForCreate) after admission: the status
            # is not defaulted before, and admission sees it as sent, `{}` when none was (Go's encoding
            # of the struct). So a pod's QoS class is worked out once, by the strategy.
            fresh = _RESET_ON_CREATE if kind.has_status and not kind.strategy.keep_status_on_create else _NONE
            if fresh:
                obj.setdefault("status", {})
            default_object(kind.kind, obj, fresh, self.minor)
            if manager is not None and self.field_manager is not None:
                # as kube's create handler: the decoded, defaulted body, before admission
                self.field_manager.on_create(kind, obj, manager)
            # kube's mutating phase runs before its store fills in the system fields (Store.Create's
            # FillObjectMetaSystemFields, the generated name, the strategy's PrepareForCreate): its plugins
            # and webhooks see no uid, creationTimestamp or generation, and an empty name for a
            # generateName create. The validating phase sees them all.
            attributes = AdmissionAttributes(
                "CREATE",
                kind,
                namespace,
                "" if generated else meta.get("name") or "",
                obj,
                None,
                user,
                dry_run=dry_run,
            )
            await self.admission.mutate(attributes)
            obj = attributes.obj or obj
            if attributes.mutated:
                default_object(kind.kind, obj, fresh, self.minor)
            self._fill_system_fields(kind, obj, user)
            self._disabled.drop(kind.kind, obj, None)
            _omit_empty(kind, obj)
            self._validate(kind, obj)
            attributes.name = obj["metadata"].get("name") or ""
            await self.admission.validate(attributes)
            if self._allocates(kind):
                self._allocate(kind, obj, None)
            key = self._key(kind, namespace, obj["metadata"]["name"])
        if key in self.cache(kind).objects:
            raise errors.already_exists(kind.plural, obj["metadata"]["name"], kind.group)
        if dry_run:
            return Entry(obj, encode(obj), self.revision)
        holder: list[bytes] = []

        def render(revision: int) -> bytes:
            obj["metadata"]["resourceVersion"] = str(revision)
            holder.append(encode(obj))
            return holder[-1]

        cache = self.cache(kind)
        entries: list[Entry] = []

        def committed(revision: int) -> None:
            entries.append(Entry(obj, holder[-1], revision))
            cache.record(key, Event("ADDED", entries[0]))

        try:
            await self.datastore.create(self._storage_key(kind, key), render, committed)
        except KeyExists as exc:
            raise errors.already_exists(kind.plural, obj["metadata"]["name"], kind.group) from exc
        return entries[0]

    def _fill_system_fields(self, kind: Kind, obj: Obj, user: UserInfo | None = None) -> None:
        """What kube's store sets on a new object after the mutating phase: the generated name, uid,
        creationTimestamp, generation, and the kind's strategy (PrepareForCreate)."""
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self.generate_name(str(meta["generateName"]))
        meta["uid"] = self._uids.next()
        meta["creationTimestamp"] = now_rfc3339()
        policy = kind.strategy.generation
        if policy is not None and self.minor >= policy.first_minor:
            meta["generation"] = 1
            if policy.template_annotation:
                given = _template_generation(meta, policy.template_annotation)
                _set_annotation(meta, policy.template_annotation, str(given))
        if kind.has_status and not kind.strategy.keep_status_on_create:
            obj.pop("status", None)
        if kind.strategy.on_create is not None:
            kind.strategy.on_create(obj)
        if kind.strategy.on_create_by is not None:
            kind.strategy.on_create_by(obj, user)

    def _prepare_update(self, kind: Kind, new: Obj, old: Obj, subresource: str) -> Obj:
        """Carries over what an update of this (sub)resource may not change.

        `new` is the caller's own, but may share top-level fields with `old`, the stored object, which
        must not change (`modify` shares what a patch leaves alone). Later steps change the result in
        place only where it is its own: defaulting skips or copies the shared fields. What `new` already
        holds equal to `old` is kept: the stored part is copied only where they differ, which for the
        usual update (a patch of annotations or of the status) is nowhere.
        """
        if subresource == "finalize":
            # Only spec.finalizers may change through the namespace's finalize subresource.
            finalizers = (new.get("spec") or {}).get("finalizers") or []
            merged = clone(old)
            merged.setdefault("spec", {})["finalizers"] = finalizers
            return merged
        if subresource == "ephemeralcontainers":
            # As kube's strategy for it: every change but spec.ephemeralContainers is dropped.
            merged = clone(old)
            spec = merged.setdefault("spec", {})
            spec.pop("ephemeralContainers", None)
            ephemeral = (new.get("spec") or {}).get("ephemeralContainers")
            if ephemeral:
                spec["ephemeralContainers"] = ephemeral
            return merged
        if subresource == "resize":
            return resize_base(new, old)
        own = kind.strategy.prepare_update
        if own is not None:
            # the kind's own strategy keeps spec and status; its subresources' metadata is as the resource's
            own(new, old, subresource)
        elif subresource == "status":
            status_metadata = kind.strategy.status_metadata
            for field in set(new) | set(old):
                if field not in kind.strategy.status_fields and not (field == "metadata" and status_metadata):
                    _carry_over(new, old, field)
            if status_metadata:
                meta, old_meta = new.setdefault("metadata", {}), old["metadata"]
                for field in set(meta) | set(old_meta):
                    if field not in status_metadata:
                        _carry_over(meta, old_meta, field)
            if kind.strategy.on_status_update is not None:
                kind.strategy.on_status_update(new, old)
            return new
        elif kind.has_status and subresource == "":
            for field in kind.strategy.status_fields:
                _carry_over(new, old, field)
        meta = new["metadata"]
        old_meta = old["metadata"]
        for fixed in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if fixed in old_meta:
                meta[fixed] = old_meta[fixed]
            else:
                meta.pop(fixed, None)
        if kind.namespaced:
            meta["namespace"] = old_meta.get("namespace", "")
        else:
            meta.pop("namespace", None)
        if kind.strategy.on_update is not None:
            kind.strategy.on_update(new, old)
        return new

    async def update(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        obj: Any,
        user: UserInfo,
        *,
        subresource: str = "",
        dry_run: bool = False,
        manager: str | None = None,
    ) -> Entry:
        """PUT: a stale `metadata.resourceVersion` in `obj` gives 409 Conflict; an empty one always wins,
        but for kinds whose strategy refuses unconditional updates (422)."""
        meta = self._check_type(kind, obj)
        body_name = meta.get("name")
        if body_name and body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        meta["name"] = name
        wanted = meta.get("resourceVersion") or None
        pristine = encode(obj)  # each attempt works on its own copy: an attempt changes what it is given
        attempts = _Attempts(self.datastore)
        async for _ in attempts:
            current = self.get(kind, namespace, name)
            if wanted is None and not kind.strategy.unconditional_update:
                # kube's store names the resource where the kind belongs, and shows the uint64 0 in Go's
                # %#v: `runtimeclasses.node.k8s.io "x" is invalid: metadata.resourceVersion: …`
                raise errors.invalid(
                    kind.plural,
                    name,
                    kind.group,
                    [
                        {
                            "reason": "FieldValueInvalid",
                            "message": "Invalid value: 0x0: must be specified for an update",
                            "field": "metadata.resourceVersion",
                        }
                    ],
                )
            if wanted is not None and wanted != str(current.revision):
                raise errors.conflict(kind.plural, name, kind.group)
            try:
                return await self._write_update(
                    kind,
                    namespace,
                    name,
                    loads(pristine) if attempts.retry else obj,
                    current,
                    user,
                    subresource,
                    dry_run,
                    manager,
                )
            except RevisionMismatch as exc:  # another write landed while admission ran
                if wanted is not None:
                    raise errors.conflict(kind.plural, name, kind.group) from exc
                # An unconditional update wins over writes it raced with, once they are committed.
                continue
        raise errors.conflict(kind.plural, name, kind.group, "too many concurrent updates")

    async def modify(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        mutation: Mutation,
        user: UserInfo,
        *,
        subresource: str = "",
        dry_run: bool = False,
        changes: frozenset[str] | None = None,
        manager: str | None = None,
        manager_subresource: str | None = None,
    ) -> Entry:
        """Read-modify-write (PATCH, binding, scale), retried when a concurrent write got there first.

        `changes` names the top-level fields `mutation` may change (a merge patch's keys), when the
        caller knows them: the mutation is then given an object that shares every other field with the
        stored one instead of a whole copy (a patch of a pod's annotations leaves spec and status be).
        `manager_subresource` records the write's manager under another subresource than the one
        written (a scale changes the parent's `.spec.replicas` as `scale`).
        """
        shares = changes is not None and kind.strategy.on_update is None and not self._allocates(kind)
        async for _ in _Attempts(self.datastore):
            current = self.get(kind, namespace, name)
            new = mutation(
                current.copy_fields(changes | {"metadata"}) if shares and changes else current.copy()
            )
            meta = self._check_type(kind, new)
            meta["name"] = name
            wanted = meta.get("resourceVersion")
            if wanted and wanted != str(current.revision):
                raise errors.conflict(kind.plural, name, kind.group)
            try:
                return await self._write_update(
                    kind,
                    namespace,
                    name,
                    new,
                    current,
                    user,
                    subresource,
                    dry_run,
                    manager,
                    manager_subresource,
                )
            except RevisionMismatch:
                # The write that got there first may not be committed yet; the next attempt waits for
                # it, so it reads the winner from the cache (read-your-writes for the retry loop).
                continue
        raise errors.conflict(kind.plural, name, kind.group, "too many concurrent updates")

    async def _write_update(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        obj: Obj,
        current: Entry,
        user: UserInfo,
        subresource: str,
        dry_run: bool,
        manager: str | None = None,
        manager_subresource: str | None = None,
    ) -> Entry:
        # A Service's update may allocate node ports: Service writes take turns from allocation to commit.
        async with self._writes_of(kind, subresource):
            old = current.obj
            with _well_formed(kind):
                obj = self._prepare_update(kind, obj, old, subresource)
                default_object(kind.kind, obj, _shared_fields(obj, old), self.minor)
                if manager is not None and self.field_manager is not None and subresource != "binding":
                    self.field_manager.on_update(
                        kind,
                        old,
                        obj,
                        manager,
                        subresource if manager_subresource is None else manager_subresource,
                    )
                _count_generation(kind, obj, old, subresource)
                attributes = AdmissionAttributes(
                    "UPDATE", kind, namespace, name, obj, old, user, subresource=subresource, dry_run=dry_run
                )
                # Admission plugins must not change `obj` in place where it shares fields with `old`:
                # webhooks apply their patches to a copy, the built-in plugins change pods on create only.
                await self.admission.mutate(attributes)
                obj = attributes.obj or obj
                if attributes.mutated:
                    default_object(kind.kind, obj, _shared_fields(obj, old), self.minor)
                if subresource != "binding":  # kube's binding sets the node alone, with no strategy
                    self._disabled.drop(kind.kind, obj, old)
                _omit_empty(kind, obj)
                self._validate(
                    kind, obj, _binding_base(old, obj) if subresource == "binding" else old, subresource
                )
                await self.admission.validate(attributes)
                if self._allocates(kind) and subresource == "":
                    self._allocate(kind, obj, old)
                obj["metadata"]["resourceVersion"] = str(current.revision)
            if obj["metadata"].get("managedFields") and obj != old:
                # kube's IgnoreManagedFieldsTimestampsTransformer: new times alone are no change
                obj = keep_managed_times(obj, old)
            if obj == old:
                return current  # a no-op update does not create a new revision, as in kube-apiserver
            meta = obj["metadata"]
            if (
                meta.get("deletionTimestamp")
                and not meta.get("finalizers")
                and (kind.strategy.graceful_delete is None or not meta.get("deletionGracePeriodSeconds"))
                and not (kind.strategy.spec_finalizers and (obj.get("spec") or {}).get("finalizers"))
            ):
                # The last finalizer is gone: the deletion that waited for it completes now.
                return await self._remove(kind, namespace, name, current, dry_run)
            return await self._store_update(kind, namespace, name, obj, current, dry_run)

    async def _remove(self, kind: Kind, namespace: str, name: str, current: Entry, dry_run: bool) -> Entry:
        if dry_run:
            return current
        key = self._key(kind, namespace, name)
        cache = self.cache(kind)
        entries: list[Entry] = []

        def committed(revision: int) -> None:
            entries.append(current.at_revision(revision))
            cache.record(key, Event("DELETED", entries[0]))

        try:
            await self.datastore.delete(self._storage_key(kind, key), current.revision, committed)
        except KeyNotFound as exc:
            raise errors.not_found(kind.plural, name, kind.group) from exc
        return entries[0]

    async def delete(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        options: DeleteOptions,
        user: UserInfo,
        *,
        dry_run: bool = False,
    ) -> tuple[Entry, bool]:
        """Deletes now, or marks for graceful deletion; returns the object and whether it is gone."""
        async for _ in _Attempts(self.datastore):
            current = self.get(kind, namespace, name)
            meta = current.obj["metadata"]
            if options.uid is not None and options.uid != meta.get("uid"):
                raise errors.conflict(
                    kind.plural,
                    name,
                    kind.group,
                    f"Precondition failed: UID in precondition: {options.uid}, "
                    f"UID in object meta: {meta.get('uid')}",
                )
            if options.resource_version is not None and options.resource_version != str(current.revision):
                raise errors.conflict(
                    kind.plural,
                    name,
                    kind.group,
                    f"Precondition failed: ResourceVersion in precondition: {options.resource_version}, "
                    f"ResourceVersion in object meta: {current.revision}",
                )
            attributes = AdmissionAttributes(
                "DELETE", kind, namespace, name, None, current.obj, user, dry_run=dry_run
            )
            await self.admission.validate(attributes)
            try:
                return await self._delete_once(kind, namespace, name, current, options, dry_run)
            except RevisionMismatch:
                continue
        raise errors.conflict(kind.plural, name, kind.group, "too many concurrent updates")

    async def _delete_once(
        self, kind: Kind, namespace: str, name: str, current: Entry, options: DeleteOptions, dry_run: bool
    ) -> tuple[Entry, bool]:
        meta = current.obj["metadata"]
        strategy = kind.strategy
        if name in strategy.protected_names:
            raise errors.forbidden(kind.plural, name, kind.group, "this namespace may not be deleted")
        if strategy.spec_finalizers:
            return await self._delete_terminating(kind, name, current, dry_run)
        if strategy.default_propagation:
            policy = options.propagation_policy or strategy.default_propagation
            finalizer = {"Orphan": ORPHAN_FINALIZER, "Foreground": FOREGROUND_FINALIZER}.get(policy)
            if finalizer is not None:
                return await self._delete_through_collector(
                    kind, namespace, name, current, finalizer, dry_run
                )
        grace = None
        if strategy.graceful_delete is not None:
            grace = strategy.graceful_delete(current.obj, options.grace_period_seconds)
        graceful = bool(grace)
        if not graceful and not meta.get("finalizers"):
            return await self._remove(kind, namespace, name, current, dry_run), True
        if meta.get("deletionTimestamp") and (not graceful or grace == 0) and not meta.get("finalizers"):
            return await self._remove(kind, namespace, name, current, dry_run), True
        obj = current.copy()
        _mark_deleting(obj["metadata"])
        stamp = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=grace or 0)
        obj["metadata"].setdefault("deletionTimestamp", stamp.strftime("%Y-%m-%dT%H:%M:%SZ"))
        obj["metadata"]["deletionGracePeriodSeconds"] = int(grace or 0)
        if obj == current.obj:
            return current, False
        return await self._store_update(kind, namespace, name, obj, current, dry_run), False

    async def _delete_through_collector(
        self, kind: Kind, namespace: str, name: str, current: Entry, finalizer: str, dry_run: bool
    ) -> tuple[Entry, bool]:
        """Orphan and Foreground deletes: the object is marked and gets the garbage collector's
        finalizer; the collector orphans or deletes its dependents, then removes the finalizer."""
        meta = current.obj["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp") and (finalizer in finalizers or not finalizers):
            return current, False
        obj = current.copy()
        _mark_deleting(obj["metadata"])
        obj["metadata"].setdefault("deletionTimestamp", now_rfc3339())
        obj["metadata"]["deletionGracePeriodSeconds"] = 0
        other = ORPHAN_FINALIZER if finalizer == FOREGROUND_FINALIZER else FOREGROUND_FINALIZER
        obj["metadata"]["finalizers"] = [f for f in finalizers if f != other] + [finalizer]
        return await self._store_update(kind, namespace, name, obj, current, dry_run), False

    async def _store_update(
        self, kind: Kind, namespace: str, name: str, obj: Obj, current: Entry, dry_run: bool
    ) -> Entry:
        if dry_run:
            return Entry(obj, encode(obj), current.revision)
        key = self._key(kind, namespace, name)
        holder: list[bytes] = []

        def render(revision: int) -> bytes:
            obj["metadata"]["resourceVersion"] = str(revision)
            holder.append(encode(obj))
            return holder[-1]

        cache = self.cache(kind)
        entries: list[Entry] = []

        def committed(revision: int) -> None:
            entries.append(Entry(obj, holder[-1], revision))
            cache.record(key, Event("MODIFIED", entries[0], current))

        try:
            await self.datastore.update(self._storage_key(kind, key), render, current.revision, committed)
        except KeyNotFound as exc:
            raise errors.not_found(kind.plural, name, kind.group) from exc
        return entries[0]

    async def _delete_terminating(
        self, kind: Kind, name: str, current: Entry, dry_run: bool
    ) -> tuple[Entry, bool]:
        """A namespace's delete: the first marks it Terminating (its controller then empties it and
        removes its finalizer); it is removed only once no finalizer of either kind is left."""
        meta = current.obj["metadata"]
        if not meta.get("deletionTimestamp"):
            obj = current.copy()
            obj["metadata"]["deletionTimestamp"] = now_rfc3339()
            obj.setdefault("status", {})["phase"] = "Terminating"
            return await self._store_update(kind, "", name, obj, current, dry_run), False
        if (current.obj.get("spec") or {}).get("finalizers") or meta.get("finalizers"):
            return current, False
        return await self._remove(kind, "", name, current, dry_run), not dry_run

    async def delete_collection(
        self,
        kind: Kind,
        namespace: str | None,
        predicate: Predicate | None,
        options: DeleteOptions,
        user: UserInfo,
        *,
        dry_run: bool = False,
    ) -> list[Entry]:
        deleted = []
        for entry in self.list(kind, namespace, predicate):
            meta = entry.obj["metadata"]
            try:
                result, _ = await self.delete(
                    kind, meta.get("namespace", ""), meta["name"], options, user, dry_run=dry_run
                )
            except errors.APIError as exc:
                if exc.code == 404:
                    continue
                raise
            deleted.append(result)
        return deleted

    def namespaces(self) -> Iterable[Entry]:
        kind = self.kinds.resource("", "v1", "namespaces")
        assert kind is not None
        return self.cache(kind).objects.values()
