"""kube-apiserver's field manager for one API server: server-side apply and the `managedFields` of
tracked objects, on the kinds' field trees. The algorithm is in `managedfields`; this module knows the
kinds (their shapes, API versions and reset fields) and turns conflicts into kube's `Status`.

Which writes are tracked, as in kube-apiserver with one knob set differently: kube records a manager
for every create (its track-on-create probability is 1); the lab records creates only when asked
(`track_creates`), so the objects its own components create by the thousand (pods, events) carry no
`managedFields` and their writes cost nothing here. Everything else is kube's: an object that has
`managedFields` (it was applied, or created with tracking) records each later write's manager, and an
apply to an untracked object first gives its fields to `before-first-apply`.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from tenantgpu.apiserver import errors
from tenantgpu.apiserver import managedfields as mf
from tenantgpu.apiserver.fieldtree import FieldTree
from tenantgpu.apiserver.kamajischemas import crd_schema
from tenantgpu.apiserver.kinds import Kind

__all__ = ["LAST_APPLIED", "FieldManager", "keep_managed_times", "manager_name"]

_MAX_MANAGER = 128
_KUBECTL = "kubectl"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def manager_name(field_manager: str | None, user_agent: str) -> str:
    """kube's manager of a write: the `fieldManager` parameter, else the User-Agent's product
    (`kubectl/v1.31.9 (linux/amd64) …` → `kubectl`), at most 128 characters."""
    if field_manager:
        return field_manager
    return user_agent.split("/", 1)[0][:_MAX_MANAGER]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class FieldManager:
    """The field manager of one API server."""

    fields: FieldTree
    track_creates: bool = False
    _shapes: dict[tuple[str, str, str], mf.Shape] = field(default_factory=dict)

    def shape(self, kind: Kind) -> mf.Shape:
        key = (kind.group, kind.version, kind.kind)
        found = self._shapes.get(key)
        if found is None:
            component = self.fields.root(*key)
            node = self.fields.node(component) if component else None
            if node is not None:
                found = mf.shape_of(node, self.fields.component_of)
            else:
                # Kamaji's kinds by their CRD's schema, with ObjectMeta's own shape for metadata
                meta = self.fields.node("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
                found = mf.shape_of_schema(
                    crd_schema(*key), mf.shape_of(meta, self.fields.component_of) if meta else None
                )
            self._shapes[key] = found
        return found

    @staticmethod
    def _ignored(kind: Kind, subresource: str) -> mf.FieldSet:
        # The fields the kind's strategy resets for this (sub)resource: nobody owns them through it.
        if not kind.has_status:
            return {}
        return {"f:spec": {}} if subresource == "status" else {"f:status": {}}

    # --- updates ----------------------------------------------------------------------------------

    def on_create(self, kind: Kind, obj: dict[str, Any], manager: str) -> None:
        """Records the creator's fields on a new object (when creates are tracked); drops any
        `managedFields` the client sent otherwise."""
        meta = obj["metadata"]
        sent = meta.get("managedFields")
        managers = mf.decode(sent) if sent and not mf.is_reset(sent) else None
        if managers is None and not self.track_creates:
            meta.pop("managedFields", None)
            return
        self._record(kind, {}, obj, managers or {}, manager, "")

    def _record(
        self,
        kind: Kind,
        old: dict[str, Any],
        new: dict[str, Any],
        managers: mf.Managers,
        manager: str,
        subresource: str,
    ) -> None:
        # the managers after `manager` changed `old` into `new`, stored on `new`
        managers = mf.update(
            _without_managed(old),
            _without_managed(new),
            managers,
            manager,
            kind.api_version,
            self.shape(kind),
            now=_now(),
            subresource=subresource,
            ignored=self._ignored(kind, subresource),
        )
        _store(new, managers)

    def on_update(
        self, kind: Kind, old: dict[str, Any], new: dict[str, Any], manager: str, subresource: str
    ) -> None:
        """Records an update's manager on `new` when the object is tracked (kube's decodeLiveOrNew:
        the request's own `managedFields` win over the stored ones on the main resource)."""
        new_meta = new["metadata"]
        sent = new_meta.get("managedFields")
        live = (old.get("metadata") or {}).get("managedFields")
        if not sent and not live:
            return
        managers: mf.Managers | None = None
        if sent is not None and not subresource:
            if mf.is_reset(sent):
                new_meta.pop("managedFields", None)
                return
            managers = mf.decode(sent)
        if not managers:
            managers = mf.decode(live) if live else None
        if not managers:
            new_meta.pop("managedFields", None)
            return
        self._record(kind, old, new, managers, manager, subresource)

    # --- apply ------------------------------------------------------------------------------------

    def apply(
        self,
        kind: Kind,
        live: dict[str, Any] | None,
        config: dict[str, Any],
        manager: str,
        *,
        force: bool,
        subresource: str = "",
    ) -> dict[str, Any]:
        """The object after `manager` applied `config` to `live` (None: the object does not exist yet),
        with its managedFields. Raises kube's 400s for a malformed configuration and 409 for conflicts."""
        version = kind.api_version
        given = config.get("apiVersion")
        if given != version:
            raise errors.bad_request(
                "Incorrect version specified in apply patch. "
                f"Specified patch version: {given or ''}, expected: {version}"
            )
        if "managedFields" in (config.get("metadata") or {}):
            raise errors.bad_request("metadata.managedFields must be nil")
        base = _without_managed(live) if live is not None else {}
        managers = (mf.decode(live["metadata"].get("managedFields")) or {}) if live else {}
        shape = self.shape(kind)

        def run(forced: bool) -> tuple[Any, mf.Managers]:
            return mf.apply(
                base,
                config,
                managers,
                manager,
                version,
                shape,
                force=forced,
                now=_now(),
                subresource=subresource,
                ignored=self._ignored(kind, subresource),
                empty={"apiVersion": version, "kind": kind.kind},
            )

        try:
            try:
                merged, managers = run(force)
            except mf.ApplyConflict as exc:
                # kube's upgrade from client-side apply: `kubectl` may take the fields its last
                # client-side apply set, where the object still holds what that apply gave them
                allowed = _last_applied_fields(base, version, shape) if manager == _KUBECTL else None
                if allowed is None:
                    raise
                left = [(m, path) for m, path in exc.conflicts if not mf.has(allowed, path)]
                if left:
                    raise mf.ApplyConflict(left) from exc
                merged, managers = run(True)
        except mf.ApplyConflict as exc:
            raise errors.APIError(409, "Conflict", exc.message(), {"causes": exc.causes()}) from exc
        merged = dict(merged)
        meta = merged["metadata"] = dict(merged.get("metadata") or {})
        annotations = meta.get("annotations")
        if manager == _KUBECTL and isinstance(annotations, dict) and annotations.get(LAST_APPLIED):
            # kubectl's server-side apply keeps the client-side annotation in step with what it applied
            meta["annotations"] = {**annotations, LAST_APPLIED: _last_applied_text(config)}
        _store(merged, managers)
        return merged


def keep_managed_times(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """`new` with `old`'s managedFields when the two differ in nothing but the entries' times (kube's
    IgnoreManagedFieldsTimestampsTransformer), so a write that changes nothing else stores nothing."""
    fresh = new["metadata"].get("managedFields")
    stored = (old.get("metadata") or {}).get("managedFields")
    if not isinstance(fresh, list) or not isinstance(stored, list) or len(fresh) != len(stored):
        return new
    for a, b in zip(fresh, stored, strict=True):
        if not isinstance(a, dict) or not isinstance(b, dict):
            return new
        if {k: v for k, v in a.items() if k != "time"} != {k: v for k, v in b.items() if k != "time"}:
            return new
    if _without_managed(new) != _without_managed(old):
        return new
    return {**new, "metadata": {**new["metadata"], "managedFields": stored}}


def _last_applied_fields(live: dict[str, Any], version: str, shape: mf.Shape) -> mf.FieldSet | None:
    """The fields of the live object's client-side last-applied configuration that still hold the
    values it applied (kube's allowedConflictsFromLastApplied), or None without one."""
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if not text:
        return None
    try:
        last = json.loads(text)
    except ValueError:
        return None
    if not isinstance(last, dict) or last.get("apiVersion") != version:
        return None
    changed = mf.compare(last, live, shape)
    fields = mf.field_set(last, shape)
    for gone in (changed.modified, changed.added, changed.removed):
        fields = mf.difference(fields, gone)
    return fields


def _last_applied_text(config: dict[str, Any]) -> str:
    # as kubectl and kube write it: the configuration without the annotation, Go's JSON, one line
    meta = dict(config.get("metadata") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return mf.go_json({**config, "metadata": meta}) + "\n"


def _without_managed(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def _store(obj: dict[str, Any], managers: mf.Managers) -> None:
    meta = obj.setdefault("metadata", {})
    encoded = mf.encode(managers)
    if encoded:
        meta["managedFields"] = encoded
    else:
        meta.pop("managedFields", None)
