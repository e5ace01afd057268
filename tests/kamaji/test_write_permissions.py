"""Kamaji's write permissions: `spec.writePermissions` makes a TCP `WriteLimited` and its tenant refuses the
blocked writes through Kamaji's webhook; lifting them gives the tenant its writes back.

Facts from clastix/kamaji, recorded in `kamaji/writepermissions.py`'s docstring: the API's fields are
`blockCreation`, `blockUpdate`, `blockDeletion`; the ValidatingWebhookConfiguration is
`kamaji-write-permissions` with `leases.` and `catchall.write-permissions.kamaji.clastix.io`; a refusal is
controller-runtime's Denied (403 Forbidden) with Kamaji's sentence. kube never sends a webhook the writes
of webhook configurations themselves (rules.IsExemptAdmissionConfigurationResource), so the
configuration can always be removed.
"""

from __future__ import annotations

import asyncio
import json

import kubernetes
import pytest

from kamaji_wire import admin_api, eventually, found, patch_tcp, tcp_matching
from tenantgpu.kamaji import model
from tenantgpu.kamaji.plane import ManagementPlane
from tenantgpu.kamaji.writepermissions import (
    CATCHALL_WEBHOOK,
    DENIAL,
    LEASES_WEBHOOK,
    blocks_of,
    configuration_webhooks,
    review_response,
)

REFUSED = f'admission webhook "{CATCHALL_WEBHOOK}" denied the request: {DENIAL}'


def test_the_blocks_and_the_webhooks_kamaji_writes() -> None:
    tcp = model.tenant_control_plane("t", version="v1.33.1")
    assert blocks_of(tcp) == (False, False, False)
    # the guide's `blockCreate`/`blockDelete` are not the API's names and block nothing
    tcp["spec"]["writePermissions"] = {"blockCreate": True, "blockUpdate": True, "blockDeletion": False}
    assert blocks_of(tcp) == (False, True, False)
    assert model.kubeadm_parameters(tcp, None).write_permissions == (False, True, False)

    leases, catchall = configuration_webhooks((True, False, True), b"CA")
    assert leases["name"] == LEASES_WEBHOOK and catchall["name"] == CATCHALL_WEBHOOK
    assert (
        leases["rules"][0]["operations"] == ["CREATE", "DELETE"]
        and leases["rules"][0]["scope"] == "Namespaced"
    )
    assert leases["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-node-lease"]
    assert catchall["rules"][0] == {
        "operations": ["CREATE", "DELETE"],
        "apiGroups": ["*"],
        "apiVersions": ["*"],
        "resources": ["*"],
        "scope": "*",
    }
    assert catchall["namespaceSelector"]["matchExpressions"][0] == {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", "kube-node-lease"],
    }
    assert (
        catchall["clientConfig"]["url"]
        == "https://kamaji-webhook-service.kamaji-system.svc:443/write-permission"
    )
    assert (catchall["failurePolicy"], catchall["sideEffects"]) == ("Fail", "NoneOnDryRun")

    denied = review_response(
        {"apiVersion": "admission.k8s.io/v1", "request": {"uid": "u", "operation": "DELETE"}}
    )
    assert denied["response"] == {
        "uid": "u",
        "allowed": False,
        "status": {"code": 403, "reason": "Forbidden", "message": DENIAL},
    }
    assert review_response({"request": {"uid": "c", "operation": "CONNECT"}})["response"]["allowed"] is True


def test_a_limited_tcp_is_write_limited_unless_asleep_or_failed() -> None:
    status = model.derive_version_status
    assert status(replicas=1, running=True, ready=True, failed=False, write_limited=True) == "WriteLimited"
    assert status(replicas=1, running=False, ready=False, failed=False, write_limited=True) == "WriteLimited"
    assert status(replicas=1, running=True, ready=True, failed=True, write_limited=True) == "NotReady"
    assert status(replicas=0, running=False, ready=False, failed=False, write_limited=True) == "Sleeping"


async def test_a_write_limited_tenant_refuses_what_its_tcp_blocks_and_gets_it_back(
    plane: ManagementPlane,
) -> None:
    await plane.client.create(
        model.TENANT_CONTROL_PLANES, model.tenant_control_plane("tenant-a", version="v1.33.1")
    )
    await tcp_matching(plane, lambda t: model.version_status(t) == "Ready")
    api = await admin_api(plane)
    core = kubernetes.client.CoreV1Api(api)
    admission = kubernetes.client.AdmissionregistrationV1Api(api)

    def config_map(name: str) -> kubernetes.client.V1ConfigMap:
        return kubernetes.client.V1ConfigMap(
            metadata=kubernetes.client.V1ObjectMeta(name=name), data={"k": "v"}
        )

    await asyncio.to_thread(core.create_namespaced_config_map, "default", config_map("before"))
    await patch_tcp(plane, {"spec": {"writePermissions": {"blockCreation": True, "blockDeletion": True}}})
    limited = await tcp_matching(plane, lambda t: model.version_status(t) == "WriteLimited")
    assert limited["status"]["kubernetesResources"]["version"].get("version") == "v1.33.1"

    configuration = await eventually(
        lambda: found(lambda: admission.read_validating_webhook_configuration("kamaji-write-permissions")),
        "the write permissions' webhook configuration",
    )
    assert [w.name for w in configuration.webhooks] == [LEASES_WEBHOOK, CATCHALL_WEBHOOK]

    # a create in a user's namespace: Kamaji's webhook refuses it, as kubectl shows it
    with pytest.raises(kubernetes.client.ApiException) as refused:
        await asyncio.to_thread(core.create_namespaced_config_map, "default", config_map("after"))
    assert refused.value.status == 403, refused.value.body
    body = json.loads(refused.value.body)
    assert (body["reason"], body["message"]) == ("Forbidden", REFUSED)
    with pytest.raises(kubernetes.client.ApiException) as refused:
        await asyncio.to_thread(core.delete_namespaced_config_map, "before", "default")
    assert json.loads(refused.value.body)["message"] == REFUSED
    # updates are not blocked; kube-system is not the catch-all's
    await asyncio.to_thread(core.patch_namespaced_config_map, "before", "default", {"data": {"k": "w"}})
    await asyncio.to_thread(core.create_namespaced_config_map, "kube-system", config_map("system"))

    # the configuration deleted by hand comes back (webhook configurations are never sent to webhooks)
    await asyncio.to_thread(admission.delete_validating_webhook_configuration, "kamaji-write-permissions")
    await eventually(
        lambda: found(lambda: admission.read_validating_webhook_configuration("kamaji-write-permissions")),
        "the configuration written back",
    )

    # limits lifted: Ready again, the configuration gone, creates go through
    await patch_tcp(plane, [{"op": "remove", "path": "/spec/writePermissions"}], patch_type="json")
    await tcp_matching(plane, lambda t: model.version_status(t) == "Ready")
    await eventually(
        lambda: (
            found(lambda: admission.read_validating_webhook_configuration("kamaji-write-permissions")) is None
        ),
        "the configuration removed",
    )
    await asyncio.to_thread(core.create_namespaced_config_map, "default", config_map("after"))
