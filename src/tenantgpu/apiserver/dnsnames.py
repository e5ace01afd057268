"""The syntax of kube's names (apimachinery's IsDNS1123Label and friends): why a value is not one."""

from __future__ import annotations

import re

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def _errors(value: str, limit: int, pattern: re.Pattern[str], message: str) -> list[str]:
    errors = []
    if len(value) > limit:
        errors.append(f"must be no more than {limit} characters")
    if not pattern.match(value):
        errors.append(message)
    return errors


def dns_label_errors(value: str) -> list[str]:
    """IsDNS1123Label: container, port, volume and namespace names. A value that would be a subdomain
    (within the length checked already) fails for its dots alone, and kube says just that."""
    errors = _errors(value, 63, _DNS1123_LABEL, _LABEL_MSG)
    if errors and errors[-1] == _LABEL_MSG and _DNS1123_SUBDOMAIN.match(value):
        errors[-1] = "must not contain dots"
    return errors


def dns_subdomain_errors(value: str) -> list[str]:
    """IsDNS1123Subdomain: most objects' names, and the Secrets and ConfigMaps a pod refers to."""
    return _errors(value, 253, _DNS1123_SUBDOMAIN, _SUBDOMAIN_MSG)


def dns1035_label_errors(value: str) -> list[str]:
    """apimachinery's IsDNS1035Label: why `value` is not one (the names of Services, Kamaji's tenants)."""
    return _errors(value, 63, _DNS1035_LABEL, _DNS1035_MSG)


_CONFIG_KEY_MSG = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
    "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)


def config_key_errors(value: str) -> list[str]:
    """IsConfigMapKey: a ConfigMap's or Secret's key, also as a key selector names it."""
    errors = []
    if len(value) > 253:
        errors.append("must be no more than 253 characters")
    if not _CONFIG_KEY.match(value):
        errors.append(_CONFIG_KEY_MSG)
    if value in (".", ".."):
        errors.append(f"must not be '{value}'")
    elif value.startswith(".."):
        errors.append("must not start with '..'")
    return errors
