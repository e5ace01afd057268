"""Label and field selectors in Kubernetes' syntax: parse them, print them, match objects against them."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FIELD_LABELS",
    "FieldRequirement",
    "FieldSelector",
    "LabelRequirement",
    "LabelSelector",
    "SelectorError",
    "check_field_selector",
    "exact_name",
    "field_requirements",
    "field_selector_exact_match",
    "is_label_value",
    "is_qualified_name",
    "match_selector_object",
    "parse_field_selector",
    "parse_label_selector",
]


class SelectorError(ValueError):
    """A selector the API server cannot parse; the message is in kube-apiserver's words."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- name syntax shared with validation -------------------------------------------------------------

_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

_QUALIFIED_NAME_HINT = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE_HINT = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def qualified_name_errors(name: str) -> list[str]:
    """Why `name` is not a Kubernetes qualified name (`[prefix/]name`), empty when it is one."""
    return list(_qualified_name_errors(name))


# Label and annotation keys repeat across every object of a kind (HAMi's keys on each GPU pod): their
# answers are kept rather than matched again on each write.
@functools.lru_cache(maxsize=4096)
def _qualified_name_errors(name: str) -> tuple[str, ...]:
    errors: list[str] = []
    parts = name.split("/")
    if len(parts) == 1:
        local = parts[0]
    elif len(parts) == 2:
        prefix, local = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix):
            errors.append(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character"
            )
    else:
        return (
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
            "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
            "subdomain prefix and '/' (e.g. 'example.com/MyName')",
        )
    if not local:
        errors.append("name part must be non-empty")
    elif len(local) > 63:
        errors.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME_PART.match(local):
        errors.append(_QUALIFIED_NAME_HINT)
    return tuple(errors)


def is_qualified_name(name: str) -> bool:
    """True when `name` is a valid label or annotation key."""
    return not qualified_name_errors(name)


def label_value_errors(value: str) -> list[str]:
    """Why `value` is not a valid label value, empty when it is one."""
    errors: list[str] = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _LABEL_VALUE.match(value):
        errors.append(_LABEL_VALUE_HINT)
    return errors


def is_label_value(value: str) -> bool:
    """True when `value` may be the value of a label."""
    return not label_value_errors(value)


# --- label selectors --------------------------------------------------------------------------------

_SET_OPERATORS = ("in", "notin")
_OPERATOR_LIST = "[!= == = in notin < >]"


@dataclass(frozen=True)
class LabelRequirement:
    """One term of a label selector: a key, an operator and the values it compares with."""

    key: str
    operator: str  # "=", "==", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        op = self.operator
        if op in ("=", "==", "in"):
            return present and value in self.values
        if op in ("!=", "notin"):
            return not present or value not in self.values
        if op == "exists":
            return present
        if op == "!":
            return not present
        # Gt/Lt compare integers; a label that is no integer never matches, as in kube.
        if not present:
            return False
        try:
            have = int(str(value))
        except ValueError:
            return False
        want = int(self.values[0])
        return have > want if op == "gt" else have < want

    def __str__(self) -> str:
        op = self.operator
        if op == "exists":
            return self.key
        if op == "!":
            return f"!{self.key}"
        if op in _SET_OPERATORS:
            return f"{self.key} {op} ({','.join(sorted(self.values))})"
        symbol = {"gt": ">", "lt": "<"}.get(op, op)
        return f"{self.key}{symbol}{self.values[0]}"


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of label requirements; the empty selector matches every object."""

    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def empty(self) -> bool:
        return not self.requirements

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


_SPECIAL = set("!=(),<>")


def _label_tokens(text: str) -> list[str]:
    """Split a selector into identifiers and the symbols `! = == != ( ) , < >`, dropping whitespace."""
    tokens: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in _SPECIAL:
            pair = text[i : i + 2]
            if pair in ("==", "!="):
                tokens.append(pair)
                i += 2
            else:
                tokens.append(ch)
                i += 1
        else:
            j = i
            while j < len(text) and not text[j].isspace() and text[j] not in _SPECIAL:
                j += 1
            tokens.append(text[i:j])
            i = j
    return tokens


def _is_identifier(token: str | None) -> bool:
    return token is not None and token[0] not in _SPECIAL


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.tokens = _label_tokens(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str | None:
        token = self.peek()
        self.pos += 1
        return token

    def requirement(self) -> LabelRequirement:
        negated = self.peek() == "!"
        if negated:
            self.take()
        key = self.take()
        if not _is_identifier(key) or key in _SET_OPERATORS:
            raise SelectorError(f"found '{key or ''}', expected: identifier")
        assert key is not None
        if self.peek() in (None, ","):
            return _checked(key, "!" if negated else "exists", ())
        if negated:
            raise SelectorError(f"found '{self.peek()}', expected: ',' or 'end of string'")
        op = self.take()
        if op in _SET_OPERATORS:
            return _checked(key, op or "", self.value_set())
        if op in ("=", "==", "!="):
            nxt = self.peek()
            if nxt in (None, ","):
                return _checked(key, op, ("",))
            value = self.take()
            if not _is_identifier(value):
                raise SelectorError(f"found '{value}', expected: identifier")
            return _checked(key, op, (value or "",))
        if op in ("<", ">"):
            value = self.take()
            if not _is_identifier(value):
                raise SelectorError(f"found '{value or ''}', expected: identifier")
            return _checked(key, "gt" if op == ">" else "lt", (value or "",))
        raise SelectorError(f"found '{op or ''}', expected: {_OPERATOR_LIST}")

    def value_set(self) -> tuple[str, ...]:
        opening = self.take()
        if opening != "(":
            raise SelectorError(f"found '{opening or ''}', expected: '('")
        values: list[str] = []
        expect_value = True
        while True:
            token = self.take()
            if token is None:
                raise SelectorError("found '', expected: ')'")
            if token == ")":
                if expect_value:
                    values.append("")
                break
            if token == ",":
                if expect_value:
                    values.append("")
                expect_value = True
                continue
            if not _is_identifier(token) or not expect_value:
                raise SelectorError(f"found '{token}', expected: ',', ')' or identifier")
            values.append(token)
            expect_value = False
        return tuple(sorted(set(values)))


def _checked(key: str, op: str, values: tuple[str, ...]) -> LabelRequirement:
    """Build a requirement, rejecting keys and values that kube's NewRequirement rejects."""
    key_errors = qualified_name_errors(key)
    if key_errors:
        raise SelectorError(f'key: Invalid value: "{key}": {key_errors[0]}')
    if op in ("gt", "lt"):
        try:
            int(values[0])
        except ValueError:
            raise SelectorError(
                f'values[0]: Invalid value: "{values[0]}": '
                "for 'Gt', 'Lt' operators, the value must be an integer"
            ) from None
    else:
        for index, value in enumerate(values):
            value_errors = label_value_errors(value)
            if value_errors:
                raise SelectorError(f'values[{index}][{key}]: Invalid value: "{value}": {value_errors[-1]}')
    return LabelRequirement(key, op, values)


def parse_label_selector(text: str) -> LabelSelector:
    """Parse `app=web,tier!=db,env in (a,b),!legacy`; the empty string selects everything."""
    parser = _LabelParser(text)
    requirements: list[LabelRequirement] = []
    while parser.peek() is not None:
        token = parser.peek()
        if token == ",":
            raise SelectorError("found ',', expected: !, identifier, or 'end of string'")
        if not (_is_identifier(token) or token == "!"):
            raise SelectorError(f"found '{token}', expected: !, identifier, or 'end of string'")
        try:
            requirements.append(parser.requirement())
        except SelectorError as error:
            raise SelectorError(f"unable to parse requirement: {error.message}") from None
        following = parser.take()
        if following is None:
            break
        if following != ",":
            raise SelectorError(f"found '{following}', expected: ',' or 'end of string'")
        if parser.peek() is None:
            raise SelectorError("found '', expected: identifier after ','")
    # kube sorts the terms by key so the printed form is canonical.
    requirements.sort(key=lambda r: r.key)
    return LabelSelector(tuple(requirements))


def match_selector_object(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """Match a `metav1.LabelSelector` object (matchLabels + matchExpressions) against labels.

    A missing or empty selector selects everything, which is what webhook namespaceSelector and
    objectSelector mean once defaulted to `{}`.
    """
    if not selector:
        return True
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for index, expression in enumerate(selector.get("matchExpressions") or []):
        key = expression.get("key", "")
        operator = expression.get("operator", "")
        values = list(expression.get("values") or [])
        where = f"matchExpressions[{index}]"
        if operator in ("In", "NotIn"):
            if not values:
                raise SelectorError(
                    f"{where}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
                )
            present = key in labels
            inside = present and labels[key] in values
            if (operator == "In") != inside:
                return False
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                raise SelectorError(
                    f"{where}.values: Forbidden: may not be specified when `operator` is "
                    "'Exists' or 'DoesNotExist'"
                )
            if (operator == "Exists") != (key in labels):
                return False
        else:
            raise SelectorError(
                f'{where}.operator: Invalid value: "{operator}": not a valid selector operator'
            )
    return True


# --- field selectors --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldSelector:
    """A conjunction of `field=value` / `field!=value` terms over dotted paths of an object."""

    requirements: list[tuple[str, str, str]] = field(default_factory=list)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        for path, op, want in self.requirements:
            have = field_value(obj, path)
            if (have == want) != (op in ("=", "==")):
                return False
        return True

    def empty(self) -> bool:
        return not self.requirements

    def __str__(self) -> str:
        return ",".join(f"{path}{op}{_escape_field_value(value)}" for path, op, value in self.requirements)


# Booleans kube always renders into the field set, so a missing one reads "false".
_BOOLEAN_FIELDS = {"spec.unschedulable", "spec.hostNetwork"}


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The value at a dotted path rendered as kube's field sets do; a missing field reads as ""."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return "false" if path in _BOOLEAN_FIELDS else ""
        current = current[part]
    if current is None:
        return "false" if path in _BOOLEAN_FIELDS else ""
    if isinstance(current, bool):
        return "true" if current else "false"
    if isinstance(current, (dict, list)):
        return ""
    return str(current)


def _escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts


def _unescape_field_value(value: str, whole: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            if i + 1 >= len(value) or value[i + 1] not in "\\,=":
                raise SelectorError(f"invalid field selector: '{whole}'; invalid escape sequence")
            out.append(value[i + 1])
            i += 2
            continue
        if ch in ",=":
            raise SelectorError(f"invalid field selector: '{whole}'; unescaped '{ch}' in value")
        out.append(ch)
        i += 1
    return "".join(out)


def parse_field_selector(text: str) -> FieldSelector:
    """Parse `metadata.name=x,spec.nodeName!=` — ops `=`, `==`, `!=`; `\\,` `\\=` `\\\\` escape values."""
    requirements: list[tuple[str, str, str]] = []
    if not text.strip():
        return FieldSelector(requirements)
    for term in _split_unescaped(text, ","):
        found = _find_operator(term)
        if found is None or not term[: found[0]].strip():
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        at, op = found
        value = _unescape_field_value(term[at + len(op) :], text)
        requirements.append((term[:at].strip(), op, value))
    return FieldSelector(requirements)


FieldRequirement = tuple[str, str, str]


def field_requirements(text: str) -> tuple[FieldRequirement, ...]:
    """A field selector as kube hands it to authorizers (`fields.ParseSelector(…).Requirements()`): each
    term's field, `=` (for `=` and `==`) or `!=`, and value, terms sorted; none when it does not parse,
    as kube then passes no requirements. Unlike a list's selector, the field is not trimmed and an
    escape in it is not one, as kube's split takes the first operator it meets."""
    requirements: list[FieldRequirement] = []
    for term in sorted(_split_unescaped(text, ",")):
        if not term:
            continue
        found = next(
            ((i, op) for i in range(len(term)) for op in ("!=", "==", "=") if term.startswith(op, i)), None
        )
        if found is None:
            return ()
        at, op = found
        try:
            value = _unescape_field_value(term[at + len(op) :], text)
        except SelectorError:
            return ()
        field_path = term[:at]
        if field_path or value:  # kube's transform drops a term that is empty on both sides
            requirements.append((field_path, "!=" if op == "!=" else "=", value))
    return tuple(requirements)


def exact_name(requirements: Sequence[FieldRequirement]) -> str:
    """The name a list or watch asks for with `metadata.name=<name>`, which kube's request info takes as
    the request's name (when it is a valid path segment), so that authorizers can judge one object."""
    for path, op, value in requirements:
        if path == "metadata.name" and op == "=":
            return value if value not in (".", "..") and not any(c in value for c in "/%") else ""
    return ""


def _find_operator(term: str) -> tuple[int, str] | None:
    """Where the first unescaped operator of a field-selector term sits, and which it is."""
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        for candidate in ("!=", "==", "="):
            if term.startswith(candidate, i):
                return i, candidate
        i += 1
    return None


def field_selector_exact_match(selector: FieldSelector | None, field_path: str) -> str | None:
    """The value a selector pins `field_path` to with `=`/`==`, or None; for index lookups."""
    if selector is None:
        return None
    for path, op, value in selector.requirements:
        if path == field_path and op in ("=", "=="):
            return value
    return None


# The field labels each kind's registry accepts in a field selector (kube answers 400 for others).
_COMMON_FIELD_LABELS = frozenset({"metadata.name", "metadata.namespace"})
FIELD_LABELS: dict[str, frozenset[str]] = {
    "Pod": _COMMON_FIELD_LABELS
    | {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    },
    "Node": _COMMON_FIELD_LABELS | {"spec.unschedulable"},
    "Namespace": _COMMON_FIELD_LABELS | {"status.phase"},
    "Secret": _COMMON_FIELD_LABELS | {"type"},
    "CertificateSigningRequest": _COMMON_FIELD_LABELS | {"spec.signerName"},
    "Event": _COMMON_FIELD_LABELS
    | {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    },
}


def check_field_selector(kind: str, selector: FieldSelector) -> None:
    """Refuse field labels the kind does not index, as kube does: `field label not supported: spec.foo`."""
    allowed = FIELD_LABELS.get(kind, _COMMON_FIELD_LABELS)
    for path, _, _ in selector.requirements:
        if path not in allowed:
            raise SelectorError(f"field label not supported: {path}")


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """A `metav1.LabelSelector` object as kubectl and the Scale subresource write it: `a=b,c in (d,e)`."""
    if not selector:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op in ("In", "NotIn"):
            parts.append(f"{key} {op.lower()} ({','.join(sorted(values))})")
        else:
            parts.append(key if op == "Exists" else f"!{key}")
    return ",".join(parts) or "<none>"
