"""kube's ServiceAccount admission plugin (plugin/pkg/admission/serviceaccount/admission.go, read for
the facts pinned here): the account a pod runs as, its token volume, and what an account may refuse."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tenantgpu.apiserver.admission import AdmissionAttributes
from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.errors import APIError
from tenantgpu.apiserver.kinds import NODE, POD
from tenantgpu.apiserver.serviceaccount import ServiceAccountAdmission

Obj = dict[str, Any]

# What kube-apiserver 1.22+ adds, as `kubectl get pod -o yaml` shows it on a kind cluster.
KIND_TOKEN_VOLUME = {
    "name": "kube-api-access-abcde",
    "projected": {
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
            {
                "downwardAPI": {
                    "items": [
                        {
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            "path": "namespace",
                        }
                    ]
                }
            },
        ],
    },
}
TOKEN_MOUNT = {
    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
    "name": "kube-api-access-abcde",
    "readOnly": True,
}


class Accounts:
    """Service accounts by (namespace, name); `appear_after` makes one show up on a later lookup, as the
    controller-manager creates a new namespace's `default` account a moment after the namespace."""

    def __init__(self, *accounts: Obj) -> None:
        self.stored = {(a["metadata"]["namespace"], a["metadata"]["name"]): a for a in accounts}
        self.lookups = 0
        self.appear_after: dict[tuple[str, str], tuple[int, Obj]] = {}

    def __call__(self, namespace: str, name: str) -> Obj | None:
        self.lookups += 1
        later = self.appear_after.get((namespace, name))
        if later is not None and self.lookups >= later[0]:
            self.stored[(namespace, name)] = later[1]
        return self.stored.get((namespace, name))


def account(name: str = "default", namespace: str = "default", **fields: Any) -> Obj:
    annotations = fields.pop("annotations", None)
    meta: Obj = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta, **fields}


def pod(**spec: Any) -> Obj:
    metadata = spec.pop("metadata", {"name": "p", "namespace": "default"})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }


class Plugin:
    """Both phases of the plugin over one set of accounts, with pauses recorded instead of slept."""

    def __init__(self, accounts: Accounts) -> None:
        self.pauses: list[float] = []

        async def sleep(seconds: float) -> None:
            self.pauses.append(seconds)

        def named(prefix: str) -> str:
            return prefix + "abcde"

        self.mutating = ServiceAccountAdmission(accounts, named, mutating=True, sleep=sleep)
        self.validating = ServiceAccountAdmission(accounts, named, mutating=False, sleep=sleep)

    async def create(self, obj: Obj, name: str = "p") -> Obj:
        attributes = AdmissionAttributes("CREATE", POD, "default", name, obj, None, UserInfo("u"))
        await self.mutating.admit(attributes)
        attributes.name = obj["metadata"].get("name", "")
        await self.validating.admit(attributes)
        return obj


async def refusal(plugin: Plugin, obj: Obj, name: str = "p") -> APIError:
    with pytest.raises(APIError) as caught:
        await plugin.create(obj, name)
    assert caught.value.code == 403 and caught.value.reason == "Forbidden"
    return caught.value


async def test_a_pod_runs_as_default_with_its_token_mounted_as_on_kind() -> None:
    created = await Plugin(Accounts(account())).create(pod())
    spec = created["spec"]
    assert spec["serviceAccountName"] == "default" and spec["serviceAccount"] == "default"
    assert spec["volumes"] == [KIND_TOKEN_VOLUME]
    assert spec["containers"][0]["volumeMounts"] == [TOKEN_MOUNT]
    assert "imagePullSecrets" not in spec


async def test_every_container_and_init_container_mounts_it_unless_it_mounts_that_path_itself() -> None:
    own = {"name": "mine", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    created = await Plugin(Accounts(account())).create(
        pod(
            initContainers=[{"name": "init", "image": "busybox"}],
            containers=[
                {"name": "a", "image": "busybox"},
                {"name": "b", "image": "busybox", "volumeMounts": [own]},
            ],
            ephemeralContainers=[{"name": "debug", "image": "busybox"}],
            volumes=[{"name": "mine", "emptyDir": {}}],
        )
    )
    spec = created["spec"]
    assert spec["initContainers"][0]["volumeMounts"] == [TOKEN_MOUNT]
    assert spec["containers"][0]["volumeMounts"] == [TOKEN_MOUNT]
    assert spec["containers"][1]["volumeMounts"] == [own]
    assert "volumeMounts" not in spec["ephemeralContainers"][0]
    assert [v["name"] for v in spec["volumes"]] == ["mine", "kube-api-access-abcde"]


async def test_a_pod_that_mounts_the_path_everywhere_gets_no_token_volume() -> None:
    own = {"name": "mine", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    created = await Plugin(Accounts(account())).create(
        pod(containers=[{"name": "a", "image": "busybox", "volumeMounts": [own]}], volumes=[{"name": "mine"}])
    )
    assert created["spec"]["volumes"] == [{"name": "mine"}]


async def test_an_existing_kube_api_access_volume_is_reused() -> None:
    given = {"name": "kube-api-access-mine", "projected": {"sources": []}}
    created = await Plugin(Accounts(account())).create(pod(volumes=[given]))
    assert created["spec"]["volumes"] == [given]
    assert created["spec"]["containers"][0]["volumeMounts"][0]["name"] == "kube-api-access-mine"


@pytest.mark.parametrize(
    ("pod_says", "account_says", "mounted"),
    [
        (None, None, True),
        (False, None, False),
        (None, False, False),
        (True, False, True),  # the pod's choice wins
        (False, True, False),
    ],
)
async def test_automount_the_pod_first_then_the_account_then_yes(
    pod_says: bool | None, account_says: bool | None, mounted: bool
) -> None:
    fields = {} if account_says is None else {"automountServiceAccountToken": account_says}
    spec = {} if pod_says is None else {"automountServiceAccountToken": pod_says}
    created = await Plugin(Accounts(account(**fields))).create(pod(**spec))
    assert ("volumes" in created["spec"]) is mounted
    assert ("volumeMounts" in created["spec"]["containers"][0]) is mounted


async def test_the_accounts_pull_secrets_go_to_a_pod_that_has_none() -> None:
    accounts = Accounts(account("builder", imagePullSecrets=[{"name": "registry"}]))
    created = await Plugin(accounts).create(pod(serviceAccountName="builder"))
    assert created["spec"]["imagePullSecrets"] == [{"name": "registry"}]
    own = await Plugin(accounts).create(
        pod(serviceAccountName="builder", imagePullSecrets=[{"name": "mine"}])
    )
    assert own["spec"]["imagePullSecrets"] == [{"name": "mine"}]


async def test_a_missing_account_refuses_the_pod_with_kubes_words() -> None:
    plugin = Plugin(Accounts(account()))
    refused = await refusal(plugin, pod(serviceAccountName="nope"))
    assert refused.message == (
        'pods "p" is forbidden: error looking up service account default/nope: serviceaccount "nope" not found'
    )
    assert refused.details == {"name": "p", "kind": "pods"}
    assert plugin.pauses == []  # an account other than `default` is looked up once


async def test_a_generated_pod_is_named_by_its_generate_name_in_the_refusal() -> None:
    # A ReplicaSet's pods: kube names them only after the mutating phase, so its event reads
    # `Error creating: pods "web-5d9c7b8f6-" is forbidden: ...`.
    obj = pod(serviceAccountName="nope", metadata={"generateName": "web-5d9c7b8f6-", "namespace": "default"})
    refused = await refusal(Plugin(Accounts()), obj, name="")
    assert refused.message.startswith('pods "web-5d9c7b8f6-" is forbidden: error looking up service account')


async def test_the_default_account_is_awaited_ten_times_100_to_200_ms_apart() -> None:
    accounts = Accounts()
    plugin = Plugin(accounts)
    refused = await refusal(plugin, pod())
    assert refused.message.endswith(
        'error looking up service account default/default: serviceaccount "default" not found'
    )
    assert len(plugin.pauses) == 9 and len(set(plugin.pauses)) == 1
    assert 0.1 <= plugin.pauses[0] < 0.2

    accounts = Accounts()
    accounts.appear_after[("default", "default")] = (3, account())
    plugin = Plugin(accounts)
    created = await plugin.create(pod())
    assert created["spec"]["serviceAccountName"] == "default" and len(plugin.pauses) == 2


ENFORCING = {"kubernetes.io/enforce-mountable-secrets": "true"}


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        (
            {"volumes": [{"name": "v", "secret": {"secretName": "other"}}]},
            'volume with secret.secretName="other" is not allowed because service account locked does not '
            "reference that secret",
        ),
        (
            {
                "initContainers": [
                    {
                        "name": "i",
                        "image": "x",
                        "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}}],
                    }
                ]
            },
            'init container i with envVar E referencing secret.secretName="other" is not allowed because '
            "service account locked does not reference that secret",
        ),
        (
            {"containers": [{"name": "c", "image": "x", "envFrom": [{"secretRef": {"name": "other"}}]}]},
            'container c with envFrom referencing secret.secretName="other" is not allowed because service '
            "account locked does not reference that secret",
        ),
        (
            {"imagePullSecrets": [{"name": "allowed"}, {"name": "other"}]},
            'imagePullSecrets[1].name="other" is not allowed because service account locked does not '
            "reference that imagePullSecret",
        ),
    ],
)
async def test_an_enforcing_account_limits_the_secrets_its_pods_reference(spec: Obj, why: str) -> None:
    locked = account(
        "locked",
        annotations=ENFORCING,
        secrets=[{"name": "allowed"}],
        imagePullSecrets=[{"name": "allowed"}],
    )
    refused = await refusal(Plugin(Accounts(locked)), pod(serviceAccountName="locked", **spec))
    assert refused.message == f'pods "p" is forbidden: {why}'


async def test_enforcement_needs_the_annotation_true_as_go_parses_it() -> None:
    for value, enforced in (("True", True), ("1", True), ("yes", False), ("false", False)):
        locked = account("locked", annotations={"kubernetes.io/enforce-mountable-secrets": value})
        obj = pod(serviceAccountName="locked", volumes=[{"name": "v", "secret": {"secretName": "s"}}])
        if enforced:
            await refusal(Plugin(Accounts(locked)), obj)
        else:
            await Plugin(Accounts(locked)).create(obj)


MIRROR = {
    "name": "static-web-node1",
    "namespace": "default",
    "annotations": {"kubernetes.io/config.mirror": "h"},
}


async def test_a_mirror_pod_is_left_as_it_is_and_may_not_reference_accounts_or_secrets() -> None:
    plugin = Plugin(Accounts(account()))
    created = await plugin.create(pod(metadata=copy.deepcopy(MIRROR)), name="static-web-node1")
    assert "serviceAccountName" not in created["spec"] and "volumes" not in created["spec"]
    cases = [
        ({"serviceAccountName": "default"}, "a mirror pod may not reference service accounts"),
        ({"imagePullSecrets": [{"name": "r"}]}, "a mirror pod may not reference secrets"),
        (
            {"volumes": [{"name": "v", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "s"}}}]},
            "a mirror pod may not reference secrets",
        ),
        (
            {"volumes": [{"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]},
            "a mirror pod may not use ServiceAccountToken volume projections",
        ),
    ]
    for spec, why in cases:
        refused = await refusal(plugin, pod(metadata=copy.deepcopy(MIRROR), **spec), name="static-web-node1")
        assert refused.message == f'pods "static-web-node1" is forbidden: {why}'


async def test_ephemeral_containers_of_an_enforcing_account_are_checked_on_their_update() -> None:
    locked = account("locked", annotations=ENFORCING, secrets=[{"name": "allowed"}])
    plugin = Plugin(Accounts(locked))
    running = pod(
        serviceAccountName="locked",
        ephemeralContainers=[{"name": "debug", "image": "x", "envFrom": [{"secretRef": {"name": "other"}}]}],
    )
    update = AdmissionAttributes(
        "UPDATE", POD, "default", "p", running, pod(), UserInfo("u"), subresource="ephemeralcontainers"
    )
    await plugin.mutating.admit(update)  # nothing to mutate on an update
    with pytest.raises(APIError) as caught:
        await plugin.validating.admit(update)
    assert caught.value.message == (
        'pods "p" is forbidden: ephemeral container debug with envFrom referencing secret.secretName="other" '
        "is not allowed because service account locked does not reference that secret"
    )


async def test_other_writes_are_left_alone() -> None:
    plugin = Plugin(Accounts())  # no account at all: anything it looked at would be refused
    for operation, kind, subresource in (
        ("UPDATE", POD, ""),
        ("UPDATE", POD, "status"),
        ("CREATE", POD, "binding"),
        ("CREATE", NODE, ""),
    ):
        obj = pod()
        attributes = AdmissionAttributes(
            operation, kind, "default", "p", obj, pod(), UserInfo("u"), subresource=subresource
        )
        await plugin.mutating.admit(attributes)
        await plugin.validating.admit(attributes)
        assert obj == pod()
