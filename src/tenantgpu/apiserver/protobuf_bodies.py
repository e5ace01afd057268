"""Decoding the protobuf bodies kubectl ≥ 1.32 sends for typed creates (`create namespace/configmap/job/deployment/…`).

Protobuf carries field numbers, not names, so each kind needs its schema; only the kinds kubectl's
generator commands create on this server are described. Unknown fields are skipped.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from tenantgpu.apiserver._protowire import BYTES, VARINT, ProtobufError, fields, text

MAGIC = b"k8s\x00"


# Malformed bodies raise the wire reader's error; the name says what the server rejects.
ProtobufBodyError = ProtobufError


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each varint or length-delimited field; fixed-size ones are skipped."""
    for number, wire, value in fields(data):
        if wire in (VARINT, BYTES):
            yield number, value


def _text(value: int | bytes) -> str:
    return text(value)


def _map_entry(value: int | bytes, as_bytes: bool = False) -> tuple[str, str]:
    if not isinstance(value, bytes):
        raise ProtobufBodyError("expected a map entry")
    key, item = "", ""
    for number, part in _fields(value):
        if number == 1:
            key = _text(part)
        elif number == 2:
            item = base64.b64encode(part).decode() if as_bytes and isinstance(part, bytes) else _text(part)
    return key, item


Schema = dict[
    int, tuple[str, Callable[[Any], Any], str]
]  # number -> (json name, decoder, "one"|"list"|"map")


def _message(schema: Schema) -> Callable[[Any], dict[str, Any]]:
    def decode(value: int | bytes) -> dict[str, Any]:
        if not isinstance(value, bytes):
            raise ProtobufBodyError("expected a message")
        result: dict[str, Any] = {}
        for number, part in _fields(value):
            entry = schema.get(number)
            if entry is None:
                continue
            name, decoder, shape = entry
            if shape == "list":
                result.setdefault(name, []).append(decoder(part))
            elif shape == "map":
                key, item = decoder(part)
                result.setdefault(name, {})[key] = item
            else:
                decoded = decoder(part)
                # Go writes a non-pointer string even when empty; JSON would have left it out.
                if decoded != "":
                    result[name] = decoded
        return result

    return decode


def _int(value: int | bytes) -> int:
    if isinstance(value, bytes):
        raise ProtobufBodyError("expected an integer")
    return value - (1 << 64) if value >= 1 << 63 else value


def _bool(value: int | bytes) -> bool:
    return bool(_int(value))


def _flag(value: int | bytes) -> bool | str:
    """A non-pointer bool, which Go writes even when false: false reads as absent, as in JSON."""
    return _bool(value) or ""


_OBJECT_META = _message(
    {
        1: ("name", _text, "one"),
        2: ("generateName", _text, "one"),
        3: ("namespace", _text, "one"),
        11: ("labels", _map_entry, "map"),
        12: ("annotations", _map_entry, "map"),
        14: ("finalizers", _text, "list"),
    }
)


def _quantity_entry(value: int | bytes) -> tuple[str, str]:
    """A `map<string, Quantity>` entry; a Quantity is a message whose field 1 is its text."""
    if not isinstance(value, bytes):
        raise ProtobufBodyError("expected a map entry")
    key, item = "", ""
    for number, part in _fields(value):
        if number == 1:
            key = _text(part)
        elif number == 2 and isinstance(part, bytes):
            item = next((_text(q) for n, q in _fields(part) if n == 1), "")
    return key, item


_LABEL_SELECTOR = _message(
    {
        1: ("matchLabels", _map_entry, "map"),
        2: (
            "matchExpressions",
            _message({1: ("key", _text, "one"), 2: ("operator", _text, "one"), 3: ("values", _text, "list")}),
            "list",
        ),
    }
)
_CONTAINER = _message(
    {
        1: ("name", _text, "one"),
        2: ("image", _text, "one"),
        3: ("command", _text, "list"),
        4: ("args", _text, "list"),
        5: ("workingDir", _text, "one"),
        6: (
            "ports",
            _message(
                {
                    1: ("name", _text, "one"),
                    2: ("hostPort", lambda v: _int(v) or "", "one"),
                    3: ("containerPort", _int, "one"),
                    4: ("protocol", _text, "one"),
                }
            ),
            "list",
        ),
        7: ("env", _message({1: ("name", _text, "one"), 2: ("value", _text, "one")}), "list"),
        8: (
            "resources",
            _message({1: ("limits", _quantity_entry, "map"), 2: ("requests", _quantity_entry, "map")}),
            "one",
        ),
        13: ("terminationMessagePath", _text, "one"),
        14: ("imagePullPolicy", _text, "one"),
        16: ("stdin", _flag, "one"),
        17: ("stdinOnce", _flag, "one"),
        18: ("tty", _flag, "one"),
        20: ("terminationMessagePolicy", _text, "one"),
    }
)
_POD_SPEC = _message(
    {
        2: ("containers", _CONTAINER, "list"),
        3: ("restartPolicy", _text, "one"),
        4: ("terminationGracePeriodSeconds", _int, "one"),
        5: ("activeDeadlineSeconds", _int, "one"),
        6: ("dnsPolicy", _text, "one"),
        7: ("nodeSelector", _map_entry, "map"),
        8: ("serviceAccountName", _text, "one"),
        10: ("nodeName", _text, "one"),
        19: ("schedulerName", _text, "one"),
        20: ("initContainers", _CONTAINER, "list"),
    }
)
_POD_TEMPLATE = _message({1: ("metadata", _OBJECT_META, "one"), 2: ("spec", _POD_SPEC, "one")})
_JOB_SPEC = _message(
    {
        1: ("parallelism", _int, "one"),
        2: ("completions", _int, "one"),
        3: ("activeDeadlineSeconds", _int, "one"),
        4: ("selector", _LABEL_SELECTOR, "one"),
        5: ("manualSelector", _bool, "one"),
        6: ("template", _POD_TEMPLATE, "one"),
        7: ("backoffLimit", _int, "one"),
        8: ("ttlSecondsAfterFinished", _int, "one"),
        9: ("completionMode", _text, "one"),
        10: ("suspend", _bool, "one"),
        14: ("podReplacementPolicy", _text, "one"),
    }
)


def _int_or_string(value: int | bytes) -> int | str:
    """An IntOrString message: type 0 with intVal (field 2), type 1 with strVal (field 3)."""
    if not isinstance(value, bytes):
        raise ProtobufBodyError("expected an IntOrString")
    parts = dict(_fields(value))
    if parts.get(1, 0) == 1:
        return _text(parts.get(3, b""))
    return _int(parts.get(2, 0))


_DEPLOYMENT_SPEC = _message(
    {
        1: ("replicas", _int, "one"),
        2: ("selector", _LABEL_SELECTOR, "one"),
        3: ("template", _POD_TEMPLATE, "one"),
        4: (
            "strategy",
            _message(
                {
                    1: ("type", _text, "one"),
                    2: (
                        "rollingUpdate",
                        _message(
                            {
                                1: ("maxUnavailable", _int_or_string, "one"),
                                2: ("maxSurge", _int_or_string, "one"),
                            }
                        ),
                        "one",
                    ),
                }
            ),
            "one",
        ),
        5: ("minReadySeconds", lambda v: _int(v) or "", "one"),
        6: ("revisionHistoryLimit", _int, "one"),
        7: ("paused", _flag, "one"),
        9: ("progressDeadlineSeconds", _int, "one"),
    }
)
_SERVICE_SPEC = _message(
    {
        1: (
            "ports",
            _message(
                {
                    1: ("name", _text, "one"),
                    2: ("protocol", _text, "one"),
                    3: ("port", _int, "one"),
                    # Go writes these non-pointer fields even when unset (0): JSON would leave them out.
                    4: ("targetPort", lambda v: _int_or_string(v) or "", "one"),
                    5: ("nodePort", lambda v: _int(v) or "", "one"),
                    6: ("appProtocol", _text, "one"),
                }
            ),
            "list",
        ),
        2: ("selector", _map_entry, "map"),
        3: ("clusterIP", _text, "one"),
        4: ("type", _text, "one"),
        5: ("externalIPs", _text, "list"),
        7: ("sessionAffinity", _text, "one"),
        8: ("loadBalancerIP", _text, "one"),
        9: ("loadBalancerSourceRanges", _text, "list"),
        10: ("externalName", _text, "one"),
        11: ("externalTrafficPolicy", _text, "one"),
        12: ("healthCheckNodePort", lambda v: _int(v) or "", "one"),
        13: ("publishNotReadyAddresses", _flag, "one"),
        17: ("ipFamilyPolicy", _text, "one"),
        18: ("clusterIPs", _text, "list"),
        19: ("ipFamilies", _text, "list"),
        20: ("allocateLoadBalancerNodePorts", _bool, "one"),
        21: ("loadBalancerClass", _text, "one"),
        22: ("internalTrafficPolicy", _text, "one"),
    }
)
_RESOURCE_QUOTA_SPEC = _message(
    {
        1: ("hard", _quantity_entry, "map"),
        2: ("scopes", _text, "list"),
        3: (
            "scopeSelector",
            _message(
                {
                    1: (
                        "matchExpressions",
                        _message(
                            {
                                1: ("scopeName", _text, "one"),
                                2: ("operator", _text, "one"),
                                3: ("values", _text, "list"),
                            }
                        ),
                        "list",
                    )
                }
            ),
            "one",
        ),
    }
)
_DELETE_OPTIONS = _message(
    {
        1: ("gracePeriodSeconds", _int, "one"),
        2: (
            "preconditions",
            _message({1: ("uid", _text, "one"), 2: ("resourceVersion", _text, "one")}),
            "one",
        ),
        3: ("orphanDependents", _bool, "one"),
        4: ("propagationPolicy", _text, "one"),
    }
)
_REFERENCE = _message({1: ("kind", _text, "one"), 2: ("namespace", _text, "one"), 3: ("name", _text, "one")})
_POLICY_RULE = _message(
    {
        1: ("verbs", _text, "list"),
        2: ("apiGroups", _text, "list"),
        3: ("resources", _text, "list"),
        4: ("resourceNames", _text, "list"),
        5: ("nonResourceURLs", _text, "list"),
    }
)
_SUBJECT = _message(
    {
        1: ("kind", _text, "one"),
        2: ("apiGroup", _text, "one"),
        3: ("name", _text, "one"),
        4: ("namespace", _text, "one"),
    }
)
_ROLE_REF = _message({1: ("apiGroup", _text, "one"), 2: ("kind", _text, "one"), 3: ("name", _text, "one")})
_BINDING = _message(
    {
        1: ("metadata", _OBJECT_META, "one"),
        2: ("subjects", _SUBJECT, "list"),
        3: ("roleRef", _ROLE_REF, "one"),
    }
)
_INGRESS_BACKEND = _message(
    {
        4: (
            "service",
            _message(
                {
                    1: ("name", _text, "one"),
                    2: ("port", _message({1: ("name", _text, "one"), 2: ("number", _int, "one")}), "one"),
                }
            ),
            "one",
        ),
        3: (
            "resource",
            _message({1: ("apiGroup", _text, "one"), 2: ("kind", _text, "one"), 3: ("name", _text, "one")}),
            "one",
        ),
    }
)
_HTTP_RULE = _message(
    {
        1: (
            "paths",
            _message(
                {
                    1: ("path", _text, "one"),
                    3: ("pathType", _text, "one"),
                    2: ("backend", _INGRESS_BACKEND, "one"),
                }
            ),
            "list",
        )
    }
)
_INGRESS_RULE_PARTS = _message(
    {1: ("host", _text, "one"), 2: ("ingressRuleValue", _message({1: ("http", _HTTP_RULE, "one")}), "one")}
)


def _ingress_rule(value: int | bytes) -> dict[str, Any]:
    # The rule's value is a message of its own on the wire and inline in JSON (`host` beside `http`).
    rule = _INGRESS_RULE_PARTS(value)
    rule.update(rule.pop("ingressRuleValue", {}))
    return rule


def _bytes(value: int | bytes) -> str:
    """A `bytes` field, as JSON carries it (base64)."""
    if not isinstance(value, bytes):
        raise ProtobufBodyError("expected bytes")
    return base64.b64encode(value).decode()


def _time(value: int | bytes) -> str:
    """A meta/v1 Time (seconds since the epoch; nanos dropped, as its JSON form drops them)."""
    if not isinstance(value, bytes):
        raise ProtobufBodyError("expected a Time")
    seconds = next((_int(part) for number, part in _fields(value) if number == 1), 0)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _extra_entry(value: int | bytes) -> tuple[str, list[str]]:
    """A `map<string, ExtraValue>` entry; an ExtraValue is a message of repeated strings (field 1)."""
    if not isinstance(value, bytes):
        raise ProtobufBodyError("expected a map entry")
    key, items = "", []
    for number, part in _fields(value):
        if number == 1:
            key = _text(part)
        elif number == 2 and isinstance(part, bytes):
            items = [_text(item) for n, item in _fields(part) if n == 1]
    return key, items


# `kubectl certificate approve/deny` update the approval subresource with the object they read, in
# protobuf from 1.32: its resourceVersion makes the update conditional.
_CSR = _message(
    {
        1: (
            "metadata",
            _message(
                {
                    1: ("name", _text, "one"),
                    6: ("resourceVersion", _text, "one"),
                    11: ("labels", _map_entry, "map"),
                    12: ("annotations", _map_entry, "map"),
                    14: ("finalizers", _text, "list"),
                }
            ),
            "one",
        ),
        2: (
            "spec",
            _message(
                {
                    1: ("request", _bytes, "one"),
                    2: ("username", _text, "one"),
                    3: ("uid", _text, "one"),
                    4: ("groups", _text, "list"),
                    5: ("usages", _text, "list"),
                    6: ("extra", _extra_entry, "map"),
                    7: ("signerName", _text, "one"),
                    8: ("expirationSeconds", _int, "one"),
                }
            ),
            "one",
        ),
        3: (
            "status",
            _message(
                {
                    1: (
                        "conditions",
                        _message(
                            {
                                1: ("type", _text, "one"),
                                2: ("reason", _text, "one"),
                                3: ("message", _text, "one"),
                                4: ("lastUpdateTime", _time, "one"),
                                5: ("lastTransitionTime", _time, "one"),
                                6: ("status", _text, "one"),
                            }
                        ),
                        "list",
                    ),
                    2: ("certificate", _bytes, "one"),
                }
            ),
            "one",
        ),
    }
)


_SCHEMAS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "CertificateSigningRequest": _CSR,
    "Namespace": _message(
        {
            1: ("metadata", _OBJECT_META, "one"),
            2: ("spec", _message({1: ("finalizers", _text, "list")}), "one"),
        }
    ),
    "ConfigMap": _message(
        {
            1: ("metadata", _OBJECT_META, "one"),
            2: ("data", _map_entry, "map"),
            3: ("binaryData", lambda v: _map_entry(v, True), "map"),
            4: ("immutable", _bool, "one"),
        }
    ),
    "Secret": _message(
        {
            1: ("metadata", _OBJECT_META, "one"),
            2: ("data", lambda v: _map_entry(v, True), "map"),
            3: ("type", _text, "one"),
            4: ("stringData", _map_entry, "map"),
            5: ("immutable", _bool, "one"),
        }
    ),
    "ServiceAccount": _message(
        {
            1: ("metadata", _OBJECT_META, "one"),
            3: ("imagePullSecrets", _message({1: ("name", _text, "one")}), "list"),
            4: ("automountServiceAccountToken", _bool, "one"),
        }
    ),
    "TokenRequest": _message(
        {
            1: ("metadata", _OBJECT_META, "one"),
            2: (
                "spec",
                _message(
                    {
                        1: ("audiences", _text, "list"),
                        3: ("boundObjectRef", _REFERENCE, "one"),
                        4: ("expirationSeconds", _int, "one"),
                    }
                ),
                "one",
            ),
        }
    ),
    "Eviction": _message(
        {1: ("metadata", _OBJECT_META, "one"), 2: ("deleteOptions", _DELETE_OPTIONS, "one")}
    ),
    "DeleteOptions": _DELETE_OPTIONS,
    "Role": _message({1: ("metadata", _OBJECT_META, "one"), 2: ("rules", _POLICY_RULE, "list")}),
    "ClusterRole": _message(
        {
            1: ("metadata", _OBJECT_META, "one"),
            2: ("rules", _POLICY_RULE, "list"),
            3: ("aggregationRule", _message({1: ("clusterRoleSelectors", _LABEL_SELECTOR, "list")}), "one"),
        }
    ),
    "PodDisruptionBudget": _message(
        {
            1: ("metadata", _OBJECT_META, "one"),
            2: (
                "spec",
                _message(
                    {
                        1: ("minAvailable", _int_or_string, "one"),
                        2: ("selector", _LABEL_SELECTOR, "one"),
                        3: ("maxUnavailable", _int_or_string, "one"),
                        4: ("unhealthyPodEvictionPolicy", _text, "one"),
                    }
                ),
                "one",
            ),
        }
    ),
    "RoleBinding": _BINDING,
    "ClusterRoleBinding": _BINDING,
    "PriorityClass": _message(
        {
            1: ("metadata", _OBJECT_META, "one"),
            2: ("value", _int, "one"),
            3: ("globalDefault", _flag, "one"),
            4: ("description", _text, "one"),
            5: ("preemptionPolicy", _text, "one"),
        }
    ),
    "Ingress": _message(
        {
            1: ("metadata", _OBJECT_META, "one"),
            2: (
                "spec",
                _message(
                    {
                        4: ("ingressClassName", _text, "one"),
                        1: ("defaultBackend", _INGRESS_BACKEND, "one"),
                        2: (
                            "tls",
                            _message({1: ("hosts", _text, "list"), 2: ("secretName", _text, "one")}),
                            "list",
                        ),
                        3: ("rules", _ingress_rule, "list"),
                    }
                ),
                "one",
            ),
        }
    ),
    "Job": _message({1: ("metadata", _OBJECT_META, "one"), 2: ("spec", _JOB_SPEC, "one")}),
    "CronJob": _message(
        {
            1: ("metadata", _OBJECT_META, "one"),
            2: (
                "spec",
                _message(
                    {
                        1: ("schedule", _text, "one"),
                        2: ("startingDeadlineSeconds", _int, "one"),
                        3: ("concurrencyPolicy", _text, "one"),
                        4: ("suspend", _bool, "one"),
                        5: (
                            "jobTemplate",
                            _message({1: ("metadata", _OBJECT_META, "one"), 2: ("spec", _JOB_SPEC, "one")}),
                            "one",
                        ),
                        6: ("successfulJobsHistoryLimit", _int, "one"),
                        7: ("failedJobsHistoryLimit", _int, "one"),
                        8: ("timeZone", _text, "one"),
                    }
                ),
                "one",
            ),
        }
    ),
    "Deployment": _message({1: ("metadata", _OBJECT_META, "one"), 2: ("spec", _DEPLOYMENT_SPEC, "one")}),
    "Service": _message({1: ("metadata", _OBJECT_META, "one"), 2: ("spec", _SERVICE_SPEC, "one")}),
    "ResourceQuota": _message(
        {1: ("metadata", _OBJECT_META, "one"), 2: ("spec", _RESOURCE_QUOTA_SPEC, "one")}
    ),
}


def decode_object(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object of one of the supported kinds."""
    if not body.startswith(MAGIC):
        raise ProtobufBodyError("missing the k8s protobuf envelope")
    api_version = kind = ""
    raw = b""
    for number, value in _fields(body[len(MAGIC) :]):
        if number == 1 and isinstance(value, bytes):
            for sub, part in _fields(value):
                if sub == 1:
                    api_version = _text(part)
                elif sub == 2:
                    kind = _text(part)
        elif number == 2 and isinstance(value, bytes):
            raw = value
    decoder = _SCHEMAS.get(kind)
    if decoder is None:
        raise ProtobufBodyError(f"protobuf bodies of kind {kind!r} are not supported; send JSON")
    obj = decoder(raw)
    obj["apiVersion"] = api_version
    obj["kind"] = kind
    return obj
