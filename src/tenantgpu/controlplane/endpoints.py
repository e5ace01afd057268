"""kube-controller-manager's `endpoints` and `endpointslice` controllers: each Service that selects pods
gets an Endpoints object of its own name and EndpointSlices owned by it, listing its pods' addresses
and ports (what they hold is worked out in `endpointsbuild`).

Both sync a Service when it changes and when a pod it selects (or selected) is added, deleted, or
changes in what the endpoints show (readiness, IPs, deletion, labels, hostname). Both compare before
they write. A deleted Service's Endpoints are deleted by the endpoints controller; its slices go with
it through their owner reference (the garbage collector), as in kube, whose endpointslice controller
does not delete them itself. ExternalName Services and Services without a selector get nothing, so
`default/kubernetes`, which the API server keeps, is left alone.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from tenantgpu.controlplane.endpointsbuild import (
    ENDPOINTS_CONTROLLER,
    SERVICE_NAME,
    SLICE_CONTROLLER,
    TriggerTimes,
    desired_endpoints,
    has_selector,
    plan_slices,
    selected_pods,
    services_for_pod_change,
)
from tenantgpu.controlplane.slicetracker import SliceTracker, namespace_terminating, service_of
from tenantgpu.controlplane.workqueue import Key, WorkQueue, object_key
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

log = logging.getLogger(__name__)

SLICE_EVENTS_COMPONENT = "endpoint-slice-controller"
# client-go's leader election record: the endpoints controller never deletes such Endpoints
LEADER_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"
# kube's endpointSliceChangeMinSyncDelay: a slice event syncs its Service a second later
SLICE_CHANGE_DELAY = 1.0
STALE_RETRY = 0.5


def _in_namespace(informer: Informer, namespace: str) -> list[dict[str, Any]]:
    return [o for o in informer.cache.values() if (o.get("metadata") or {}).get("namespace") == namespace]


class _SelectingServices:
    """The Services with a selector, by namespace, from a Service informer. Every pod event asks for its
    namespace's; they change only when a Service does (`forget`), so they are gathered once per change."""

    def __init__(self, services: Informer) -> None:
        self._services = services
        self._by_namespace: dict[str, list[dict[str, Any]]] | None = None

    def forget(self) -> None:
        self._by_namespace = None

    def in_namespace(self, namespace: str) -> list[dict[str, Any]]:
        found = self._by_namespace
        if found is None:
            found = self._by_namespace = {}
            for service in self._services.cache.values():
                if (service.get("spec") or {}).get("selector"):
                    namespace_of = (service.get("metadata") or {}).get("namespace") or ""
                    found.setdefault(namespace_of, []).append(service)
        return found.get(namespace, [])


def _queue_pod_services(
    services: _SelectingServices,
    queue: WorkQueue[Key],
    event: str,
    pod: dict[str, Any],
    old: dict[str, Any] | None,
) -> None:
    """Both controllers' pod handler: queue the Services a pod's change concerns (kube's
    GetServicesToUpdateOnPodChange), looking only at the pod's namespace."""
    namespace = (pod.get("metadata") or {}).get("namespace") or ""
    # Only a Service with a selector can count the pod as a member; most pod events (a namespace
    # with `kubernetes` alone, or none) end here, before any comparison of the pod's versions.
    selecting = services.in_namespace(namespace)
    if not selecting:
        return
    for key in services_for_pod_change(selecting, old if event == "MODIFIED" else None, pod):
        queue.add(key)


class EndpointsController:
    """The endpoints controller: one Endpoints per Service with a selector."""

    def __init__(
        self,
        client: KubeClient,
        *,
        pods: Informer,
        services: Informer | None = None,
        endpoints: Informer | None = None,
    ) -> None:
        self.client = client
        self.pods = pods
        self.services = services or Informer(client, "services")
        self._selecting = _SelectingServices(self.services)
        self.endpoints = endpoints or Informer(client, "endpoints")
        self.queue: WorkQueue[Key] = WorkQueue("endpoint-controller", self.sync)
        self.trigger_times = TriggerTimes()
        # resourceVersions this controller has written over: a cache still showing one lags
        self._stale: dict[Key, str] = {}

    async def start(self) -> None:
        self.services.add_handler(self._service_changed)
        self.pods.add_handler(self._pod_changed)
        self.endpoints.add_handler(self._endpoints_changed)
        await self.services.start()
        await self.pods.start()
        await self.endpoints.start()
        for service in self.services.items():
            self.queue.add(object_key(service))
        # checkLeftoverEndpoints: Endpoints whose Service went while the controller was down
        for endpoints in self.endpoints.items():
            if LEADER_ANNOTATION not in ((endpoints.get("metadata") or {}).get("annotations") or {}):
                self.queue.add(object_key(endpoints))
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()
        await self.endpoints.stop()
        await self.services.stop()

    def _service_changed(self, event: str, service: dict[str, Any], old: dict[str, Any] | None) -> None:
        self._selecting.forget()
        self.queue.add(object_key(service))

    def _pod_changed(self, event: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        _queue_pod_services(self._selecting, self.queue, event, pod, old)

    def _endpoints_changed(self, event: str, endpoints: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event == "DELETED":
            self.queue.add(object_key(endpoints))

    async def sync(self, key: Key) -> None:
        namespace, name = key
        service = self.services.get(namespace, name)
        if service is None:
            # the Service is gone: so are its Endpoints
            try:
                await self.client.delete("endpoints", name, namespace)
            except ApiError as err:
                if err.code != 404:
                    raise
            self.trigger_times.forget(namespace, name)
            self._stale.pop(key, None)
            return
        if not has_selector(service):
            return
        pods = selected_pods(service, _in_namespace(self.pods, namespace))
        # computed on every sync, so that the tracker sees each change once, written or not
        trigger = self.trigger_times.compute(service, pods)
        current = self.endpoints.get(namespace, name)
        if current is not None and self._stale.get(key) == current["metadata"].get("resourceVersion"):
            self.queue.add_after(key, STALE_RETRY)  # the watch has not brought our last write yet
            return
        body = desired_endpoints(service, pods, current, trigger)
        if body is None:
            return
        try:
            if current is None:
                await self.client.create("endpoints", body, namespace)
            else:
                written = await self.client.update("endpoints", body)
                if written["metadata"].get("resourceVersion") != current["metadata"].get("resourceVersion"):
                    self._stale[key] = current["metadata"].get("resourceVersion") or ""
        except ApiError as err:
            if (
                current is None
                and err.code == 403
                and "NamespaceTerminating" in str(err.status.get("details") or "")
            ):
                return  # creates keep failing in a namespace being deleted
            if current is None:
                reason, message = (
                    "FailedToCreateEndpoint",
                    f"Failed to create endpoint for service {namespace}/{name}",
                )
            else:
                reason, message = "FailedToUpdateEndpoint", f"Failed to update endpoint {namespace}/{name}"
            with contextlib.suppress(ApiError):
                await self.client.create_event(
                    {
                        **body,
                        "metadata": {
                            **body["metadata"],
                            "uid": (current or {}).get("metadata", {}).get("uid"),
                        },
                    },
                    reason=reason,
                    message=f"{message}: {err.message}",
                    type="Warning",
                    component=ENDPOINTS_CONTROLLER,
                )
            raise


class EndpointSliceController:
    """The endpointslice controller: the EndpointSlices of each Service with a selector, at most
    100 endpoints each."""

    def __init__(
        self,
        client: KubeClient,
        *,
        pods: Informer,
        nodes: Informer,
        services: Informer,
        slices: Informer | None = None,
    ) -> None:
        self.client = client
        self.pods = pods
        self.nodes = nodes
        self.services = services
        self._selecting = _SelectingServices(services)
        self.slices = slices or Informer(client, "endpointslices")
        self.queue: WorkQueue[Key] = WorkQueue("endpointslice-controller", self.sync)
        self.trigger_times = TriggerTimes()
        self.tracker = SliceTracker(SLICE_CONTROLLER)

    async def start(self) -> None:
        self.services.add_handler(self._service_changed)
        self.pods.add_handler(self._pod_changed)
        self.slices.add_handler(self._slice_changed)
        await self.services.start()
        await self.pods.start()
        await self.nodes.start()
        await self.slices.start()
        for service in self.services.items():
            self.queue.add(object_key(service))
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()
        await self.slices.stop()

    def _service_changed(self, event: str, service: dict[str, Any], old: dict[str, Any] | None) -> None:
        self._selecting.forget()
        self.queue.add(object_key(service))

    def _pod_changed(self, event: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        _queue_pod_services(self._selecting, self.queue, event, pod, old)

    def _slice_changed(self, event: str, slice_: dict[str, Any], old: dict[str, Any] | None) -> None:
        for changed in self.tracker.changed(event, slice_, old):
            key = service_of(changed)
            if key is not None:
                self.queue.add_after(key, SLICE_CHANGE_DELAY)

    async def sync(self, key: Key) -> None:
        namespace, name = key
        service = self.services.get(namespace, name)
        if service is None:
            self.trigger_times.forget(namespace, name)
            self.tracker.forget(key)
            return  # the garbage collector deletes the slices it owned
        if not has_selector(service):
            return
        pods = selected_pods(service, _in_namespace(self.pods, namespace))
        slices = [
            s
            for s in _in_namespace(self.slices, namespace)
            if (s["metadata"].get("labels") or {}).get(SERVICE_NAME) == name
            and self.tracker.managed(s)
            and not s["metadata"].get("deletionTimestamp")
        ]
        if self.tracker.stale(key, slices):
            self.queue.add_after(key, STALE_RETRY)
            return
        trigger = self.trigger_times.compute(service, pods)
        plan = plan_slices(service, pods, lambda n: self.nodes.get(None, n), slices, trigger_time=trigger)
        creating = [] if service["metadata"].get("deletionTimestamp") else plan.create
        try:
            await self.tracker.write(
                self.client, key, namespace, create=creating, update=plan.update, delete=plan.delete
            )
        except ApiError as err:
            if namespace_terminating(err):
                return
            plan.errors.append(str(err.message))
            await self._failed(service, plan.errors)
            raise
        if plan.errors:
            await self._failed(service, plan.errors)
            self.queue.add_after(key, 1.0)  # kube retries the sync with backoff

    async def _failed(self, service: dict[str, Any], errors: list[str]) -> None:
        meta = service["metadata"]
        why = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        with contextlib.suppress(ApiError):
            await self.client.create_event(
                {**service, "apiVersion": "v1", "kind": "Service"},
                reason="FailedToUpdateEndpointSlices",
                message=f"Error updating Endpoint Slices for Service {meta.get('namespace')}/{meta.get('name')}: {why}",
                type="Warning",
                component=SLICE_EVENTS_COMPONENT,
            )


__all__ = ["EndpointSliceController", "EndpointsController"]
