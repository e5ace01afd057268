"""kube's ServiceAccount admission plugin: a pod runs as a service account that exists, with its token mounted.

On a pod's create it names the account (`default` when the pod names none), refuses the pod when the
account is missing, mounts the projected `kube-api-access-<random>` volume (a bound token, the cluster CA
and the namespace) into every container and init container at `/var/run/secrets/kubernetes.io/serviceaccount`
unless the pod or the account opts out, and copies the account's `imagePullSecrets` into a pod that has
none. An account annotated `kubernetes.io/enforce-mountable-secrets: "true"` limits the secrets its pods
may reference, ephemeral containers included. A mirror pod (a static pod's copy) may reference no
account, no secret and no token projection.

kube-apiserver always runs it (Kamaji's TenantControlPlanes list it too). Because it refuses pods until
kube-controller-manager has created the namespace's `default` account, it waits for that account a while,
as kube's plugin does, and a bare API server without a controller-manager runs without it (as with
`kube-apiserver --disable-admission-plugins=ServiceAccount`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.admission import AdmissionAttributes
from tenantgpu.apiserver.kinds import Kind
from tenantgpu.apiserver.podreferences import secret_names
from tenantgpu.apiserver.validation import MIRROR_POD_ANNOTATION

Obj = dict[str, Any]

DEFAULT_ACCOUNT = "default"
TOKEN_VOLUME_PREFIX = "kube-api-access-"
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
ENFORCE_MOUNTABLE_SECRETS = "kubernetes.io/enforce-mountable-secrets"
# kube's WarnOnlyBoundTokenExpirationSeconds: an hour and seven seconds, so a token older than an hour is
# recognisable as one a client should have refreshed.
TOKEN_EXPIRATION_SECONDS = 3607
# The cache may not have the `default` account yet right after its namespace was made: kube asks again
# ten times, 100–200 ms apart, before it refuses the pod; other accounts are looked up once.
DEFAULT_ACCOUNT_ATTEMPTS = 10

AccountLookup = Callable[[str, str], Obj | None]


def token_volume(name: str) -> Obj:
    """The projected volume the plugin adds, with the defaults kube spells out in it."""
    return {
        "name": name,
        "projected": {
            "defaultMode": 0o644,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
        },
    }


def _parse_bool(text: str) -> bool:
    """Go's strconv.ParseBool; anything it does not take counts as false, as kube reads the annotation."""
    return text in ("1", "t", "T", "true", "TRUE", "True")


def _should_automount(account: Obj, spec: Mapping[str, Any]) -> bool:
    # The pod's own choice wins over the account's; with neither, the token is mounted.
    if spec.get("automountServiceAccountToken") is not None:
        return bool(spec["automountServiceAccountToken"])
    if account.get("automountServiceAccountToken") is not None:
        return bool(account["automountServiceAccountToken"])
    return True


def _refused(subject: str, account: str, what: str = "secret") -> str:
    return f"{subject} is not allowed because service account {account} does not reference that {what}"


def _unmountable_secret(account: Obj, spec: Mapping[str, Any]) -> str | None:
    """Why a pod of an enforcing account may not be admitted, or None (kube's limitSecretReferences)."""
    name = (account.get("metadata") or {}).get("name", "")
    mountable = {str((s or {}).get("name") or "") for s in account.get("secrets") or []}
    for volume in spec.get("volumes") or []:
        secret = volume.get("secret")
        if secret is not None and secret.get("secretName", "") not in mountable:
            return _refused(f'volume with secret.secretName="{secret.get("secretName", "")}"', name)
    for group, what in (("initContainers", "init container"), ("containers", "container")):
        for ctr in spec.get(group) or []:
            refused = _unmountable_env(ctr, what, name, mountable)
            if refused:
                return refused
    pullable = {str((s or {}).get("name") or "") for s in account.get("imagePullSecrets") or []}
    for i, ref in enumerate(spec.get("imagePullSecrets") or []):
        pull = str((ref or {}).get("name") or "")
        if pull not in pullable:
            return _refused(f'imagePullSecrets[{i}].name="{pull}"', name, "imagePullSecret")
    return None


def _unmountable_env(ctr: Mapping[str, Any], what: str, account: str, mountable: set[str]) -> str | None:
    for env in ctr.get("env") or []:
        ref = (env.get("valueFrom") or {}).get("secretKeyRef")
        if ref is not None and ref.get("name", "") not in mountable:
            subject = f"{what} {ctr.get('name', '')} with envVar {env.get('name', '')} referencing"
            return _refused(f'{subject} secret.secretName="{ref.get("name", "")}"', account)
    for env_from in ctr.get("envFrom") or []:
        ref = env_from.get("secretRef")
        if ref is not None and ref.get("name", "") not in mountable:
            subject = f"{what} {ctr.get('name', '')} with envFrom referencing"
            return _refused(f'{subject} secret.secretName="{ref.get("name", "")}"', account)
    return None


class ServiceAccountAdmission:
    """One phase of the plugin: `mutating=True` names the account and mounts its token on create; the
    validating phase checks that the account exists and what it lets the pod reference."""

    name = "ServiceAccount"

    def __init__(
        self,
        lookup: AccountLookup,
        generate_name: Callable[[str], str],
        *,
        mutating: bool,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._lookup = lookup
        self._generate_name = generate_name
        self.mutating = mutating
        self._sleep = sleep

    @staticmethod
    def handles(operation: str, kind: Kind, subresource: str) -> bool:
        # a pod's create, and an update of its ephemeral containers
        if kind.group or kind.kind != "Pod":
            return False
        return (operation == "CREATE" and not subresource) or (
            operation == "UPDATE" and subresource == "ephemeralcontainers"
        )

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if attributes.obj is None or not self.handles(
            attributes.operation, attributes.kind, attributes.subresource
        ):
            return
        pod = attributes.obj
        if attributes.operation == "UPDATE" and attributes.subresource == "ephemeralcontainers":
            if not self.mutating:
                await self._check_ephemeral(attributes, pod)
            return
        spec = pod.setdefault("spec", {})
        if MIRROR_POD_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {}):
            if not self.mutating:
                self._check_mirror(attributes, spec)
            return
        if self.mutating:
            await self._mutate(attributes, spec)
        else:
            await self._validate(attributes, spec)

    async def _mutate(self, attributes: AdmissionAttributes, spec: Obj) -> None:
        if not spec.get("serviceAccountName"):
            spec["serviceAccountName"] = DEFAULT_ACCOUNT
        # The deprecated alias always reads back as the account's name, as kube's conversion writes it.
        spec["serviceAccount"] = spec["serviceAccountName"]
        account = await self._account(attributes, spec["serviceAccountName"])
        if _should_automount(account, spec):
            self._mount_token(spec)
        if not spec.get("imagePullSecrets") and account.get("imagePullSecrets"):
            spec["imagePullSecrets"] = [
                {"name": (ref or {}).get("name", "")} for ref in account["imagePullSecrets"]
            ]

    async def _named_account(self, attributes: AdmissionAttributes, spec: Obj) -> Obj:
        """The account the pod names, which must exist (its validating phase)."""
        account_name = spec.get("serviceAccountName") or ""
        if not account_name:
            raise self._forbidden(
                attributes,
                f"no service account specified for pod {attributes.namespace}/{_pod_name(attributes)}",
            )
        return await self._account(attributes, account_name)

    async def _validate(self, attributes: AdmissionAttributes, spec: Obj) -> None:
        account = await self._named_account(attributes, spec)
        if _enforces_mountable_secrets(account):
            refused = _unmountable_secret(account, spec)
            if refused:
                raise self._forbidden(attributes, refused)

    async def _check_ephemeral(self, attributes: AdmissionAttributes, pod: Obj) -> None:
        spec = pod.get("spec") or {}
        account = await self._named_account(attributes, spec)
        if not _enforces_mountable_secrets(account):
            return
        mountable = {str((s or {}).get("name") or "") for s in account.get("secrets") or []}
        for ctr in spec.get("ephemeralContainers") or []:
            refused = _unmountable_env(ctr, "ephemeral container", spec["serviceAccountName"], mountable)
            if refused:
                raise self._forbidden(attributes, refused)

    def _check_mirror(self, attributes: AdmissionAttributes, spec: Obj) -> None:
        why = None
        if spec.get("serviceAccountName"):
            why = "a mirror pod may not reference service accounts"
        elif any(True for _ in secret_names(spec)):
            why = "a mirror pod may not reference secrets"
        elif any(
            source.get("serviceAccountToken") is not None
            for volume in spec.get("volumes") or []
            for source in (volume.get("projected") or {}).get("sources") or []
        ):
            why = "a mirror pod may not use ServiceAccountToken volume projections"
        if why:
            raise self._forbidden(attributes, why)

    async def _account(self, attributes: AdmissionAttributes, name: str) -> Obj:
        account = self._lookup(attributes.namespace, name)
        if account is not None:
            return account
        attempts = DEFAULT_ACCOUNT_ATTEMPTS if name == DEFAULT_ACCOUNT else 1
        # kube draws one pause for all of a request's retries.
        pause = (100 + random.randrange(100)) / 1000
        for _ in range(attempts - 1):
            await self._sleep(pause)
            account = self._lookup(attributes.namespace, name)
            if account is not None:
                return account
        raise self._forbidden(
            attributes,
            f"error looking up service account {attributes.namespace}/{name}: "
            f'serviceaccount "{name}" not found',
        )

    def _mount_token(self, spec: Obj) -> None:
        volumes = spec.get("volumes") or []
        volume_name = next(
            (v["name"] for v in volumes if str(v.get("name") or "").startswith(TOKEN_VOLUME_PREFIX)), ""
        )
        has_volume = bool(volume_name)
        volume_name = volume_name or self._generate_name(TOKEN_VOLUME_PREFIX)
        needs_volume = False
        for group in ("initContainers", "containers"):
            for ctr in spec.get(group) or []:
                mounts = ctr.get("volumeMounts") or []
                if any(m.get("mountPath") == TOKEN_MOUNT_PATH for m in mounts):
                    continue  # a mount of the pod's own at that path keeps the token out
                ctr["volumeMounts"] = [
                    *mounts,
                    {"name": volume_name, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH},
                ]
                needs_volume = True
        if needs_volume and not has_volume:
            spec["volumes"] = [*volumes, token_volume(volume_name)]

    def _forbidden(self, attributes: AdmissionAttributes, why: str) -> errors.APIError:
        return errors.forbidden("pods", attributes.forbidden_name(), "", why)


def _enforces_mountable_secrets(account: Obj) -> bool:
    annotations = (account.get("metadata") or {}).get("annotations") or {}
    return _parse_bool(str(annotations.get(ENFORCE_MOUNTABLE_SECRETS, "")))


def _pod_name(attributes: AdmissionAttributes) -> str:
    return str(((attributes.obj or {}).get("metadata") or {}).get("name") or attributes.name)
