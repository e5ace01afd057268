"""kube-apiserver's health endpoints: `/healthz`, `/livez` and `/readyz`, each a list of named checks.

As k8s.io/apiserver's healthz package answers them: `ok` when every check passes, or with `?verbose`
one `[+]name ok` line per check and `<endpoint> check passed`; a failing check makes it a 500 that is
always verbose (`[-]name failed: reason withheld`, then `<endpoint> check failed`). `?exclude=name`
skips a check (`[+]name excluded: ok`), and `/readyz/<name>` asks one check alone. The checks are
kube's names for what this server has: `etcd` is its datastore, the post-start hooks are the
bootstrap work (`default/kubernetes`, the system PriorityClasses) that runs beside serving, and
`shutdown` fails once the server is stopping, so a load balancer stops sending it requests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Check", "HealthAnswer", "answer", "endpoint_checks"]

ENDPOINTS = ("healthz", "livez", "readyz")


@dataclass(frozen=True)
class Check:
    name: str
    passed: Callable[[], bool]
    readyz_only: bool = False
    # what `/readyz/<name>` says when it fails, as the check's error reads in kube
    failure: str = "not finished"


@dataclass(frozen=True)
class HealthAnswer:
    status: int
    text: str


def endpoint_checks(endpoint: str, checks: Sequence[Check]) -> list[Check]:
    """The checks one endpoint runs, in their order: readiness has a few that liveness has not."""
    return [c for c in checks if endpoint == "readyz" or not c.readyz_only]


def answer(
    endpoint: str, checks: Sequence[Check], rest: Sequence[str], query: Mapping[str, list[str]]
) -> HealthAnswer | None:
    """The answer to `/<endpoint>[/<check>]`; None for a check this endpoint does not have (404)."""
    own = endpoint_checks(endpoint, checks)
    if rest:
        wanted = "/".join(rest)
        for check in own:
            if check.name == wanted:
                if check.passed():
                    return HealthAnswer(200, "ok")
                return HealthAnswer(500, f"internal server error: {check.failure}\n")
        return None
    excluded = list(dict.fromkeys(query.get("exclude", [])))
    lines = []
    failed = False
    for check in own:
        if check.name in excluded:
            excluded.remove(check.name)
            lines.append(f"[+]{check.name} excluded: ok")
        elif check.passed():
            lines.append(f"[+]{check.name} ok")
        else:
            failed = True
            lines.append(f"[-]{check.name} failed: reason withheld")
    if excluded:
        names = ",".join(f'"{name}"' for name in sorted(excluded))
        lines.append(f"warn: some health checks cannot be excluded: no matches for {names}")
    report = "".join(line + "\n" for line in lines)
    if failed:
        return HealthAnswer(500, f"{report}{endpoint} check failed\n")
    if "verbose" not in query:
        return HealthAnswer(200, "ok")
    return HealthAnswer(200, f"{report}{endpoint} check passed\n")
