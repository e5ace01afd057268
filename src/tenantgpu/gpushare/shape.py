"""The shape of the Pod, Node and ResourceQuota fields the planner reads, checked where manifests are read.

The scheduler and webhook trust what the API server would have let through; a file never went through
one, so `containers: 5` or `nvidia.com/gpu: -1` is caught here, as one line naming the field, rather
than as a TypeError deep inside the scheduler or a pod "placed" on minus one GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tenantgpu.gpushare.quantity import QuantityError, parse_quantity

# A shape is a leaf type (str, bool, int); STRINGS or QUANTITIES for a map of those; a dict for an
# object whose listed fields are checked (fields the planner never reads are left alone); or a
# one-item list for a list of that shape. null is always fine: Kubernetes reads it as unset.
Shape = type | str | dict[str, "Shape"] | list["Shape"]
STRINGS = "map of strings"
QUANTITIES = "map of quantities"

_LEAF_NAMES = {str: "a string", bool: "true or false", int: "an integer"}

_CONTAINER: dict[str, Shape] = {
    "name": str,
    "resources": {"limits": QUANTITIES, "requests": QUANTITIES},
    "securityContext": {"privileged": bool},
    "restartPolicy": str,
}
_SELECTOR_TERM: dict[str, Shape] = {
    "matchExpressions": [{"key": str, "operator": str, "values": [str]}],
    "matchFields": [{"key": str, "operator": str, "values": [str]}],
}
_POD: dict[str, Shape] = {
    "metadata": {"name": str, "namespace": str, "labels": STRINGS, "annotations": STRINGS},
    "spec": {
        "initContainers": [_CONTAINER],
        "containers": [_CONTAINER],
        "nodeName": str,
        "schedulerName": str,
        "runtimeClassName": str,
        "nodeSelector": STRINGS,
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [_SELECTOR_TERM]}
            }
        },
        "tolerations": [{"key": str, "operator": str, "value": str, "effect": str}],
        "overhead": QUANTITIES,
    },
    "status": {"phase": str, "initContainerStatuses": [{"state": {"terminated": {"exitCode": int}}}]},
}
_SHAPES: dict[str, dict[str, Shape]] = {
    "Pod": _POD,
    "Node": {
        "metadata": {"name": str, "labels": STRINGS, "annotations": STRINGS},
        "spec": {"unschedulable": bool, "taints": [{"key": str, "value": str, "effect": str}]},
        "status": {"allocatable": QUANTITIES, "capacity": QUANTITIES},
    },
    "ResourceQuota": {"metadata": {"name": str, "namespace": str}, "spec": {"hard": QUANTITIES}},
}


def pod_problem(pod: Mapping[str, Any]) -> str | None:
    """What makes this Pod (or pod template) unreadable to the planner, as `field must be ...`, or None."""
    return _problem(pod, _POD, "")


def object_problem(obj: Mapping[str, Any]) -> str | None:
    """pod_problem for any kind the planner reads; other kinds are not its business, so None."""
    shape = _SHAPES.get(obj.get("kind", ""))
    return None if shape is None else _problem(obj, shape, "")


def quantity_problem(value: Any) -> str | None:
    """Why a resource quantity is not one the API server would store, or None."""
    try:
        amount = parse_quantity(value)
    except QuantityError as exc:
        return str(exc)
    if amount < 0:
        return f"invalid value {value}: must be greater than or equal to 0"  # the API server's words
    return None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _problem(value: Any, shape: Shape, path: str) -> str | None:
    if value is None:
        return None
    if isinstance(shape, dict):
        if not isinstance(value, Mapping):
            return f"{path} must be an object"
        for key, inner in shape.items():
            problem = _problem(value.get(key), inner, _join(path, key))
            if problem is not None:
                return problem
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{path} must be a list"
        for i, item in enumerate(value):
            problem = _item_problem(item, shape[0], f"{path}[{i}]")
            if problem is not None:
                return problem
        return None
    if shape in (STRINGS, QUANTITIES):
        if not isinstance(value, Mapping):
            return f"{path} must be a {shape}"
        for key, item in value.items():
            if shape == STRINGS and not isinstance(item, str):
                return f"{path}.{key} must be a string"
            problem = quantity_problem(item) if shape == QUANTITIES else None
            if problem is not None:
                return f"{path}.{key}: {problem}"
        return None
    assert isinstance(shape, type)
    # bool is an int to Python, never to Kubernetes
    if not isinstance(value, shape) or (isinstance(value, bool) and shape is not bool):
        return f"{path} must be {_LEAF_NAMES[shape]}"
    return None


def _item_problem(item: Any, shape: Shape, path: str) -> str | None:
    """A list item's problem; inside a named container it names the container, as people do."""
    if (
        shape is _CONTAINER
        and isinstance(item, Mapping)
        and isinstance(item.get("name"), str)
        and item["name"]
    ):
        problem = _problem(item, shape, "")
        return None if problem is None else f"container {item['name']}: {problem}"
    return _problem(item, shape, path)
