"""The TenantControlPlane controller over the real wire: a TCP created through the management API becomes a
working tenant API server with its own CA; sleeping, waking, deleting and restarting behave as in Kamaji."""

from __future__ import annotations

import asyncio
import base64
import copy
import re
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes
import pytest
import yaml

from tenantgpu.apiserver.kamajischemas import crd_schema
from tenantgpu.apiserver.structural import prune
from tenantgpu.kamaji import inprocess, model, units
from tenantgpu.kamaji.controller import TenantControlPlaneController
from tenantgpu.kamaji.plane import ManagementPlane
from tenantgpu.kubeclient import ApiError, KubeClient, KubeConfig
from tenantgpu.node.join import (
    DiscoveredCluster,
    DiscoveryError,
    bootstrap_client,
    create_token,
    fetch_kubelet_configuration,
)

Obj = dict[str, Any]


def _plane(root: Path) -> ManagementPlane:
    return ManagementPlane(root / "datastore.sqlite", root / "pki", root / "management.kubeconfig")


async def _wait_for(
    client: KubeClient, name: str, check: Callable[[Obj], bool], timeout: float = 10.0
) -> Obj:
    deadline = asyncio.get_running_loop().time() + timeout
    tcp: Obj = {}
    while asyncio.get_running_loop().time() < deadline:
        try:
            tcp = await client.get(model.TENANT_CONTROL_PLANES, name, "default")
        except ApiError as err:
            if err.code != 404:
                raise
            tcp = {}
        if check(tcp):
            return tcp
        await asyncio.sleep(0.01)
    raise AssertionError(f"TCP {name} never matched; last seen status: {tcp.get('status')}")


def _state(expected: str) -> Callable[[Obj], bool]:
    return lambda tcp: bool(tcp) and model.version_status(tcp) == expected


async def _create(plane: ManagementPlane, name: str, **kw: Any) -> Obj:
    await plane.client.create(
        model.TENANT_CONTROL_PLANES, model.tenant_control_plane(name, version="v1.31.4", **kw)
    )
    return await _wait_for(plane.client, name, _state("Ready"))


async def _admin_kubeconfig(plane: ManagementPlane, name: str) -> str:
    secret = await plane.client.get(model.SECRETS, f"{name}-admin-kubeconfig", "default")
    return base64.b64decode(secret["data"]["admin.conf"]).decode()


def _official_client(kubeconfig_text: str) -> kubernetes.client.CoreV1Api:
    with tempfile.NamedTemporaryFile("w", suffix=".kubeconfig", delete=False) as fh:
        fh.write(kubeconfig_text)
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=fh.name, client_configuration=config)
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))


def _tenant_client(kubeconfig_text: str) -> KubeClient:
    doc = yaml.safe_load(kubeconfig_text)
    cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
    return KubeClient(
        KubeConfig(
            server=cluster["server"],
            ca_data=base64.b64decode(cluster["certificate-authority-data"]),
            client_cert_data=base64.b64decode(user["client-certificate-data"]),
            client_key_data=base64.b64decode(user["client-key-data"]),
        )
    )


async def test_tcp_becomes_ready_with_kamaji_status_and_secrets(plane: ManagementPlane) -> None:
    tcp = await _create(plane, "tenant-a")
    status = tcp["status"]
    assert status["kubernetesResources"]["version"] == {"status": "Ready", "version": "v1.31.4"}
    assert status["kubeconfig"]["admin"]["secretName"] == "tenant-a-admin-kubeconfig"
    assert status["storage"]["dataStoreName"] == "default"
    assert status["storage"]["driver"] == "sqlite"
    assert status["controlPlaneEndpoint"].startswith("127.0.0.1:")
    assert status["certificates"]["ca"]["secretName"] == "tenant-a-ca"
    assert model.FINALIZER in tcp["metadata"]["finalizers"]
    secrets = await plane.client.list(model.SECRETS, "default")
    names = {s["metadata"]["name"] for s in secrets["items"]}
    assert {
        "tenant-a-ca",
        "tenant-a-api-server-certificate",
        "tenant-a-api-server-kubelet-client-certificate",
        "tenant-a-sa-certificate",
        "tenant-a-admin-kubeconfig",
        "tenant-a-datastore-config",
    } <= names
    kubelet_client = status["certificates"]["apiServerKubeletClient"]
    assert kubelet_client["secretName"] == "tenant-a-api-server-kubelet-client-certificate"
    config = next(s for s in secrets["items"] if s["metadata"]["name"] == "tenant-a-datastore-config")
    assert base64.b64decode(config["data"]["DB_SCHEMA"]).decode() == status["storage"]["setup"]["schema"]
    assert status["storage"]["config"]["secretName"] == "tenant-a-datastore-config"


async def test_admin_kubeconfig_works_with_the_official_client(plane: ManagementPlane) -> None:
    tcp = await _create(plane, "tenant-a")
    text = await _admin_kubeconfig(plane, "tenant-a")
    assert (
        yaml.safe_load(text)["clusters"][0]["cluster"]["server"]
        == f"https://{tcp['status']['controlPlaneEndpoint']}"
    )
    api = _official_client(text)
    namespaces = await asyncio.to_thread(api.list_namespace)
    assert "kube-system" in {ns.metadata.name for ns in namespaces.items}


async def test_the_tenants_service_range_is_the_tcps_service_cidr(plane: ManagementPlane) -> None:
    body = model.tenant_control_plane("tenant-net", version="v1.31.4")
    body["spec"]["networkProfile"] = {"serviceCidr": "10.112.0.0/16"}
    await plane.client.create(model.TENANT_CONTROL_PLANES, body)
    await _wait_for(plane.client, "tenant-net", _state("Ready"))
    await _create(plane, "tenant-plain")
    for name, first_ip in (("tenant-net", "10.112.0.1"), ("tenant-plain", "10.96.0.1")):
        tenant = _tenant_client(await _admin_kubeconfig(plane, name))
        try:
            service = await tenant.get("services", "kubernetes", "default")
            assert service["spec"]["clusterIP"] == first_ip
        finally:
            await tenant.close()


async def test_tenants_do_not_trust_each_other(plane: ManagementPlane) -> None:
    await _create(plane, "tenant-a")
    await _create(plane, "tenant-b")
    a = yaml.safe_load(await _admin_kubeconfig(plane, "tenant-a"))
    b = yaml.safe_load(await _admin_kubeconfig(plane, "tenant-b"))
    assert (
        a["clusters"][0]["cluster"]["certificate-authority-data"]
        != b["clusters"][0]["cluster"]["certificate-authority-data"]
    )
    # tenant-a's admin credentials presented to tenant-b's endpoint: never a way in.
    a["clusters"][0]["cluster"] = b["clusters"][0]["cluster"]
    async with _tenant_client(yaml.safe_dump(a)) as client:
        with pytest.raises((ApiError, ssl.SSLError, OSError, aiohttp.ClientError)) as caught:
            await client.list("namespaces")
    if isinstance(caught.value, ApiError):
        assert caught.value.code in (401, 403)


async def test_sleeping_stops_the_server_and_waking_keeps_data(plane: ManagementPlane) -> None:
    tcp = await _create(plane, "tenant-s")
    endpoint = tcp["status"]["controlPlaneEndpoint"]
    text = await _admin_kubeconfig(plane, "tenant-s")
    async with _tenant_client(text) as client:
        await client.create("namespaces", {"metadata": {"name": "team-x"}})
    patch = {"spec": {"controlPlane": {"deployment": {"replicas": 0}}}}
    await plane.client.patch(model.TENANT_CONTROL_PLANES, "tenant-s", patch, "default")
    slept = await _wait_for(plane.client, "tenant-s", _state("Sleeping"))
    assert slept["status"]["controlPlaneEndpoint"] == endpoint
    # Kamaji scales the Deployment to zero and keeps the Service (found by probing: it vanished)
    assert (
        slept["status"]["kubernetesResources"]["service"] == tcp["status"]["kubernetesResources"]["service"]
    )
    host, port = endpoint.split(":")
    with pytest.raises(OSError):
        await asyncio.open_connection(host, int(port))
    patch = {"spec": {"controlPlane": {"deployment": {"replicas": 1}}}}
    await plane.client.patch(model.TENANT_CONTROL_PLANES, "tenant-s", patch, "default")
    woke = await _wait_for(plane.client, "tenant-s", _state("Ready"))
    assert woke["status"]["controlPlaneEndpoint"] == endpoint
    async with _tenant_client(text) as client:
        assert (await client.get("namespaces", "team-x"))["metadata"]["name"] == "team-x"


async def test_deleting_a_tcp_stops_it_and_removes_secrets_and_data(plane: ManagementPlane) -> None:
    tcp = await _create(plane, "tenant-d")
    schema = tcp["status"]["storage"]["setup"]["schema"]
    assert plane.datastore is not None
    assert await plane.datastore.range(f"/{schema}/")
    await plane.client.delete(model.TENANT_CONTROL_PLANES, "tenant-d", "default")
    await _wait_for(plane.client, "tenant-d", lambda t: not t)
    secrets = await plane.client.list(model.SECRETS, "default")
    assert not [s for s in secrets["items"] if s["metadata"]["name"].startswith("tenant-d-")]
    assert await plane.datastore.range(f"/{schema}/") == []
    host, port = tcp["status"]["controlPlaneEndpoint"].split(":")
    with pytest.raises(OSError):
        await asyncio.open_connection(host, int(port))


async def test_a_tenant_on_a_missing_datastore_is_refused_by_kamaji_s_webhook(plane: ManagementPlane) -> None:
    manifest = model.tenant_control_plane("tenant-x", version="v1.31.4", datastore="nowhere")
    with pytest.raises(ApiError) as refused:
        await plane.client.create(model.TENANT_CONTROL_PLANES, manifest)
    assert (refused.value.code, refused.value.reason) == (403, "Forbidden")
    assert refused.value.message == (
        'admission webhook "vtenantcontrolplane.kb.io" denied the request: nowhere DataStore does not exist'
    )
    with pytest.raises(ApiError) as missing:
        await plane.client.get(model.TENANT_CONTROL_PLANES, "tenant-x", "default")
    assert missing.value.code == 404


async def test_a_datastore_in_use_cannot_be_deleted_and_its_driver_cannot_change(
    plane: ManagementPlane,
) -> None:
    """Kamaji's `vdatastore.kb.io` (internal/webhook/handlers/ds_validate.go). Found by probing: deleting
    the DataStore in use left every tenant NotReady after the next start."""
    await _create(plane, "tenant-a")
    with pytest.raises(ApiError) as refused:
        await plane.client.delete(model.DATASTORES, "default")
    assert (refused.value.code, refused.value.message) == (
        403,
        'admission webhook "vdatastore.kb.io" denied the request: the DataStore is used by multiple'
        " TenantControlPlanes and cannot be removed",
    )
    with pytest.raises(ApiError) as changed:
        await plane.client.patch(
            model.DATASTORES,
            "default",
            # a change the schema accepts, so that the webhook is what refuses it
            {
                "spec": {
                    "driver": "MySQL",
                    "basicAuth": {"username": {"content": "dQ=="}, "password": {"content": "cA=="}},
                }
            },
            patch_type="merge",
        )
    assert changed.value.message == (
        'admission webhook "vdatastore.kb.io" denied the request: driver of a DataStore cannot be changed'
    )
    # an unused one goes
    await plane.client.create(model.DATASTORES, model.datastore("spare"))
    await plane.client.delete(model.DATASTORES, "spare")


async def test_a_tenant_waiting_for_its_datastore_is_reconciled_when_it_appears(
    plane: ManagementPlane,
) -> None:
    """Found by probing: a TCP whose DataStore had gone stayed NotReady after the DataStore came back,
    until something else touched the TCP. Kamaji's controller watches DataStores for their TCPs."""
    await plane.client.create(model.DATASTORES, model.datastore("second"))
    await _create(plane, "tenant-w", datastore="second")
    # the webhook keeps an in-use DataStore; remove it underneath, as a lost or edited state would
    assert plane.server is not None
    kind = plane.server.kinds.resource(model.GROUP, model.VERSION, "datastores")
    assert kind is not None
    registry = plane.server.registry
    registry.admission.plugins = [p for p in registry.admission.plugins if p.name != "vdatastore.kb.io"]
    await plane.client.delete(model.DATASTORES, "second")
    assert plane.controller is not None
    plane.controller.requeue("default/tenant-w")
    await _wait_for(plane.client, "tenant-w", _state("NotReady"))
    await plane.client.create(model.DATASTORES, model.datastore("second"))
    ready = await _wait_for(plane.client, "tenant-w", _state("Ready"))
    assert ready["status"]["storage"]["dataStoreName"] == "second"


async def test_restarted_plane_serves_the_same_tenant_identity_and_data(tmp_path: Path) -> None:
    first = _plane(tmp_path)
    await first.start()
    try:
        await first.client.create(model.DATASTORES, model.datastore())
        tcp = await _create(first, "tenant-r")
        text = await _admin_kubeconfig(first, "tenant-r")
        async with _tenant_client(text) as client:
            await client.create("namespaces", {"metadata": {"name": "kept"}})
    finally:
        await first.stop()
    second = _plane(tmp_path)
    await second.start()
    try:
        assert second.controller is not None
        await asyncio.wait_for(second.controller.wait_synced(), 10)
        again = await _wait_for(second.client, "tenant-r", _state("Ready"))
        assert again["status"]["controlPlaneEndpoint"] == tcp["status"]["controlPlaneEndpoint"]
        # The kubeconfig from before the restart still works: same CA, same port, same credentials.
        async with _tenant_client(text) as client:
            assert (await client.get("namespaces", "kept"))["metadata"]["name"] == "kept"
    finally:
        await second.stop()


async def test_a_restart_waits_for_the_tenants_asked_for_while_another_keeps_failing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found in review: `tenantgpu up` waited for every TCP to reconcile once, so one TCP applied with
    kubectl that could no longer reconcile kept the whole lab from starting. The wait can name its
    tenants; the failing one is still retried and reported with its error."""
    first = _plane(tmp_path)
    await first.start()
    try:
        await first.client.create(model.DATASTORES, model.datastore())
        await _create(first, "tenant-good")
        await _create(first, "tenant-bad")
    finally:
        await first.stop()
    real = units.AdminKubeconfigUnit.ensure

    async def failing(self: units.AdminKubeconfigUnit, r: units.Reconciliation) -> None:
        if r.tcp["metadata"]["name"] == "tenant-bad":
            raise RuntimeError("the admin kubeconfig cannot be written")
        await real(self, r)

    monkeypatch.setattr(units.AdminKubeconfigUnit, "ensure", failing)
    second = _plane(tmp_path)
    await second.start()
    try:
        assert second.controller is not None
        await asyncio.wait_for(second.controller.wait_synced({"default/tenant-good"}), 10)
        assert second.controller.not_synced({"default/tenant-good"}) == {}
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(second.controller.wait_synced(), 0.5)
        assert second.controller.not_synced() == {
            "default/tenant-bad": "the admin kubeconfig cannot be written"
        }
    finally:
        await second.stop()


async def test_the_status_the_controller_writes_is_all_in_kamaji_s_schema(
    plane: ManagementPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by logging what the API server pruned: the controller wrote `status.storage.config.lastUpdate`,
    which Kamaji's DataStoreConfigStatus does not have, so every write of a Ready TCP's status lost it and
    the next reconcile wrote it again. The status as written, not as read back, must lose nothing."""
    written: list[Obj] = []
    real = TenantControlPlaneController._write_status

    async def recording(self: TenantControlPlaneController, tcp: Obj, status: Obj) -> None:
        written.append(copy.deepcopy(status))
        await real(self, tcp, status)

    monkeypatch.setattr(TenantControlPlaneController, "_write_status", recording)
    await _create(plane, "tenant-s")
    schema = crd_schema("kamaji.clastix.io", "v1alpha1", "TenantControlPlane")
    assert schema is not None and written
    for status in written:
        assert prune(schema, {"status": copy.deepcopy(status)}) == []
    assert "lastUpdate" not in written[-1]["storage"]["config"]
    assert written[-1]["certificates"]["ca"]["lastUpdate"]


async def test_datastore_reports_ready_and_who_uses_it(plane: ManagementPlane) -> None:
    await _create(plane, "tenant-a")
    await _create(plane, "tenant-b")
    deadline = asyncio.get_running_loop().time() + 10
    store: Obj = {}
    while asyncio.get_running_loop().time() < deadline:
        store = await plane.client.get(model.DATASTORES, "default")
        if (store.get("status") or {}).get("usedBy") == ["default/tenant-a", "default/tenant-b"]:
            break
        await asyncio.sleep(0.02)
    assert store["status"]["usedBy"] == ["default/tenant-a", "default/tenant-b"]
    assert store["status"]["ready"] is True


async def test_a_controller_manager_that_fails_to_start_is_started_again(
    plane: ManagementPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the kubelet restarts a crashed container of Kamaji's control-plane pod: a tenant whose
    kube-controller-manager duties failed to start gets them after a retry, not never."""
    real = inprocess._start_services
    attempts: list[str] = []

    async def flaky(instance: Any, server: Any) -> Any:
        attempts.append(instance.name)
        if len(attempts) == 1:
            raise RuntimeError("the first start fails")
        return await real(instance, server)

    monkeypatch.setattr(inprocess, "_start_services", flaky)
    monkeypatch.setattr(inprocess, "SERVICES_RESTART_SECONDS", 0.05)
    await _create(plane, "tenant-f")
    async with _tenant_client(await _admin_kubeconfig(plane, "tenant-f")) as tenant:
        # the root CA publisher, one of the controller-manager's duties, has run
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            try:
                published = await tenant.get("configmaps", "kube-root-ca.crt", "default")
                break
            except ApiError as err:
                assert err.code == 404
                assert asyncio.get_running_loop().time() < deadline, "the controller-manager never started"
                await asyncio.sleep(0.05)
        # the duties reach their API server over its loopback listener, and still publish the tenant's CA
        assert published["data"]["ca.crt"].encode().strip() == (tenant.config.ca_data or b"").strip()
    assert attempts == ["tenant-f", "tenant-f"]


class _Refusing:
    """A unit whose every reconciliation fails, as one of a TCP stored in a shape the API now refuses."""

    name = "refusing"

    async def ensure(self, r: Any) -> None:
        raise RuntimeError("refused by the test")

    async def clean_up(self, r: Any) -> None:
        return None


async def test_a_tcp_that_never_reconciles_is_named_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by probing: one such TCP made `tenantgpu up` fail with a bare `TimeoutError()`; the lab
    now says which TCP it waited for and why (`LabError` in the supervisor)."""
    first = _plane(tmp_path)
    await first.start()
    try:
        await first.client.create(model.DATASTORES, model.datastore())
        await _create(first, "tenant-r")
    finally:
        await first.stop()
    from tenantgpu.kamaji import controller as controller_module

    monkeypatch.setattr(controller_module, "default_units", lambda: [_Refusing()])
    second = _plane(tmp_path)
    await second.start()
    try:
        assert second.controller is not None
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(second.controller.wait_synced(), 0.5)
        assert second.controller.not_synced() == {"default/tenant-r": "refused by the test"}
    finally:
        await second.stop()


async def test_kamajis_kubeadm_phases_let_a_joining_node_read_its_configuration(
    plane: ManagementPlane,
) -> None:
    """Kamaji's upload-config phases: `kubeadm join` reads kube-system/kubeadm-config and kubelet-config
    with nothing but its bootstrap token (kubeadm's roles for the bootstrappers' group), and the kubelet
    configuration carries the TCP's network profile and JSON patches."""
    body = model.tenant_control_plane("tenant-k", version="v1.33.0")
    body["spec"]["networkProfile"] = {"serviceCidr": "10.112.0.0/16", "certSANs": ["k.example.com"]}
    body["spec"]["kubernetes"]["kubelet"] = {
        "cgroupfs": "systemd",
        "configurationJSONPatches": [{"op": "replace", "path": "/maxPods", "value": 50}],
    }
    await plane.client.create(model.TENANT_CONTROL_PLANES, body)
    tcp = await _wait_for(plane.client, "tenant-k", _state("Ready"))
    text = await _admin_kubeconfig(plane, "tenant-k")
    cluster = yaml.safe_load(text)["clusters"][0]["cluster"]
    discovered = DiscoveredCluster(cluster["server"], base64.b64decode(cluster["certificate-authority-data"]))
    async with _tenant_client(text) as admin:
        token = await create_token(admin)
        # the soot manager's phases run once the tenant API server is up, a moment after Ready; kubeadm's
        # admins' binding is their last object
        for _ in range(500):
            try:
                admins = await admin.get("clusterrolebindings", "kubeadm:cluster-admins")
                break
            except ApiError as err:
                if err.code != 404:
                    raise
                await asyncio.sleep(0.02)
        kubeadm = await admin.get("configmaps", "kubeadm-config", "kube-system")
    assert admins["roleRef"]["name"] == "cluster-admin"
    config = yaml.safe_load(kubeadm["data"]["ClusterConfiguration"])
    assert config["controlPlaneEndpoint"] == tcp["status"]["controlPlaneEndpoint"]
    assert config["apiServer"]["certSANs"][-1] == "k.example.com"
    assert config["networking"]["serviceSubnet"] == "10.112.0.0/16"
    bootstrap = bootstrap_client(discovered, token)
    try:
        kubelet = yaml.safe_load(await fetch_kubelet_configuration(bootstrap))
    finally:
        await bootstrap.close()
    assert (kubelet["maxPods"], kubelet["cgroupDriver"], kubelet["clusterDNS"]) == (
        50,
        "systemd",
        ["10.112.0.10"],
    )
    # without the token's group nobody may read them: kubeadm's words for the failure
    anonymous = KubeClient(KubeConfig(server=cluster["server"], ca_data=discovered.ca_pem))
    try:
        with pytest.raises(
            DiscoveryError,
            match='unable to fetch the kubeadm-config ConfigMap: failed to get config map: configmaps "kubeadm-config" is forbidden',
        ):
            await fetch_kubelet_configuration(anonymous)
    finally:
        await anonymous.close()


async def test_a_changed_tcp_writes_the_tenants_kubelet_configuration_again(plane: ManagementPlane) -> None:
    """Kamaji's soot manager runs its kubeadm phases again when the TCP changes: new kubelet patches reach
    kube-system/kubelet-config of the running tenant, without a restart."""
    await _create(plane, "tenant-p")

    async def kubelet_config(client: KubeClient, check: Callable[[Obj], bool]) -> Obj:
        for _ in range(500):
            try:
                found = await client.get("configmaps", "kubelet-config", "kube-system")
            except ApiError as err:
                if err.code != 404:
                    raise
            else:
                document = yaml.safe_load(found["data"]["kubelet"])
                if check(document):
                    return document
            await asyncio.sleep(0.02)
        raise AssertionError("kubelet-config never matched")

    async with _tenant_client(await _admin_kubeconfig(plane, "tenant-p")) as tenant:
        await kubelet_config(tenant, lambda d: d["maxPods"] == 110)
        await plane.client.patch(
            model.TENANT_CONTROL_PLANES,
            "tenant-p",
            {"spec": {"kubernetes": {"kubelet": {"configurationJSONPatches": [
                {"op": "replace", "path": "/maxPods", "value": 64}
            ]}}}},
            "default",
        )  # fmt: skip
        document = await kubelet_config(tenant, lambda d: d["maxPods"] == 64)
        assert document["kind"] == "KubeletConfiguration"
        kubeadm = await tenant.get("configmaps", "kubeadm-config", "kube-system")
        assert set(kubeadm["data"]) == {"ClusterConfiguration"}


async def _secret(plane: ManagementPlane, name: str) -> Obj:
    return await plane.client.get(model.SECRETS, name, "default")


async def _served_certificate(endpoint: str) -> bytes:
    host, port = endpoint.rsplit(":", 1)
    return (await asyncio.to_thread(ssl.get_server_certificate, (host, int(port)))).encode()


async def test_a_certificate_secret_annotated_for_rotation_is_renewed_as_kamaji_does(
    plane: ManagementPlane,
) -> None:
    """Kamaji's certificate lifecycle: its certificate Secrets carry the label
    `kamaji.clastix.io/certificate_lifecycle_controller` (`x509`, or `kubeconfig` for a kubeconfig's client
    certificate); `certs.kamaji.clastix.io/rotate: ""` renews one, writes the renewal's time into that
    annotation, and rolls the control plane onto it."""
    tcp = await _create(plane, "tenant-a")
    labelled = await plane.client.list(model.SECRETS, "default", label_selector=model.LIFECYCLE_LABEL)
    assert {
        s["metadata"]["name"]: s["metadata"]["labels"][model.LIFECYCLE_LABEL] for s in labelled["items"]
    } == {
        "tenant-a-api-server-certificate": "x509",
        "tenant-a-api-server-kubelet-client-certificate": "x509",
        "tenant-a-admin-kubeconfig": "kubeconfig",
    }
    endpoint = tcp["status"]["controlPlaneEndpoint"]
    before = await _secret(plane, "tenant-a-api-server-certificate")
    served = base64.b64decode(before["data"]["apiserver.crt"])
    assert _same_certificate(await _served_certificate(endpoint), served)
    ca = await _secret(plane, "tenant-a-ca")
    authority = units.pki.KeyPair(
        base64.b64decode(ca["data"]["ca.crt"]), base64.b64decode(ca["data"]["ca.key"])
    )

    await plane.client.patch(
        model.SECRETS,
        "tenant-a-api-server-certificate",
        {"metadata": {"annotations": {model.ROTATE_ANNOTATION: ""}}},
        "default",
    )
    renewed = await _wait_secret(plane, "tenant-a-api-server-certificate", _rotated)
    cert = base64.b64decode(renewed["data"]["apiserver.crt"])
    assert cert != served and units.pki.is_signed_by(cert, authority)
    tcp = await _wait_for(
        plane.client,
        "tenant-a",
        lambda t: t["status"]["certificates"]["apiServer"]["checksum"] == model.checksum(renewed["data"]),
    )
    assert tcp["status"]["controlPlaneEndpoint"] == endpoint  # the same endpoint, the new certificate
    await _until(lambda: _served_matches(endpoint, cert))

    old_admin = await _admin_kubeconfig(plane, "tenant-a")
    await plane.client.patch(
        model.SECRETS,
        "tenant-a-admin-kubeconfig",
        {"metadata": {"annotations": {model.ROTATE_ANNOTATION: ""}}},
        "default",
    )
    await _wait_secret(plane, "tenant-a-admin-kubeconfig", _rotated)
    new_admin = await _admin_kubeconfig(plane, "tenant-a")
    assert new_admin != old_admin
    api = _official_client(new_admin)
    assert "kube-system" in {ns.metadata.name for ns in (await asyncio.to_thread(api.list_namespace)).items}

    # A Secret kept from before the label (an older lab's) gets it at its tenant's next reconciliation.
    await plane.client.patch(
        model.SECRETS,
        "tenant-a-api-server-kubelet-client-certificate",
        {"metadata": {"labels": {model.LIFECYCLE_LABEL: None}}},
        "default",
    )
    await plane.client.patch(
        model.TENANT_CONTROL_PLANES, "tenant-a", {"metadata": {"labels": {"touched": "yes"}}}, "default"
    )
    relabelled = await _wait_secret(
        plane,
        "tenant-a-api-server-kubelet-client-certificate",
        lambda s: s["metadata"].get("labels", {}).get(model.LIFECYCLE_LABEL) == "x509",
    )
    assert model.ROTATE_ANNOTATION not in relabelled["metadata"].get("annotations", {})


def _rotated(secret: Obj) -> bool:
    value = (secret["metadata"].get("annotations") or {}).get(model.ROTATE_ANNOTATION, "")
    return bool(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", value))


async def _wait_secret(plane: ManagementPlane, name: str, check: Callable[[Obj], bool]) -> Obj:
    secret: Obj = {}
    for _ in range(1000):
        secret = await _secret(plane, name)
        if check(secret):
            return secret
        await asyncio.sleep(0.01)
    raise AssertionError(f"Secret {name} never matched: {secret.get('metadata')}")


def _same_certificate(pem_a: bytes, pem_b: bytes) -> bool:
    return ssl.PEM_cert_to_DER_cert(pem_a.decode()) == ssl.PEM_cert_to_DER_cert(pem_b.decode())


async def _served_matches(endpoint: str, cert: bytes) -> bool:
    try:
        return _same_certificate(await _served_certificate(endpoint), cert)
    except OSError:
        return False  # the control plane is rolling onto the new certificate


async def _until(check: Callable[[], Any], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("never happened")
        await asyncio.sleep(0.02)
