"""A container's environment as the kubelet builds it (makeEnvironmentVariables), from its pod and the
ConfigMaps and Secrets it references.

`envFrom` comes first (keys that are no variable names are skipped and reported), then `env` in order:
a value has its `$(NAME)` references expanded from the variables before it and the service variables; a
`valueFrom` reads the pod's fields (`metadata.name`, `metadata.labels['app']`, `spec.nodeName`,
`status.podIP`, …), the container's resources (`limits.memory` in a `divisor`'s units, the node's
allocatable when the limit is unset), or a key of a ConfigMap or Secret. A reference to a ConfigMap,
Secret or key that is not there fails the container with kube's words (`configmap "settings" not
found`), unless it is `optional`. Last come the variables of the `kubernetes` Service. The command and
args get the same `$(NAME)` expansion.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from tenantgpu.goquote import go_quote
from tenantgpu.gpushare.quantity import parse_quantity

Obj = dict[str, Any]

# The variable names a container may get, before and from 1.32 (RelaxedEnvironmentVariableValidation).
_STRICT_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
_RELAXED_FROM_MINOR = 32


class ContainerConfigError(Exception):
    """A reference the container's environment cannot be built without; the kubelet reports the
    container waiting in CreateContainerConfigError with this message. `container` is its spec group and
    name, once the caller knows them (empty when no one container is to blame, as with an API error)."""

    container: tuple[str, str] = ("containers", "")


@dataclass
class Sources:
    """The ConfigMaps and Secrets a pod references, as fetched: None for one that is not there."""

    config_maps: dict[str, Obj | None] = field(default_factory=dict)
    secrets: dict[str, Obj | None] = field(default_factory=dict)


@dataclass(frozen=True)
class PodRuntime:
    """What the kubelet knows about the pod beside its spec."""

    pod_ip: str = ""
    host_ip: str = ""
    allocatable: Mapping[str, Any] = field(default_factory=dict)
    service_env: Mapping[str, str] = field(default_factory=dict)
    minor: int = 31


@dataclass
class Environment:
    """The container's variables in order (`declared`: those of its spec, before the service variables),
    and the envFrom keys skipped as no variable names: (`configMap` or `secret`, `ns/name`, the keys)."""

    variables: dict[str, str]
    declared: dict[str, str]
    skipped: list[tuple[str, str, list[str]]] = field(default_factory=list)


def references(container: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """The ConfigMaps and Secrets the container's `env` and `envFrom` name."""
    config_maps: set[str] = set()
    secrets: set[str] = set()
    for source in container.get("envFrom") or []:
        if source.get("configMapRef") is not None:
            config_maps.add(str(source["configMapRef"].get("name") or ""))
        if source.get("secretRef") is not None:
            secrets.add(str(source["secretRef"].get("name") or ""))
    for var in container.get("env") or []:
        value_from = var.get("valueFrom") or {}
        if value_from.get("configMapKeyRef") is not None:
            config_maps.add(str(value_from["configMapKeyRef"].get("name") or ""))
        if value_from.get("secretKeyRef") is not None:
            secrets.add(str(value_from["secretKeyRef"].get("name") or ""))
    return config_maps, secrets


def expand(text: str, *contexts: Mapping[str, str]) -> str:
    """kube's `$(NAME)` expansion: a name defined in `contexts` is replaced, an unknown one is left as
    written, `$$` is a literal `$`, and a `$` that starts nothing stays."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "$" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        following = text[i + 1]
        if following == "$":
            out.append("$")
            i += 2
        elif following == "(":
            close = text.find(")", i + 2)
            if close < 0:
                out.append("$(")
                i += 2
                continue
            name = text[i + 2 : close]
            out.append(next((c[name] for c in contexts if name in c), f"$({name})"))
            i = close + 1
        else:
            out.append("$" + following)
            i += 2
    return "".join(out)


def service_variables(service: Mapping[str, Any]) -> dict[str, str]:
    """The variables a Service gives containers (kubelet's envvars.FromServices): host, ports, and the
    Docker link variables of each port."""
    spec = service.get("spec") or {}
    ip = str(spec.get("clusterIP") or "")
    ports = spec.get("ports") or []
    if not ip or ip == "None" or not ports:
        return {}
    prefix = str((service.get("metadata") or {}).get("name") or "").replace("-", "_").upper()
    env = {f"{prefix}_SERVICE_HOST": ip, f"{prefix}_SERVICE_PORT": str(ports[0].get("port"))}
    for port in ports:
        if port.get("name"):
            env[f"{prefix}_SERVICE_PORT_{str(port['name']).replace('-', '_').upper()}"] = str(
                port.get("port")
            )
    host = f"[{ip}]" if ":" in ip else ip
    for i, port in enumerate(ports):
        protocol = str(port.get("protocol") or "TCP")
        url = f"{protocol.lower()}://{host}:{port.get('port')}"
        if i == 0:
            env[f"{prefix}_PORT"] = url
        each = f"{prefix}_PORT_{port.get('port')}_{protocol.upper()}"
        env[each] = url
        env[f"{each}_PROTO"] = protocol.lower()
        env[f"{each}_PORT"] = str(port.get("port"))
        env[f"{each}_ADDR"] = ip
    return env


def build(
    pod: Mapping[str, Any], container: Mapping[str, Any], runtime: PodRuntime, sources: Sources
) -> Environment:
    """The container's environment; raises ContainerConfigError for a missing reference."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    variables: dict[str, str] = {}
    skipped: list[tuple[str, str, list[str]]] = []
    for source in container.get("envFrom") or []:
        prefix = str(source.get("prefix") or "")
        for kind, ref_field, fetched in (
            ("configMap", "configMapRef", sources.config_maps),
            ("secret", "secretRef", sources.secrets),
        ):
            ref = source.get(ref_field)
            if ref is None:
                continue
            data = _referenced(kind, ref, fetched)
            if data is None:
                continue
            invalid = []
            for key, value in data.items():
                if _valid_name(prefix + key, runtime.minor):
                    variables[prefix + key] = value
                else:
                    invalid.append(prefix + key)
            if invalid:
                skipped.append((kind, f"{namespace}/{ref.get('name', '')}", sorted(invalid)))
    for var in container.get("env") or []:
        name = str(var.get("name") or "")
        value = var.get("value")
        if value:
            variables[name] = expand(str(value), variables, runtime.service_env)
            continue
        value_from = var.get("valueFrom")
        if not value_from:
            variables[name] = ""
            continue
        resolved = _value_from(pod, container, value_from, runtime, sources, namespace)
        if resolved is not None:
            variables[name] = resolved
    declared = dict(variables)
    for name, value in runtime.service_env.items():
        variables.setdefault(name, value)
    return Environment(variables, declared, skipped)


def expanded_command(container: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
    """`command` + `args` with `$(NAME)` expanded from the container's environment. With `args` alone
    (what `kubectl run -- …` writes) the image's entrypoint would run them; the simulation takes the
    image to have none, as CUDA's base images and busybox do, so `args` are the command."""
    words = [*(container.get("command") or []), *(container.get("args") or [])]
    return [expand(str(word), env) for word in words]


def _referenced(
    kind: str, ref: Mapping[str, Any], fetched: Mapping[str, Obj | None]
) -> dict[str, str] | None:
    """The data of a referenced ConfigMap or Secret (decoded), None when optional and missing."""
    name = str(ref.get("name") or "")
    obj = fetched.get(name)
    if obj is None:
        if ref.get("optional"):
            return None
        raise ContainerConfigError(f'{kind.lower()} "{name}" not found')
    if kind == "secret":
        return {k: base64.b64decode(v).decode(errors="replace") for k, v in (obj.get("data") or {}).items()}
    data = dict(obj.get("data") or {})
    # A ConfigMap's binaryData does not become variables (the kubelet reads `data` only).
    return {k: str(v) for k, v in data.items()}


def _value_from(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    value_from: Mapping[str, Any],
    runtime: PodRuntime,
    sources: Sources,
    namespace: str,
) -> str | None:
    if value_from.get("fieldRef") is not None:
        return field_value(pod, str(value_from["fieldRef"].get("fieldPath") or ""), runtime)
    if value_from.get("resourceFieldRef") is not None:
        return resource_value(value_from["resourceFieldRef"], container, runtime.allocatable)
    for kind, ref_field, fetched, label in (
        ("configMap", "configMapKeyRef", sources.config_maps, "ConfigMap"),
        ("secret", "secretKeyRef", sources.secrets, "Secret"),
    ):
        ref = value_from.get(ref_field)
        if ref is None:
            continue
        data = _referenced(kind, ref, fetched)
        if data is None:
            return None
        key = str(ref.get("key") or "")
        if key not in data:
            if ref.get("optional"):
                return None
            raise ContainerConfigError(
                f"couldn't find key {key} in {label} {namespace}/{ref.get('name', '')}"
            )
        return data[key]
    return ""


_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")


def field_value(pod: Mapping[str, Any], path: str, runtime: PodRuntime) -> str:
    """A downward API field of the pod, as the kubelet reads it for an env var."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple: dict[str, Callable[[], str]] = {
        "metadata.name": lambda: str(meta.get("name") or ""),
        "metadata.namespace": lambda: str(meta.get("namespace") or ""),
        "metadata.uid": lambda: str(meta.get("uid") or ""),
        "metadata.labels": lambda: _format_map(meta.get("labels") or {}),
        "metadata.annotations": lambda: _format_map(meta.get("annotations") or {}),
        "spec.nodeName": lambda: str(spec.get("nodeName") or ""),
        "spec.serviceAccountName": lambda: str(spec.get("serviceAccountName") or ""),
        "status.hostIP": lambda: runtime.host_ip,
        "status.hostIPs": lambda: runtime.host_ip,
        "status.podIP": lambda: runtime.pod_ip,
        "status.podIPs": lambda: runtime.pod_ip,
    }
    if path in simple:
        return simple[path]()
    subscript = _SUBSCRIPT.match(path)
    if subscript:
        return str((meta.get(subscript.group(1)) or {}).get(subscript.group(2), ""))
    return ""


def _format_map(values: Mapping[str, Any]) -> str:
    # kube's FormatMap: `key="value"` lines in key order, values quoted as Go's %q quotes them
    return "\n".join(f"{k}={go_quote(str(values[k]))}" for k in sorted(values))


def resource_value(
    ref: Mapping[str, Any], container: Mapping[str, Any], allocatable: Mapping[str, Any]
) -> str:
    """A container's request or limit in units of the `divisor` (rounded up), as the downward API gives it:
    an unset limit reads as the node's allocatable, an unset request as 0."""
    section, _, resource = str(ref.get("resource") or "").partition(".")
    amounts = (container.get("resources") or {}).get(section) or {}
    raw = amounts.get(resource)
    if raw is None and section == "limits":
        raw = allocatable.get(resource)
    value = _quantity(raw)
    divisor = _quantity(ref.get("divisor")) or Fraction(1)
    if resource == "cpu":
        return str(math.ceil(math.ceil(value * 1000) / math.ceil(divisor * 1000)))
    return str(math.ceil(math.ceil(value) / math.ceil(divisor)))


def _quantity(raw: Any) -> Fraction:
    if raw is None or raw == "":
        return Fraction(0)
    try:
        return parse_quantity(raw)
    except (ValueError, TypeError):
        return Fraction(0)


def _valid_name(name: str, minor: int) -> bool:
    if minor >= _RELAXED_FROM_MINOR:
        return bool(name) and all(32 <= ord(c) <= 126 and c != "=" for c in name)
    return bool(_STRICT_NAME.fullmatch(name)) and name not in (".", "..") and not name.startswith("..")
