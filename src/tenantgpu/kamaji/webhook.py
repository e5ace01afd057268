"""Kamaji's validating webhook for TenantControlPlanes (`vtenantcontrolplane.kb.io`), as an admission step
of the management plane: a refusal reads as kube-apiserver words a webhook's denial (403 Forbidden,
`admission webhook "vtenantcontrolplane.kb.io" denied the request: …`).

Of Kamaji's handlers it runs the ones that judge what a user writes, in Kamaji's order:
- the name, on create: a DNS-1035 label (it becomes the names of Services and Deployments);
- the Kubernetes version: on create not newer than the newest Kamaji supports; on update also no
  downgrade and no skipped minor version (patch versions are not compared);
- the DataStore (and each of `dataStoreOverrides`, unique per resource) must exist.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tenantgpu.apiserver.admission import AdmissionAttributes
from tenantgpu.apiserver.dnsnames import dns1035_label_errors
from tenantgpu.apiserver.errors import APIError
from tenantgpu.kamaji.kubeadmconfig import dns_service_ips

WEBHOOK_NAME = "vtenantcontrolplane.kb.io"
# The newest tenant version Kamaji 26.3.2-edge supports (reference/versioning.md: v1.30.0..v1.35.0).
SUPPORTED_VERSION = (1, 35, 0)

# blang/semver's grammar: MAJOR.MINOR.PATCH with optional -pre and +build parts, without leading zeros.
_SEMVER = re.compile(
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)

DataStoreLookup = Callable[[str], dict[str, Any] | None]


class VersionError(ValueError):
    """A version string blang/semver would not parse."""


def parse_version(text: str) -> tuple[int, int, int, str]:
    """(major, minor, 0, pre-release) of a Kubernetes version, `v` prefix allowed (Kamaji drops the patch)."""
    normalized = text[1:] if text.startswith("v") else text
    if normalized.count(".") < 2:
        raise VersionError("No Major.Minor.Patch elements found")
    match = _SEMVER.match(normalized)
    if match is None:
        raise VersionError(f"Invalid version {normalized!r}")
    return int(match[1]), int(match[2]), 0, match[4] or ""


def _order(version: tuple[int, int, int, str]) -> tuple[int, int, int, int, str]:
    # semver: a pre-release sorts before its release
    major, minor, patch, pre = version
    return major, minor, patch, 0 if pre else 1, pre


def _show(version: tuple[int, int, int, str]) -> str:
    major, minor, patch, pre = version
    return f"{major}.{minor}.{patch}" + (f"-{pre}" if pre else "")


def check_version(new: str, old: str | None) -> str | None:
    """Why Kamaji refuses this version (None when it does not); `old` is the version before an update."""
    supported = (*SUPPORTED_VERSION, "")
    try:
        wanted = parse_version(new)
    except VersionError as err:
        return f"unable to parse the desired Kubernetes version: {err}"
    if old is None:
        if _order(wanted) > _order(supported):
            return (
                "unable to create a TenantControlPlane with a Kubernetes version greater than the supported "
                f"one, actually v{supported[0]}.{supported[1]}"
            )
        return None
    try:
        before = parse_version(old)
    except VersionError as err:
        return f"unable to parse the previous Kubernetes version: {err}"
    if _order(wanted) > _order(supported):
        return (
            f"unable to upgrade to a version greater than the supported one (v{supported[0]}.{supported[1]})"
        )
    if _order(wanted) < _order(before):
        return f"unable to downgrade a TenantControlPlane from {_show(before)} to {_show(wanted)}"
    if wanted[1] - before[1] > 1:
        return "unable to upgrade to a minor version in a non-sequential mode"
    return None


class TenantControlPlaneWebhook:
    """The management plane's admission step for TenantControlPlane creates and updates."""

    name = WEBHOOK_NAME
    mutating = False

    def __init__(self, datastores: DataStoreLookup) -> None:
        self.datastores = datastores

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if (
            attributes.kind.kind != "TenantControlPlane"
            or attributes.subresource
            or attributes.operation not in ("CREATE", "UPDATE")
            or attributes.obj is None
        ):
            return
        why = self.refusal(attributes.obj, attributes.old if attributes.operation == "UPDATE" else None)
        if why is not None:
            raise APIError(403, "Forbidden", f'admission webhook "{WEBHOOK_NAME}" denied the request: {why}')

    def refusal(self, tcp: dict[str, Any], old: dict[str, Any] | None) -> str | None:
        meta, spec = tcp.get("metadata") or {}, tcp.get("spec") or {}
        if old is not None and meta.get("deletionTimestamp"):
            return None
        if old is None:
            errors = dns1035_label_errors(meta.get("name") or "")
            if errors:
                return f"the provided name is invalid, {','.join(errors)}"
        old_version = (
            None if old is None else str(((old.get("spec") or {}).get("kubernetes") or {}).get("version"))
        )
        why = check_version(str((spec.get("kubernetes") or {}).get("version") or ""), old_version)
        if why is not None:
            return why
        if spec.get("dataStore"):
            return self._missing(str(spec["dataStore"]))
        if old is None:
            seen: set[str] = set()
            for override in spec.get("dataStoreOverrides") or []:
                resource = str(override.get("resource") or "")
                if resource in seen:
                    return "duplicate resource override in Spec.DataStoreOverrides"
                seen.add(resource)
                why = self._missing(str(override.get("dataStore") or ""))
                if why is not None:
                    return why
        return None

    def _missing(self, name: str) -> str | None:
        return None if self.datastores(name) is not None else f"{name} DataStore does not exist"


MUTATING_WEBHOOK_NAME = "mtenantcontrolplane.kb.io"


class TenantControlPlaneDefaults:
    """Kamaji's mutating webhook (`mtenantcontrolplane.kb.io`) on create: the default DataStore, two
    replicas, the UID as datastore schema and user, and the lists and DNS IPs derived from the CIDRs.
    The API server then applies the CRD's defaults again, as it does after a mutating webhook."""

    name = MUTATING_WEBHOOK_NAME
    mutating = True

    def __init__(self, default_datastore: str) -> None:
        self.default_datastore = default_datastore

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if (
            attributes.kind.kind != "TenantControlPlane"
            or attributes.operation != "CREATE"
            or attributes.subresource
            or attributes.obj is None
        ):
            return
        self.default(attributes.obj)
        attributes.mutated = True

    def default(self, tcp: dict[str, Any]) -> None:
        uid = str((tcp.get("metadata") or {}).get("uid") or "")
        spec = tcp.setdefault("spec", {})
        if not spec.get("dataStore") and self.default_datastore:
            spec["dataStore"] = self.default_datastore
        deployment = spec.setdefault("controlPlane", {}).setdefault("deployment", {})
        deployment.setdefault("replicas", 2)
        # Kamaji defaults both to the UID, which a mutating webhook never sees on a create: kube-apiserver
        # fills in the uid after the mutating phase. So on a cluster the fields stay unset, and the
        # controller falls back to the UID itself (model.datastore_schema).
        if uid and not spec.get("dataStoreSchema"):
            spec["dataStoreSchema"] = uid
        if uid and not spec.get("dataStoreUsername"):
            spec["dataStoreUsername"] = uid
        network = spec.get("networkProfile")
        if not isinstance(network, dict):
            return
        for singular, plural in (("serviceCidr", "serviceCidrs"), ("podCidr", "podCidrs")):
            if not network.get(plural) and network.get(singular):
                network[plural] = [network[singular]]
        if not network.get("dnsServiceIPs"):
            cidrs = network.get("serviceCidrs") or (
                [network["serviceCidr"]] if network.get("serviceCidr") else []
            )
            try:
                ips = dns_service_ips([str(c) for c in cidrs])
            except ValueError:
                return  # the schema's CIDR rule refuses the object
            if ips:
                network["dnsServiceIPs"] = ips


DATASTORE_WEBHOOK_NAME = "vdatastore.kb.io"
TenantControlPlaneLookup = Callable[[str], list[str]]


class DataStoreWebhook:
    """Kamaji's validating webhook for DataStores (`vdatastore.kb.io`, on create, update and delete): a
    DataStore that TenantControlPlanes use cannot be deleted (their data is in it), and its driver
    cannot change. `users(name)` names the TCPs that use the DataStore."""

    name = DATASTORE_WEBHOOK_NAME
    mutating = False

    def __init__(self, users: TenantControlPlaneLookup) -> None:
        self.users = users

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if attributes.kind.kind != "DataStore" or attributes.subresource:
            return
        why = None
        if attributes.operation == "DELETE":
            if self.users(attributes.name):
                why = "the DataStore is used by multiple TenantControlPlanes and cannot be removed"
        elif attributes.operation == "UPDATE" and attributes.obj is not None and attributes.old is not None:
            driver = (attributes.obj.get("spec") or {}).get("driver")
            if driver != (attributes.old.get("spec") or {}).get("driver"):
                why = "driver of a DataStore cannot be changed"
        if why is not None:
            raise APIError(
                403, "Forbidden", f'admission webhook "{DATASTORE_WEBHOOK_NAME}" denied the request: {why}'
            )
