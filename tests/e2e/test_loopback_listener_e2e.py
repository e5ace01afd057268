"""The API server's loopback listener: the components that run in its process (the controller duties)
reach it with plain HTTP on 127.0.0.1, as kube-apiserver's own loopback client does, and only with a
token minted for them in memory; nothing else is served there, and those tokens are no good over TLS."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request

import kubernetes
from apiserver_harness import RunningAPIServer


def _status(url: str, token: str | None = None, context: ssl.SSLContext | None = None) -> int:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return err.code


def test_the_loopback_listener_serves_the_components_it_minted_tokens_for(
    apiserver: RunningAPIServer,
) -> None:
    url, token = apiserver.server.loopback("system:kube-controller-manager", ["system:masters"])
    assert url.startswith("http://127.0.0.1:")

    # The official client, pointed at it with the minted token, lists and learns who it is.
    configuration = kubernetes.client.Configuration()
    configuration.host = url
    configuration.api_key = {"authorization": f"Bearer {token}"}
    with kubernetes.client.ApiClient(configuration) as api:
        names = [n.metadata.name for n in kubernetes.client.CoreV1Api(api).list_namespace().items]
        assert "kube-system" in names
        review = kubernetes.client.AuthenticationV1Api(api).create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        )
        assert review.status.user_info.username == "system:kube-controller-manager"
        assert set(review.status.user_info.groups) == {"system:masters", "system:authenticated"}

    # Nothing else gets in: no token, a made-up one, a valid service account token of this server.
    account_token = apiserver.server.issue_service_account_token("kube-system", "default")
    for other in (None, "not-a-minted-token", account_token):
        assert _status(f"{url}/api/v1/namespaces", other) == 401
    assert _status(f"{url}/healthz") == 401

    # The minted token is no credential on the TLS port.
    context = ssl.create_default_context(cadata=apiserver.server.ca_pem.decode())
    assert _status(f"{apiserver.url}/api/v1/namespaces", token, context) == 401
