"""kube-apiserver's health endpoints as k8s.io/apiserver's healthz package answers them."""

from __future__ import annotations

from tenantgpu.apiserver.health import Check, HealthAnswer, answer

CHECKS = [
    Check("ping", lambda: True),
    Check("etcd", lambda: True),
    Check("informer-sync", lambda: True, readyz_only=True),
    Check("poststarthook/bootstrap-controller", lambda: False),
    Check("shutdown", lambda: True, readyz_only=True, failure="process is shutting down"),
]


def test_a_failing_check_is_a_500_that_is_always_verbose() -> None:
    assert answer("readyz", CHECKS, [], {}) == HealthAnswer(
        500,
        "[+]ping ok\n[+]etcd ok\n[+]informer-sync ok\n"
        "[-]poststarthook/bootstrap-controller failed: reason withheld\n[+]shutdown ok\n"
        "readyz check failed\n",
    )
    # liveness does not run the readiness-only checks
    assert answer("livez", CHECKS, [], {}).text.splitlines()[:3] == [
        "[+]ping ok",
        "[+]etcd ok",
        "[-]poststarthook/bootstrap-controller failed: reason withheld",
    ]


def test_excluded_checks_pass_and_unknown_exclusions_are_named() -> None:
    query = {"exclude": ["poststarthook/bootstrap-controller", "zeta", "alpha"]}
    assert answer("livez", CHECKS, [], query) == HealthAnswer(200, "ok")  # not verbose: passing is just ok
    verbose = answer("livez", CHECKS, [], {**query, "verbose": [""]})
    assert verbose == HealthAnswer(
        200,
        "[+]ping ok\n[+]etcd ok\n[+]poststarthook/bootstrap-controller excluded: ok\n"
        'warn: some health checks cannot be excluded: no matches for "alpha","zeta"\n'
        "livez check passed\n",
    )


def test_one_check_alone_and_a_check_the_endpoint_does_not_have() -> None:
    assert answer("readyz", CHECKS, ["etcd"], {}) == HealthAnswer(200, "ok")
    assert answer("readyz", CHECKS, ["poststarthook", "bootstrap-controller"], {}) == HealthAnswer(
        500, "internal server error: not finished\n"
    )
    stopping = [Check("shutdown", lambda: False, readyz_only=True, failure="process is shutting down")]
    assert (
        answer("readyz", stopping, ["shutdown"], {}).text
        == "internal server error: process is shutting down\n"
    )
    assert answer("livez", CHECKS, ["shutdown"], {}) is None  # readiness only: 404 on livez
    assert answer("readyz", CHECKS, ["bogus"], {}) is None
