"""The objects a pod or a persistent volume names, walked as kube walks them: `VisitPodSecretNames` and
`VisitPodConfigmapNames` (`pkg/api/v1/pod/util.go`), a generic ephemeral volume's claim
(`ephemeral.VolumeClaimName`), a pod's resource claims (`resourceclaim.Name`) and the secrets a volume
hands the kubelet (`VisitPVSecretNames`, `pkg/api/v1/persistentvolume/util.go`). They are the edges of
the Node authorizer's graph and what ServiceAccount admission refuses in a mirror pod.

Names that are empty are skipped, as kube's visitors skip them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tenantgpu.apiserver.disabledfields import every_container
from tenantgpu.apiserver.validation import MIRROR_POD_ANNOTATION

Obj = dict[str, Any]

# Volume plugins that name a secret in a pod's volume, in kube's order: the field holds a name or a
# reference. `secret` and `projected` are walked on their own.
_POD_VOLUME_SECRETS = (
    ("azureFile", "secretName"),
    ("cephfs", "secretRef"),
    ("cinder", "secretRef"),
    ("flexVolume", "secretRef"),
    ("rbd", "secretRef"),
    ("scaleIO", "secretRef"),
    ("iscsi", "secretRef"),
    ("storageos", "secretRef"),
    ("csi", "nodePublishSecretRef"),
)


def _name(ref: Any, field: str = "name") -> str:
    value = ref.get(field) if isinstance(ref, Mapping) else None
    return value if isinstance(value, str) else ""


def _mappings(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, Mapping))


def _env_refs(spec: Mapping[str, Any], from_field: str, key_field: str) -> Iterator[str]:
    for container in every_container(spec):
        if not isinstance(container, Mapping):
            continue
        for env_from in _mappings(container.get("envFrom")):
            yield _name(env_from.get(from_field))
        for env in _mappings(container.get("env")):
            value_from = env.get("valueFrom")
            if isinstance(value_from, Mapping):
                yield _name(value_from.get(key_field))


def _projected(volume: Mapping[str, Any], kind: str) -> Iterator[str]:
    projected = volume.get("projected")
    if isinstance(projected, Mapping):
        for source in _mappings(projected.get("sources")):
            if source.get(kind) is not None:
                yield _name(source.get(kind))


def secret_names(spec: Mapping[str, Any]) -> Iterator[str]:
    """The secrets a pod spec names: image pull secrets, every container's env and envFrom, and volumes."""

    def walk() -> Iterator[str]:
        for ref in _mappings(spec.get("imagePullSecrets")):
            yield _name(ref)
        yield from _env_refs(spec, "secretRef", "secretKeyRef")
        for volume in _mappings(spec.get("volumes")):
            yield from _projected(volume, "secret")
            if isinstance(volume.get("secret"), Mapping):
                yield _name(volume["secret"], "secretName")
            for plugin, field in _POD_VOLUME_SECRETS:
                source = volume.get(plugin)
                if isinstance(source, Mapping):
                    ref = source.get(field)
                    yield ref if isinstance(ref, str) else _name(ref)

    return (name for name in walk() if name)


def configmap_names(spec: Mapping[str, Any]) -> Iterator[str]:
    """The config maps a pod spec names: every container's env and envFrom, and volumes."""

    def walk() -> Iterator[str]:
        yield from _env_refs(spec, "configMapRef", "configMapKeyRef")
        for volume in _mappings(spec.get("volumes")):
            yield from _projected(volume, "configMap")
            if isinstance(volume.get("configMap"), Mapping):
                yield _name(volume["configMap"])

    return (name for name in walk() if name)


def claim_names(pod: Mapping[str, Any]) -> Iterator[str]:
    """The persistent volume claims a pod's volumes use; a generic ephemeral volume's is `<pod>-<volume>`."""
    name = _name(pod.get("metadata"))
    for volume in _mappings((pod.get("spec") or {}).get("volumes")):
        if isinstance(volume.get("persistentVolumeClaim"), Mapping):
            claim = _name(volume["persistentVolumeClaim"], "claimName")
        elif volume.get("ephemeral") is not None:
            claim = f"{name}-{_name(volume)}"
        else:
            continue
        if claim:
            yield claim


def resource_claim_names(pod: Mapping[str, Any]) -> Iterator[str]:
    """The ResourceClaims a pod's `spec.resourceClaims` name, directly or, for one made from a template,
    as `status.resourceClaimStatuses` records it (none until the controller made it). Releases before
    1.31 nest both names under `source`."""
    statuses = {
        _name(status): status.get("resourceClaimName")
        for status in _mappings((pod.get("status") or {}).get("resourceClaimStatuses"))
    }
    for claim in _mappings((pod.get("spec") or {}).get("resourceClaims")):
        source = claim.get("source") if isinstance(claim.get("source"), Mapping) else claim
        direct = source.get("resourceClaimName")
        if isinstance(direct, str) and direct:
            yield direct
        elif source.get("resourceClaimTemplateName"):
            generated = statuses.get(_name(claim))
            if isinstance(generated, str) and generated:
                yield generated


def is_mirror(pod: Mapping[str, Any]) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations")
    return isinstance(annotations, Mapping) and MIRROR_POD_ANNOTATION in annotations


# Persistent volume plugins whose secret reference the kubelet reads, in kube's order; with
# `claim_namespace`, a reference without a namespace is in the bound claim's.
_PV_SECRETS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("cephfs", ("secretRef",), True),
    ("cinder", ("secretRef",), False),
    ("flexVolume", ("secretRef",), True),
    ("rbd", ("secretRef",), True),
    ("scaleIO", ("secretRef",), True),
    ("iscsi", ("secretRef",), True),
    ("storageos", ("secretRef",), False),
    # the controller's publish and expand secrets are the CSI controller's, not the kubelet's
    ("csi", ("nodePublishSecretRef", "nodeStageSecretRef", "nodeExpandSecretRef"), False),
)


def volume_secrets(pv: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The (namespace, name) of each secret a persistent volume hands the kubelet."""
    spec = pv.get("spec") or {}
    claim_namespace = _name(spec.get("claimRef"), "namespace")
    azure = spec.get("azureFile")
    if isinstance(azure, Mapping):
        secret = _name(azure, "secretName")
        if secret:
            yield (_name(azure, "secretNamespace") or claim_namespace, secret)
        return
    for plugin, fields, defaults_to_claim in _PV_SECRETS:
        source = spec.get(plugin)
        if not isinstance(source, Mapping):
            continue
        for field in fields:
            ref = source.get(field)
            if isinstance(ref, Mapping) and _name(ref):
                namespace = _name(ref, "namespace")
                if defaults_to_claim and not namespace:
                    namespace = claim_namespace
                yield (namespace, _name(ref))
        return
