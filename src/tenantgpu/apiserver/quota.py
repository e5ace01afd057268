"""ResourceQuota: the admission check that refuses what would exceed a quota, and the controller that
keeps `status.used` current — kube's ResourceQuota plugin and quota controller, for pods, claims and
counts."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.admission import AdmissionAttributes
from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.kinds import Kind
from tenantgpu.apiserver.quantity import QuantityError, format_quantity, parse_quantity
from tenantgpu.apiserver.quota_scopes import quota_matches_pod
from tenantgpu.apiserver.registry import Registry
from tenantgpu.gpushare.basics import pod_amounts
from tenantgpu.gpushare.volumes import claim_class

log = logging.getLogger(__name__)
Obj = dict[str, Any]

# Quota names that mean "requests.<name>" for the compute resources, and that a pod must then specify.
_COMPUTE = ("cpu", "memory", "ephemeral-storage")
_MUST_SPECIFY = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")
_LEGACY_COUNTS = {"configmaps", "secrets", "services", "resourcequotas", "persistentvolumeclaims"}
_CONTROLLER = UserInfo("system:serviceaccount:kube-system:resourcequota-controller", ("system:masters",))


def _quantity(value: Any) -> Decimal:
    try:
        return parse_quantity(value)
    except QuantityError:
        return Decimal(0)


def _container_sums(containers: Iterable[Mapping[str, Any]], section: str) -> dict[str, Decimal]:
    totals: dict[str, Decimal] = {}
    for container in containers:
        for name, value in ((container.get("resources") or {}).get(section) or {}).items():
            totals[name] = totals.get(name, Decimal(0)) + _quantity(value)
    return totals


def pod_resources(spec: Mapping[str, Any], section: str) -> dict[str, Decimal]:
    """A pod's requests or limits as kube counts them (PodRequests / PodLimits): the containers add up;
    an init container runs alone, so the pod needs at least each one's; a restartable init container
    (a sidecar) runs beside everything started after it, so it is added to both (`pod_amounts`, the
    schedulers' rule too)."""
    return pod_amounts(spec, lambda container: _container_sums([container], section))


def is_extended_resource(name: str) -> bool:
    """kube's IsExtendedResourceName: a resource with a domain outside kubernetes.io (`nvidia.com/gpu`)."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def pod_usage(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """What one pod counts against a quota, under every name a quota may use for it: kube's pod
    evaluator counts requests and limits of cpu, memory and ephemeral storage, hugepages' requests,
    and extended resources as `requests.<name>` only (`requests.nvidia.com/gpu`). A quota on
    `limits.nvidia.com/gpumem` is HAMi's to enforce (its webhook and scheduler), not kube's."""
    spec = pod.get("spec") or {}
    usage = {"pods": Decimal(1), "count/pods": Decimal(1)}
    requests, limits = pod_resources(spec, "requests"), pod_resources(spec, "limits")
    # The pod's overhead (its RuntimeClass's) counts too, as resourcehelper.PodRequests and PodLimits add
    # it: to every request, and to a limit only where the pod has a non-zero one.
    for name, value in (spec.get("overhead") or {}).items():
        amount = _quantity(value)
        requests[name] = requests.get(name, Decimal(0)) + amount
        if limits.get(name):
            limits[name] += amount
    for name, value in requests.items():
        if name in _COMPUTE or name.startswith("hugepages-"):
            usage[name] = value
            usage[f"requests.{name}"] = value
        elif is_extended_resource(name):
            usage[f"requests.{name}"] = value
    for name, value in limits.items():
        if name in _COMPUTE:
            usage[f"limits.{name}"] = value
    return usage


# Names kube's service evaluator keeps; the lab has no node ports or load balancers to count, so their
# usage is 0.
_OTHER_EVALUATORS = {
    "services.nodeports",
    "services.loadbalancers",
}
_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"


def claim_usage(claim: Mapping[str, Any]) -> dict[str, Decimal]:
    """What one PersistentVolumeClaim counts against a quota (kube's persistentvolumeclaim evaluator):
    the claim itself and its storage request, also under its class's names
    (`<class>.storageclass.storage.k8s.io/requests.storage`, `…/persistentvolumeclaims`)."""
    spec = claim.get("spec") or {}
    storage = _quantity(((spec.get("resources") or {}).get("requests") or {}).get("storage", 0))
    usage = {
        "persistentvolumeclaims": Decimal(1),
        "count/persistentvolumeclaims": Decimal(1),
        "requests.storage": storage,
    }
    storage_class = claim_class(claim)
    if storage_class:
        usage[f"{storage_class}{_CLASS_SUFFIX}persistentvolumeclaims"] = Decimal(1)
        usage[f"{storage_class}{_CLASS_SUFFIX}requests.storage"] = storage
    return usage


def _claim_evaluator_matches(name: str) -> bool:
    return name in ("persistentvolumeclaims", "requests.storage") or (
        _CLASS_SUFFIX in name and name.endswith(("/persistentvolumeclaims", "/requests.storage"))
    )


def _pod_evaluator_matches(name: str) -> bool:
    """Whether one of kube's evaluators keeps this quota name's usage (the pod evaluator's
    MatchingResources, and the service and claim evaluators' names)."""
    if (
        name in ("pods", "count/pods")
        or name in _COMPUTE
        or name in _OTHER_EVALUATORS
        or _claim_evaluator_matches(name)
        or name.startswith(("hugepages-", "requests.hugepages-"))
    ):
        return True
    section, _, resource = name.partition(".")
    if section == "requests":
        return resource in _COMPUTE or is_extended_resource(resource)
    return section == "limits" and resource in _COMPUTE


def _counts_pod(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _count_names(kind: Kind) -> set[str]:
    names = {f"count/{kind.group_resource}"}
    if not kind.group and kind.plural in _LEGACY_COUNTS:
        names.add(kind.plural)
    return names


class QuotaUsage:
    """Computes a namespace's usage from the watch cache, so admission and status agree."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        kinds = registry.kinds
        self.pods = kinds.resource("", "v1", "pods")
        self.claims = kinds.resource("", "v1", "persistentvolumeclaims")
        self.quotas = kinds.resource("", "v1", "resourcequotas")
        assert self.pods is not None and self.quotas is not None
        # The object-count names of the served namespaced kinds (`count/configmaps`, `secrets` …).
        self._count_names = frozenset(n for kind in kinds if kind.namespaced for n in _count_names(kind))

    def quotas_in(self, namespace: str) -> list[Obj]:
        assert self.quotas is not None
        return [entry.obj for entry in self._registry.list(self.quotas, namespace)]

    def used(self, quota: Obj, namespace: str) -> dict[str, Decimal]:
        assert self.pods is not None
        spec = quota.get("spec") or {}
        hard = spec.get("hard") or {}
        # A name no evaluator counts (`limits.nvidia.com/gpumem`) gets no usage: kube leaves it out of
        # status.used, and kubectl shows it as 0.
        used = {
            name: Decimal(0) for name in hard if _pod_evaluator_matches(name) or name in self._count_names
        }
        for entry in self._registry.list(self.pods, namespace):
            if _counts_pod(entry.obj) and quota_matches_pod(spec, entry.obj):
                for name, value in pod_usage(entry.obj).items():
                    if name in used:
                        used[name] += value
        if self.claims is not None and any(
            _claim_evaluator_matches(name) or name == "count/persistentvolumeclaims" for name in hard
        ):
            for entry in self._registry.list(self.claims, namespace):
                for name, value in claim_usage(entry.obj).items():
                    if name in used:
                        used[name] += value
        for kind in self._registry.kinds:
            names = _count_names(kind) & set(hard)
            if names and kind.namespaced and kind.kind not in ("Pod", "PersistentVolumeClaim"):
                try:
                    count = Decimal(len(self._registry.list(kind, namespace)))
                except KeyError:  # a kind that is not stored
                    continue
                for name in names:
                    used[name] = count
        return used


def _increase(after: Mapping[str, Decimal], before: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """What an update adds to an object's usage (a resize, an expansion): only the names that grew."""
    return {
        name: value - before.get(name, Decimal(0))
        for name, value in after.items()
        if value > before.get(name, Decimal(0))
    }


def _is_resize(operation: str, subresource: str) -> bool:
    return operation == "UPDATE" and subresource == "resize"


def _is_expansion(operation: str, kind: Kind, subresource: str) -> bool:
    return (
        operation == "UPDATE" and not subresource and not kind.group and kind.kind == "PersistentVolumeClaim"
    )


class ResourceQuotaAdmission:
    """Refuses a create that would take a namespace over one of its quotas (kube's ResourceQuota plugin)."""

    name = "ResourceQuota"
    mutating = False

    def __init__(self, usage: QuotaUsage) -> None:
        self._usage = usage

    @staticmethod
    def handles(operation: str, kind: Kind, subresource: str) -> bool:
        if not kind.namespaced:
            return False
        return (
            (operation == "CREATE" and not subresource)
            or _is_resize(operation, subresource)
            or _is_expansion(operation, kind, subresource)
        )

    async def admit(self, attributes: AdmissionAttributes) -> None:
        operation, kind, subresource = attributes.operation, attributes.kind, attributes.subresource
        if not self.handles(operation, kind, subresource):
            return
        # A pod's in-place resize (1.33) is charged what it adds, as kube's pod evaluator handles
        # updates through `pods/resize`; a claim's expansion likewise, as kube's claim evaluator does.
        resize = _is_resize(operation, subresource)
        expansion = _is_expansion(operation, kind, subresource)
        obj = attributes.obj or {}
        quotas = self._usage.quotas_in(attributes.namespace)
        if not quotas:
            return
        if kind.kind == "Pod":
            if not _counts_pod(obj):
                return
            requested = pod_usage(obj)
            if resize:
                requested = _increase(requested, pod_usage(attributes.old or {}))
                if not requested:
                    return
        elif kind.kind == "PersistentVolumeClaim" and not kind.group:
            requested = claim_usage(obj)
            if expansion:
                requested = _increase(requested, claim_usage(attributes.old or {}))
                if not requested:
                    return
        else:
            requested = {name: Decimal(1) for name in _count_names(kind)}
        for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
            spec = quota.get("spec") or {}
            hard = {name: _quantity(value) for name, value in (spec.get("hard") or {}).items()}
            if kind.kind == "Pod":
                if not quota_matches_pod(spec, obj):
                    continue
                self._check_specified(quota, obj, hard, attributes)
            relevant = sorted(name for name in hard if name in requested)
            if not relevant:
                continue
            used = self._usage.used(quota, attributes.namespace)
            exceeded = [n for n in relevant if used.get(n, Decimal(0)) + requested[n] > hard[n]]
            if exceeded:

                def listed(values: Mapping[str, Decimal], names: list[str] = exceeded) -> str:
                    return ",".join(f"{n}={format_quantity(values.get(n, Decimal(0)))}" for n in names)

                raise errors.forbidden(
                    kind.plural,
                    attributes.forbidden_name(),
                    kind.group,
                    f"exceeded quota: {quota['metadata']['name']}, requested: {listed(requested)}, "
                    f"used: {listed(used)}, limited: {listed(hard)}",
                )

    @staticmethod
    def _check_specified(
        quota: Obj, pod: Obj, hard: Mapping[str, Decimal], attributes: AdmissionAttributes
    ) -> None:
        missing: list[str] = []
        containers = list((pod.get("spec") or {}).get("containers") or [])
        for name in sorted(set(hard) & set(_MUST_SPECIFY)):
            section, _, resource = name.rpartition(".")
            section = {"": "requests", "requests": "requests", "limits": "limits"}[section]
            lacking = [
                c.get("name", "")
                for c in containers
                if resource not in ((c.get("resources") or {}).get(section) or {})
            ]
            if lacking:
                missing.append(f"{name} for: {','.join(lacking)}")
        if missing:
            raise errors.forbidden(
                "pods",
                attributes.forbidden_name(),
                "",
                f"failed quota: {quota['metadata']['name']}: must specify {'; '.join(missing)}",
            )


class QuotaController:
    """Keeps every ResourceQuota's `status.hard` and `status.used` current.

    It listens to the watch cache in-process (a synchronous callback per change, far cheaper than a
    watch stream) and recomputes a namespace's quotas once per loop iteration in which it changed.
    """

    def __init__(self, registry: Registry, usage: QuotaUsage) -> None:
        self._registry = registry
        self._usage = usage
        self._dirty: set[str] = set()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._wake = asyncio.Event()
        for kind in self._registry.kinds:
            if not kind.namespaced:
                continue
            try:
                self._registry.cache(kind).listeners.append(self._changed)
            except KeyError:  # kinds that are not stored
                continue
        assert self._usage.quotas is not None
        self._dirty.update(
            q.obj["metadata"]["namespace"] for q in self._registry.list(self._usage.quotas, None)
        )
        self._wake.set()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _changed(self, event: Any) -> None:
        namespace = event.entry.obj["metadata"].get("namespace", "")
        if namespace in self._dirty:
            return
        if event.entry.obj.get("kind") != "ResourceQuota" and not self._usage.quotas_in(namespace):
            return
        self._dirty.add(namespace)
        assert self._wake is not None
        self._wake.set()

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            dirty, self._dirty = self._dirty, set()
            for namespace in dirty:
                await self._refresh(namespace)

    async def _refresh(self, namespace: str) -> None:
        assert self._usage.quotas is not None
        for quota in self._usage.quotas_in(namespace):
            used = self._usage.used(quota, namespace)
            hard = dict((quota.get("spec") or {}).get("hard") or {})
            status = {"hard": hard, "used": {name: format_quantity(value) for name, value in used.items()}}
            if quota.get("status") == status:
                continue
            name = quota["metadata"]["name"]

            def set_status(obj: Obj, status: Obj = status) -> Obj:
                obj["status"] = status
                return obj

            try:
                await self._registry.modify(
                    self._usage.quotas, namespace, name, set_status, _CONTROLLER, subresource="status"
                )
            except errors.APIError as exc:  # deleted meanwhile, or a conflict: the next event retries
                log.debug("quota status of %s/%s not updated: %s", namespace, name, exc.message)
