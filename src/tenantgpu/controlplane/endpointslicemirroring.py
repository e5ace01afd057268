"""kube-controller-manager's `endpointslicemirroring` controller: the Endpoints a user writes for a
Service without a selector are mirrored into EndpointSlices, so that readers of slices see them.

Only Endpoints whose Service exists and has no selector are mirrored, and not those labelled
`endpointslice.kubernetes.io/skip-mirror: "true"` (the API server's `default/kubernetes`) or carrying
a leader-election record. The slices are owned by the Endpoints, labelled with the service name and
`endpointslice.kubernetes.io/managed-by: endpointslicemirroring-controller.k8s.io`, and carry the
Endpoints' labels and annotations (without the trigger time and kubectl's last-applied
configuration). After kube's repacking, each set of ports gets one slice per address family, with at
most 1000 addresses per subset (ready ones first); addresses that are not IPs are skipped, with a
Warning event. The slices go when the Endpoints go, stop being mirrored, or the Service goes or gets a
selector.

`plan_mirroring` is the pure part (the reconciler); `EndpointSliceMirroringController` watches through
the informers the endpoints and endpointslice controllers already hold.
"""

from __future__ import annotations

import contextlib
import ipaddress
from dataclasses import dataclass, field
from typing import Any

from tenantgpu.controlplane.endpointsbuild import (
    MIRROR_CONTROLLER as CONTROLLER_NAME,
)
from tenantgpu.controlplane.endpointsbuild import (
    SERVICE_NAME,
    SLICE_MANAGED_BY,
    TRIGGER_TIME,
    _endpoint_key,
    _equal_beyond_key,
    _Subset,
    repack_subsets,
    slice_name_prefix,
)
from tenantgpu.controlplane.slicetracker import SliceTracker, namespace_terminating, service_of
from tenantgpu.controlplane.workqueue import Key, WorkQueue, object_key
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

Obj = dict[str, Any]

SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"
LEADER_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# kube-controller-manager's --mirroring-max-endpoints-per-subset default; also the most one slice holds
MAX_ENDPOINTS_PER_SUBSET = 1000
EVENTS_COMPONENT = "endpoint-slice-mirroring-controller"
STALE_RETRY = 0.5


def should_mirror(endpoints: Obj | None) -> bool:
    if endpoints is None:
        return False
    meta = endpoints.get("metadata") or {}
    return (meta.get("labels") or {}).get(SKIP_MIRROR) != "true" and LEADER_ANNOTATION not in (
        meta.get("annotations") or {}
    )


def service_without_selector(service: Obj) -> bool:
    """The Service's selector is nil (an ExternalName Service without one is mirrored too)."""
    return not (service.get("spec") or {}).get("selector")


def parse_ip(text: str) -> tuple[str, str] | None:
    """ParseIPSloppy then String(): the canonical address and its type, None when it is no IP.
    IPv4 parts may have leading zeros (read as decimal); an IPv4-mapped IPv6 address is IPv4."""
    parts = text.split(".")
    if len(parts) == 4 and all(p.isdigit() and p.isascii() and len(p) <= 3 for p in parts):
        numbers = [int(p) for p in parts]
        if all(n <= 255 for n in numbers):
            return ".".join(map(str, numbers)), "IPv4"
        return None
    if ":" not in text:
        return None
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        return None
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped), "IPv4"
    return str(address), "IPv6"


def mirrored_endpoint(address: Obj, ready: bool) -> tuple[Obj, str] | None:
    """addressToEndpoint."""
    parsed = parse_ip(str(address.get("ip") or ""))
    if parsed is None:
        return None
    ip, address_type = parsed
    endpoint: Obj = {"addresses": [ip], "conditions": {"ready": ready}}
    if address.get("targetRef") is not None:
        endpoint["targetRef"] = address["targetRef"]
    if "nodeName" in address and address["nodeName"] is not None:
        endpoint["nodeName"] = address["nodeName"]
    if address.get("hostname"):
        endpoint["hostname"] = address["hostname"]
    return endpoint, address_type


def mirrored_ports(ports: list[Obj] | None) -> list[Obj]:
    """epPortsToEpsPorts: each port's name (empty or not), number, protocol and appProtocol."""
    out: list[Obj] = []
    for port in ports or []:
        mirrored: Obj = {
            "name": port.get("name") or "",
            "port": port.get("port"),
            "protocol": port.get("protocol"),
        }
        if port.get("appProtocol") is not None:
            mirrored["appProtocol"] = port["appProtocol"]
        out.append(mirrored)
    return out


def _port_map_key(address_type: str, ports: list[Obj] | None) -> tuple[Any, ...]:
    return (
        address_type,
        tuple(
            sorted(
                (p.get("name") or "", p.get("port"), p.get("protocol") or "", p.get("appProtocol") or "")
                for p in ports or []
            )
        ),
    )


def _copied_annotations(endpoints: Obj) -> dict[str, str]:
    annotations = (endpoints.get("metadata") or {}).get("annotations") or {}
    return {k: v for k, v in annotations.items() if k not in (TRIGGER_TIME, LAST_APPLIED)}


def owner_reference(endpoints: Obj) -> Obj:
    meta = endpoints.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def new_mirrored_slice(endpoints: Obj, ports: list[Obj], address_type: str, name: str | None) -> Obj:
    """newEndpointSlice: the Endpoints' labels and annotations, owned by it; by generateName unless it
    takes over an existing slice's name."""
    meta = endpoints.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    labels[SERVICE_NAME] = meta.get("name") or ""
    labels[SLICE_MANAGED_BY] = CONTROLLER_NAME
    slice_meta: Obj = {"namespace": meta.get("namespace"), "labels": labels}
    annotations = _copied_annotations(endpoints)
    if annotations:
        slice_meta["annotations"] = annotations
    slice_meta["ownerReferences"] = [owner_reference(endpoints)]
    if name:
        slice_meta["name"] = name
    else:
        slice_meta["generateName"] = slice_name_prefix(meta.get("name") or "")
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": slice_meta,
        "addressType": address_type,
        "endpoints": [],
        "ports": ports,
    }


@dataclass
class MirrorPlan:
    """What the reconciler writes, and what it warns about on the Endpoints."""

    create: list[Obj] = field(default_factory=list)
    update: list[Obj] = field(default_factory=list)
    delete: list[Obj] = field(default_factory=list)
    invalid_addresses: int = 0
    skipped_addresses: int = 0  # over the limit, invalid ones included

    @property
    def empty(self) -> bool:
        return not (self.create or self.update or self.delete)

    def warnings(self, limit: int = MAX_ENDPOINTS_PER_SUBSET) -> list[tuple[str, str]]:
        out = []
        if self.invalid_addresses:
            out.append(
                (
                    "InvalidIPAddress",
                    f"Skipped {self.invalid_addresses} invalid IP addresses when mirroring to EndpointSlices",
                )
            )
        if self.skipped_addresses > self.invalid_addresses:
            out.append(
                (
                    "TooManyAddressesToMirror",
                    f"A max of {limit} addresses can be mirrored to EndpointSlices per Endpoints subset. "
                    f"{self.skipped_addresses} addresses were skipped",
                )
            )
        return out


def _unchanged(endpoints: Obj, existing: Obj, desired: dict[tuple[Any, ...], Obj]) -> bool:
    """No endpoint added, removed or changed, the same labels and annotations, and the same owner."""
    matches = 0
    for endpoint in existing.get("endpoints") or []:
        wanted = desired.get(_endpoint_key(endpoint))
        if wanted is None or not _equal_beyond_key(wanted, endpoint):
            return False
        matches += 1
    if matches != len(desired):
        return False
    meta, emeta = existing.get("metadata") or {}, endpoints.get("metadata") or {}
    labels = {
        k: v for k, v in (meta.get("labels") or {}).items() if k not in (SLICE_MANAGED_BY, SERVICE_NAME)
    }
    if labels != (emeta.get("labels") or {}) or (meta.get("annotations") or {}) != _copied_annotations(
        endpoints
    ):
        return False
    return not any(
        o.get("kind") == "Endpoints"
        and o.get("name") == emeta.get("name")
        and o.get("uid") != emeta.get("uid")
        for o in meta.get("ownerReferences") or []
    )


def plan_mirroring(endpoints: Obj, existing: list[Obj], limit: int = MAX_ENDPOINTS_PER_SUBSET) -> MirrorPlan:
    """The reconciler: the slices to create, update and delete so that `existing` (the slices this
    controller manages for the Endpoints' name) mirror `endpoints`."""
    plan = MirrorPlan()
    subsets = repack_subsets(
        [
            _Subset(s.get("addresses"), s.get("notReadyAddresses"), s.get("ports"))
            for s in endpoints.get("subsets") or []
        ]
    )
    # per (address type, ports): the ports and the endpoints, keyed as kube's EndpointSet keys them
    ports_by_key: dict[tuple[Any, ...], list[Obj]] = {}
    desired: dict[tuple[Any, ...], dict[tuple[Any, ...], Obj]] = {}
    for subset in subsets:
        ports = mirrored_ports(subset.ports)
        keys = {t: _port_map_key(t, ports) for t in ("IPv4", "IPv6")}
        for key in keys.values():
            desired.setdefault(key, {})
            ports_by_key[key] = ports
        total = len(subset.addresses or []) + len(subset.not_ready or [])
        added = 0
        for addresses, ready in ((subset.addresses, True), (subset.not_ready, False)):
            for address in addresses or []:
                if added >= limit:
                    break
                mirrored = mirrored_endpoint(address, ready)
                if mirrored is None:
                    plan.invalid_addresses += 1
                    continue
                endpoint, address_type = mirrored
                desired[keys[address_type]][_endpoint_key(endpoint)] = endpoint
                added += 1
        plan.skipped_addresses += total - added

    existing_by_key: dict[tuple[Any, ...], list[Obj]] = {}
    for slice_ in existing:
        key = _port_map_key(str(slice_.get("addressType") or ""), slice_.get("ports"))
        existing_by_key.setdefault(key, []).append(slice_)

    for key, wanted in desired.items():
        slices = existing_by_key.get(key, [])
        if not wanted:
            plan.delete.extend(slices)
            continue
        if slices:
            plan.delete.extend(slices[1:])
            if _unchanged(endpoints, slices[0], wanted):
                continue
        name = slices[0]["metadata"]["name"] if slices else None
        body = new_mirrored_slice(endpoints, ports_by_key[key], key[0], name)
        body["endpoints"] = list(wanted.values())[:limit]
        (plan.update if name else plan.create).append(body)
    for key, slices in existing_by_key.items():
        if key not in desired:
            plan.delete.extend(slices)

    # recycleSlices: a slice to create takes the name of one of its address type to delete
    for address_type in ("IPv4", "IPv6"):
        creating = [s for s in plan.create if s["addressType"] == address_type]
        deleting = [s for s in plan.delete if s.get("addressType") == address_type]
        for new, old in zip(creating, deleting, strict=False):
            plan.create.remove(new)
            plan.delete.remove(old)
            del new["metadata"]["generateName"]
            new["metadata"]["name"] = old["metadata"]["name"]
            plan.update.append(new)
    return plan


class EndpointSliceMirroringController:
    """Mirrors hand-written Endpoints of selectorless Services into EndpointSlices."""

    def __init__(
        self, client: KubeClient, *, services: Informer, endpoints: Informer, slices: Informer
    ) -> None:
        self.client = client
        self.services = services
        self.endpoints = endpoints
        self.slices = slices
        self.queue: WorkQueue[Key] = WorkQueue("endpointslicemirroring-controller", self.sync)
        self.tracker = SliceTracker(CONTROLLER_NAME)  # per Endpoints (named as its Service)

    async def start(self) -> None:
        self.services.add_handler(self._service_changed)
        self.endpoints.add_handler(self._endpoints_changed)
        self.slices.add_handler(self._slice_changed)
        # shared informers, started (and stopped) by the endpoints and endpointslice controllers
        await self.services.start()
        await self.endpoints.start()
        await self.slices.start()
        for endpoints in self.endpoints.items():
            if should_mirror(endpoints):
                self.queue.add(object_key(endpoints))
        for slice_ in self.slices.items():
            key = service_of(slice_)
            if key is not None and self.tracker.managed(slice_):
                self.queue.add(key)
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()

    def _service_changed(self, event: str, service: Obj, old: Obj | None) -> None:
        if event == "MODIFIED" and old is not None:
            if service_without_selector(service) != service_without_selector(old):
                self.queue.add(object_key(service))
        elif service_without_selector(service):
            self.queue.add(object_key(service))

    def _endpoints_changed(self, event: str, endpoints: Obj, old: Obj | None) -> None:
        if should_mirror(endpoints) or (event == "MODIFIED" and should_mirror(old)):
            self.queue.add(object_key(endpoints))

    def _slice_changed(self, event: str, slice_: Obj, old: Obj | None) -> None:
        for changed in self.tracker.changed(event, slice_, old):
            key = service_of(changed)
            if key is not None:
                self.queue.add(key)

    def _mirrored(self, namespace: str, name: str) -> list[Obj]:
        return [
            s
            for s in self.slices.items()
            if s["metadata"].get("namespace") == namespace
            and service_of(s) == (namespace, name)
            and self.tracker.managed(s)
        ]

    async def sync(self, key: Key) -> None:
        namespace, name = key
        endpoints = self.endpoints.get(namespace, name)
        service = self.services.get(namespace, name)
        slices = self._mirrored(namespace, name)
        if not should_mirror(endpoints) or service is None or not service_without_selector(service):
            self.tracker.forget(key)
            await self.tracker.write(self.client, key, namespace, delete=slices)
            return
        assert endpoints is not None
        if self.tracker.stale(key, slices):
            self.queue.add_after(key, STALE_RETRY)
            return
        plan = plan_mirroring(endpoints, slices)
        for reason, message in plan.warnings():
            with contextlib.suppress(ApiError):
                await self.client.create_event(
                    {**endpoints, "apiVersion": "v1", "kind": "Endpoints"},
                    reason=reason,
                    message=message,
                    type="Warning",
                    component=EVENTS_COMPONENT,
                )
        creating = [] if endpoints["metadata"].get("deletionTimestamp") else plan.create
        try:
            await self.tracker.write(
                self.client, key, namespace, create=creating, update=plan.update, delete=plan.delete
            )
        except ApiError as err:
            if not namespace_terminating(err):
                raise


__all__ = ["EndpointSliceMirroringController", "MirrorPlan", "plan_mirroring", "should_mirror"]
