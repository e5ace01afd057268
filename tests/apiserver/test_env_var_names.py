"""Env var names per release, as kube-apiserver validates them. Read from kubernetes/kubernetes:
- staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go: IsEnvVarName (the regex
  `[-._a-zA-Z][-._a-zA-Z0-9]*` with its examples, and hasChDirPrefix: not `.`, not `..`, not starting
  with `..`) and IsRelaxedEnvVarName (printable ASCII other than '=').
- pkg/features/kube_features.go: RelaxedEnvironmentVariableValidation alpha (off) 1.30, beta (on) 1.32,
  GA 1.34. pkg/apis/core/validation: env names and envFrom prefixes use the relaxed rule where the
  gate is on or the stored pod spec already has such a name (an update of it stays valid). An empty
  name is only `Required value`.
"""

from __future__ import annotations

from typing import Any

import pytest

from tenantgpu.apiserver.validation import validate

STRICT = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', "
    "and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex "
    "used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"
)
RELAXED = "a valid environment variable name must consist only of printable ASCII characters other than '='"


def _pod(*names: str, prefix: str | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": "busybox",
        "env": [{"name": n, "value": "1"} for n in names],
    }
    if prefix is not None:
        container["envFrom"] = [{"prefix": prefix, "configMapRef": {"name": "settings"}}]
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [container]}}


def _messages(
    obj: dict[str, Any], minor: int, kind: str = "Pod", old: dict[str, Any] | None = None
) -> list[str]:
    return [str(c) for c in validate(kind, obj, old=old, minor=minor)]


@pytest.mark.parametrize("name", ["MY VAR", "1ABC", "foo:bar", "a/b", "$HOME"])
def test_a_name_only_the_relaxed_rule_takes_is_refused_before_1_32(name: str) -> None:
    for minor in (27, 30, 31):
        assert _messages(_pod(name), minor) == [
            f'spec.containers[0].env[0].name: Invalid value: "{name}": {STRICT}'
        ]
    for minor in (32, 33, 35):
        assert _messages(_pod(name), minor) == []


def test_equals_and_non_ascii_are_refused_on_every_release() -> None:
    for name in ("A=B", "naïve", "tab\there"):
        (relaxed,) = _messages(_pod(name), 33)
        assert relaxed.startswith("spec.containers[0].env[0].name: Invalid value: ") and relaxed.endswith(
            RELAXED
        )
        (strict,) = _messages(_pod(name), 31)
        assert strict.endswith(STRICT)


def test_an_empty_name_is_only_required() -> None:
    for minor in (31, 33):
        assert _messages(_pod(""), minor) == ["spec.containers[0].env[0].name: Required value"]


def test_the_strict_rule_refuses_a_change_of_directory() -> None:
    assert _messages(_pod(".."), 31) == [
        "spec.containers[0].env[0].name: Invalid value: \"..\": must not be '..'"
    ]
    assert _messages(_pod("..X"), 31) == [
        "spec.containers[0].env[0].name: Invalid value: \"..X\": must not start with '..'"
    ]
    assert _messages(_pod(".."), 33) == []


def test_an_env_from_prefix_follows_the_same_rule() -> None:
    assert _messages(_pod(prefix="APP "), 31) == [
        f'spec.containers[0].envFrom[0].prefix: Invalid value: "APP ": {STRICT}'
    ]
    assert _messages(_pod(prefix="APP "), 32) == []
    assert _messages(_pod(prefix="APP_"), 31) == []


def _deployment(*names: str) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"app": "a"}},
        "spec": {**_pod(*names)["spec"], "restartPolicy": "Always"},
    }
    return {
        "metadata": {"name": "d", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "a"}}, "template": template,
                 "strategy": {"type": "RollingUpdate"}},
    }  # fmt: skip


def test_templates_follow_the_tenant_s_release() -> None:
    deployment = _deployment("MY VAR")
    assert _messages(deployment, 31, "Deployment") == [
        f'spec.template.spec.containers[0].env[0].name: Invalid value: "MY VAR": {STRICT}'
    ]
    assert _messages(deployment, 33, "Deployment") == []
    job_template = {"spec": {"template": {"spec": {**_pod("MY VAR")["spec"], "restartPolicy": "Never"}}}}
    cron = {
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Allow", "jobTemplate": job_template},
    }
    assert [m for m in _messages(cron, 31, "CronJob") if "env[0]" in m] == [
        f'spec.jobTemplate.spec.template.spec.containers[0].env[0].name: Invalid value: "MY VAR": {STRICT}'
    ]
    assert [m for m in _messages(cron, 33, "CronJob") if "env[0]" in m] == []


def test_an_object_that_already_uses_a_relaxed_name_stays_valid_where_the_gate_is_off() -> None:
    """Stored by a 1.33 tenant, served again as 1.31 (the same datastore, a downgrade): its updates keep
    the relaxed rule, but a new object on 1.31 does not get it."""
    stored = _deployment("MY VAR")
    updated = _deployment("MY VAR", "OTHER VAR")
    assert _messages(updated, 31, "Deployment", old=stored) == []
    assert _messages(_deployment("OTHER VAR"), 31, "Deployment") != []
    # the rule holds while the stored name is kept: one dropped for another new one is refused
    replaced = _messages(_deployment("OTHER VAR"), 31, "Deployment", old=stored)
    assert replaced == [f'spec.template.spec.containers[0].env[0].name: Invalid value: "OTHER VAR": {STRICT}']
    assert [m.split(":")[0] for m in _messages(updated, 31, "Deployment", old=_deployment("PLAIN"))] == [
        "spec.template.spec.containers[0].env[0].name",
        "spec.template.spec.containers[0].env[1].name",
    ]


def test_ephemeral_containers_follow_the_release() -> None:
    stored = _pod("PLAIN")
    debug = {"name": "debugger", "image": "busybox", "env": [{"name": "MY VAR", "value": "1"}]}
    with_debug = {**stored, "spec": {**stored["spec"], "ephemeralContainers": [debug]}}
    refused = [
        str(c) for c in validate("Pod", with_debug, old=stored, subresource="ephemeralcontainers", minor=31)
    ]
    assert refused == [f'spec.ephemeralContainers[0].env[0].name: Invalid value: "MY VAR": {STRICT}']
    assert validate("Pod", with_debug, old=stored, subresource="ephemeralcontainers", minor=33) == []


def test_a_pod_write_that_keeps_the_stored_spec_stays_valid_on_every_release() -> None:
    """A status or metadata write shares the stored spec (the registry's copy of only what changes): a
    relaxed-only name stored under 1.33 does not make such a write on 1.31 fail, and the same spec
    changed to add another such name is refused there."""
    stored = _pod("MY VAR")
    status_write = {**stored, "status": {"phase": "Running"}}  # the spec object itself, shared
    assert status_write["spec"] is stored["spec"]
    assert _messages(status_write, 31, old=stored) == []
    changed = _pod("MY VAR")
    changed["spec"]["containers"].append({"name": "second", "image": "busybox", "env": [{"name": "A B"}]})
    assert _messages(changed, 31, old=stored) != []  # a new container: the pod spec may not change
    assert _messages(_pod("A B"), 31) == [f'spec.containers[0].env[0].name: Invalid value: "A B": {STRICT}']
