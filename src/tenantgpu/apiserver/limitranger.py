"""kube's LimitRanger admission plugin: a namespace's LimitRanges default and bound pod resources.

On a pod's create, a LimitRange item of type `Container` gives every container (and init container)
the `default` limits and `defaultRequest` requests it does not set, and names what it set in the
pod's `kubernetes.io/limit-ranger` annotation. After the mutating webhooks (HAMi's among them), each
container must then lie within the item's `min` and `max` and its limit may exceed its request by at
most `maxLimitRequestRatio`; a `Pod` item bounds the sums over the pod's containers. A violation
refuses the pod with 403 Forbidden and kube's messages. Pod updates are not checked again (their
containers' resources cannot change), nor are subresources, as in kube, except an in-place resize
(`pods/resize`, 1.33), whose new resources are defaulted and bounded as a new pod's.

Because the defaults are applied before the webhooks, a LimitRange can give every pod of a namespace
a GPU slice (`nvidia.com/gpu`, `nvidia.com/gpumem`, ...) that HAMi's webhook and scheduler then see.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.admission import AdmissionAttributes
from tenantgpu.apiserver.kinds import Kind
from tenantgpu.apiserver.quantity import QuantityError, canonical_or_same, parse_quantity
from tenantgpu.apiserver.quota import pod_resources

Obj = dict[str, Any]
LimitRangeLookup = Callable[[str], list[Obj]]

ANNOTATION = "kubernetes.io/limit-ranger"


Amounts = Mapping[str, tuple[Decimal, str]]


def _amounts(resources: Mapping[str, Any] | None) -> dict[str, tuple[Decimal, str]]:
    """Each quantity's value, and how kube prints it (its canonical form)."""
    out: dict[str, tuple[Decimal, str]] = {}
    for name, value in (resources or {}).items():
        try:
            out[name] = (parse_quantity(value), str(canonical_or_same(value)))
        except (QuantityError, TypeError):
            continue  # validation refuses it with its own message
    return out


def _shown(value: Any) -> str:
    return str(canonical_or_same(value))


def _items(limit_range: Obj, kind: str) -> Iterable[Obj]:
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if isinstance(item, dict) and item.get("type") == kind:
            yield item


def _containers(pod: Obj) -> list[tuple[str, Obj]]:
    spec = pod.get("spec") or {}
    return [("container", c) for c in spec.get("containers") or []] + [
        ("init container", c) for c in spec.get("initContainers") or []
    ]


def apply_defaults(limit_range: Obj, pod: Obj) -> bool:
    """Give the pod's containers the LimitRange's container defaults; whether anything was set."""
    defaults: dict[str, dict[str, Any]] = {"limits": {}, "requests": {}}
    for item in _items(limit_range, "Container"):
        defaults["requests"].update(item.get("defaultRequest") or {})
        defaults["limits"].update(item.get("default") or {})
    notes: list[str] = []
    for prefix, container in _containers(pod):
        resources = container.setdefault("resources", {})
        # kube notes a container's requests before its limits, each list sorted by name
        for bucket, word in (("requests", "request"), ("limits", "limit")):
            current = resources.get(bucket) or {}
            added = sorted(name for name in defaults[bucket] if name not in current)
            if added:
                resources[bucket] = {**current, **{name: defaults[bucket][name] for name in added}}
                notes.append(f"{', '.join(added)} {word} for {prefix} {container.get('name', '')}")
    if not notes:
        return False
    annotations = pod.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)
    return True


def _min(kind: str, name: str, enforced: Any, requests: Amounts, limits: Amounts) -> str | None:
    bound, head = parse_quantity(enforced), f"minimum {name} usage per {kind} is {_shown(enforced)}"
    if name not in requests:
        return f"{head}.  No request is specified"
    if bound > requests[name][0]:
        return f"{head}, but request is {requests[name][1]}"
    if name in limits and bound > limits[name][0]:
        return f"{head}, but limit is {limits[name][1]}"
    return None


def _max(kind: str, name: str, enforced: Any, requests: Amounts, limits: Amounts) -> str | None:
    bound, head = parse_quantity(enforced), f"maximum {name} usage per {kind} is {_shown(enforced)}"
    if name not in limits:
        return f"{head}.  No limit is specified"
    if limits[name][0] > bound:
        return f"{head}, but limit is {limits[name][1]}"
    if name in requests and requests[name][0] > bound:
        return f"{head}, but request is {requests[name][1]}"
    return None


def _ratio(kind: str, name: str, enforced: Any, requests: Amounts, limits: Amounts) -> str | None:
    head = f"{name} max limit to request ratio per {kind} is {_shown(enforced)}"
    request, limit = requests.get(name, (Decimal(0), ""))[0], limits.get(name, (Decimal(0), ""))[0]
    if not request:
        return f"{head}, but no request is specified or request is 0"
    if not limit:
        return f"{head}, but no limit is specified or limit is 0"
    if abs(limit) > abs(request) * parse_quantity(enforced):
        return f"{head}, but provided ratio is {abs(limit) / abs(request):.6f}"
    return None


def _check(item: Obj, kind: str, requests: Amounts, limits: Amounts) -> list[str]:
    found: list[str] = []
    for key, rule in (("min", _min), ("max", _max), ("maxLimitRequestRatio", _ratio)):
        for name, enforced in (item.get(key) or {}).items():
            try:
                problem = rule(kind, name, enforced, requests, limits)
            except (QuantityError, TypeError):
                continue  # a LimitRange that was stored is valid; nothing else can be read here
            if problem is not None:
                found.append(problem)
    return found


def _pod_totals(pod: Obj, bucket: str) -> dict[str, tuple[Decimal, str]]:
    """The pod's requests or limits as kube sums them for a `Pod` item, with how each is printed."""
    totals = pod_resources(pod.get("spec") or {}, bucket)
    return {name: (amount, _shown(str(amount))) for name, amount in totals.items()}


def violations(limit_range: Obj, pod: Obj) -> list[str]:
    """What of the pod the LimitRange does not allow, in kube's words (empty: allowed)."""
    found: list[str] = []
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "Container":
            for _, container in _containers(pod):
                resources = container.get("resources") or {}
                found += _check(
                    item, "Container", _amounts(resources.get("requests")), _amounts(resources.get("limits"))
                )
        elif item.get("type") == "Pod":
            found += _check(item, "Pod", _pod_totals(pod, "requests"), _pod_totals(pod, "limits"))
    return found


class LimitRanger:
    """One half of the plugin: the mutating half gives container defaults before the webhooks, the
    validating half checks the pod as admitted against every LimitRange of its namespace."""

    name = "LimitRanger"

    def __init__(self, limit_ranges: LimitRangeLookup, *, mutating: bool) -> None:
        self._limit_ranges = limit_ranges
        self.mutating = mutating

    @staticmethod
    def handles(operation: str, kind: Kind, subresource: str) -> bool:
        # A pod's create, and from 1.33 its in-place resize (`pods/resize`), which kube's plugin handles too.
        resize = operation == "UPDATE" and subresource == "resize"
        return (
            (resize or (operation == "CREATE" and not subresource)) and not kind.group and kind.kind == "Pod"
        )

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if attributes.obj is None or not self.handles(
            attributes.operation, attributes.kind, attributes.subresource
        ):
            return
        pod = attributes.obj or {}
        found: list[str] = []
        for limit_range in self._limit_ranges(attributes.namespace):
            if not self.mutating:
                found += violations(limit_range, pod)
            elif apply_defaults(limit_range, pod):
                attributes.mutated = True
        if found:
            # kube aggregates the errors: one is shown as it is, several in brackets
            why = found[0] if len(found) == 1 else "[" + ", ".join(found) + "]"
            raise errors.forbidden("pods", attributes.forbidden_name(), "", why)
