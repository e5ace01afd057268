"""A component of the lab acting as a service account (`ServiceAccountClient`), against a real API server.

The lab gives HAMi's scheduler and device plugin their chart's service accounts this way: the lab's own
client requests the tokens (TokenRequest), the component's client presents them, and a renewed token is
presented from the next request on, as client-go rereads a pod's rotated projected token.
"""

from __future__ import annotations

import asyncio

import pytest
from apiserver_harness import BackgroundLoop, RunningAPIServer

from tenantgpu.kubeclient import ApiError, KubeClient
from tenantgpu.kubeclient.serviceaccounttoken import ServiceAccountClient

pytestmark = pytest.mark.slow


async def _ready(admin: KubeClient) -> None:
    """Until /readyz passes: the default RBAC objects (basic-user's whoami) come from a post-start hook."""
    for _ in range(100):
        try:
            await admin.request("GET", "/readyz", decode=False)
            return
        except ApiError:
            await asyncio.sleep(0.05)


async def _whoami(client: KubeClient) -> str:
    review = await client.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    return str(review["status"]["userInfo"]["username"])


def test_the_component_is_the_account_and_its_renewed_token_is_used(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop
) -> None:
    async def scenario() -> tuple[str, str, list[str], str, int]:
        admin = KubeClient.from_kubeconfig(apiserver.kubeconfig)
        await _ready(admin)
        await admin.create("serviceaccounts", {"metadata": {"name": "hami-scheduler"}}, "kube-system")
        # renewed after 0.05 % of 600 s: 0.3 s
        identity = ServiceAccountClient(
            admin, "kube-system", "hami-scheduler", expiration_seconds=600, renew_fraction=0.0005
        )
        client = await identity.start()
        first = client.config.token or ""
        who = await _whoami(client)
        renewed = first
        for _ in range(50):
            await asyncio.sleep(0.1)
            renewed = client.config.token or ""
            if renewed != first:
                break
        who_after = await _whoami(client)
        try:
            await client.list("secrets", "kube-system")
            code = 200
        except ApiError as err:
            code = err.code
        await identity.close()
        await admin.close()
        return who, who_after, [first, renewed], client.config.server, code

    who, who_after, tokens, _, code = background_loop.run(scenario())
    assert who == "system:serviceaccount:kube-system:hami-scheduler"
    assert tokens[1] != tokens[0], "the token was renewed"
    assert who_after == who
    assert code == 403, "the account holds no rights the admin's certificate would have given"


def test_a_missing_account_is_the_tokenrequests_404(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop
) -> None:
    async def scenario() -> int:
        admin = KubeClient.from_kubeconfig(apiserver.kubeconfig)
        try:
            await ServiceAccountClient(admin, "kube-system", "nobody").start()
        except ApiError as err:
            return err.code
        finally:
            await admin.close()
        return 0

    assert background_loop.run(scenario()) == 404
