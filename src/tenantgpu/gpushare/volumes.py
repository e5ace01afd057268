"""PersistentVolumes and their claims as kube's PV controller and kube-scheduler's VolumeBinding see them.

Pure: objects in, verdicts and patches out. Facts from Kubernetes v1.33
(`staging/src/k8s.io/component-helpers/storage/volume/pv_helpers.go` FindMatchingVolume,
`pkg/controller/volume/persistentvolume/pv_controller.go`, and
`pkg/scheduler/framework/plugins/volumebinding/volume_binding.go`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from tenantgpu.gpushare.basics import _match_expression, node_selector_terms_match
from tenantgpu.gpushare.quantity import QuantityError, parse_quantity
from tenantgpu.gpushare.reasons import VOLUME_NODE_CONFLICT, VOLUME_NOT_EXIST

Obj = dict[str, Any]

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
ANN_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
# the annotations that make a class the default, the beta one still counting
DEFAULT_CLASS_ANNOTATIONS = (ANN_DEFAULT_CLASS, "storageclass.beta.kubernetes.io/is-default-class")
PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"

# kube-scheduler's VolumeBinding reasons
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NODE_CONFLICT = VOLUME_NODE_CONFLICT
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST = VOLUME_NOT_EXIST

NO_CLASS_MESSAGE = "no persistent volumes available for this claim and no storage class is set"
WAIT_FOR_FIRST_CONSUMER_MESSAGE = "waiting for first consumer to be created before binding"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("annotations") or {}


def claim_class(obj: Mapping[str, Any]) -> str:
    """GetPersistentVolumeClaimClass (and GetPersistentVolumeClass, the same rule for a volume): the beta
    annotation wins over `spec.storageClassName`."""
    annotations = _annotations(obj)
    if ANN_BETA_STORAGE_CLASS in annotations:
        return str(annotations[ANN_BETA_STORAGE_CLASS])
    return str((obj.get("spec") or {}).get("storageClassName") or "")


volume_class = claim_class


def claim_key(claim: Mapping[str, Any]) -> str:
    meta = _meta(claim)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def is_bound_to(volume: Mapping[str, Any], claim: Mapping[str, Any]) -> bool:
    """IsVolumeBoundToClaim: the volume's claimRef names the claim (and its uid, once set)."""
    ref = (volume.get("spec") or {}).get("claimRef")
    if not ref:
        return False
    meta = _meta(claim)
    if ref.get("name") != meta.get("name") or ref.get("namespace") != meta.get("namespace"):
        return False
    return not ref.get("uid") or ref.get("uid") == meta.get("uid")


def requested_storage(claim: Mapping[str, Any]) -> Fraction:
    return _storage(((claim.get("spec") or {}).get("resources") or {}).get("requests"))


def _storage(resources: Mapping[str, Any] | None) -> Fraction:
    try:
        return parse_quantity((resources or {}).get("storage", 0))
    except QuantityError:
        return Fraction(0)


def capacity(volume: Mapping[str, Any]) -> Fraction:
    """A volume's `spec.capacity.storage`."""
    return _storage((volume.get("spec") or {}).get("capacity"))


def claim_capacity(claim: Mapping[str, Any]) -> Fraction:
    """A claim's `status.capacity.storage`: what its bound volume gave it."""
    return _storage((claim.get("status") or {}).get("capacity"))


def _volume_mode(spec: Mapping[str, Any]) -> str:
    return spec.get("volumeMode") or "Filesystem"


def node_affinity_matches(volume: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """CheckNodeAffinity: a volume without required node affinity fits every node; otherwise one of its
    terms must match the node's labels (and `metadata.name` fields)."""
    required = (((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required")) or {}
    terms = required.get("nodeSelectorTerms")
    return not terms or node_selector_terms_match(terms, dict(node))


def _selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(_match_expression(dict(labels), e) for e in selector.get("matchExpressions") or [])


def find_matching_volume(
    claim: Mapping[str, Any],
    volumes: Iterable[Mapping[str, Any]],
    *,
    node: Mapping[str, Any] | None = None,
    delay_binding: bool = False,
) -> Obj | None:
    """FindMatchingVolume: a volume already pre-bound to the claim, else the smallest Available volume of
    the claim's class, volume mode and access modes (a superset of the claim's) with room enough, whose
    labels match the claim's selector (and, for a node, whose node affinity fits it). With delayed
    binding and no node, only a pre-bound volume is taken."""
    spec = claim.get("spec") or {}
    wanted = requested_storage(claim)
    modes = set(spec.get("accessModes") or [])
    wanted_class = claim_class(claim)
    smallest: Obj | None = None
    for volume in volumes:
        vspec = volume.get("spec") or {}
        if not modes <= set(vspec.get("accessModes") or []):
            continue
        if vspec.get("claimRef") and not is_bound_to(volume, claim):
            continue
        size = capacity(volume)
        if size < wanted:
            continue
        if _volume_mode(vspec) != _volume_mode(spec):
            continue
        if (vspec.get("volumeAttributesClassName") or "") != (spec.get("volumeAttributesClassName") or ""):
            continue
        if _meta(volume).get("deletionTimestamp"):
            continue
        fits_node = node is None or node_affinity_matches(volume, node)
        if is_bound_to(volume, claim):
            return dict(volume) if fits_node else None
        if node is None and delay_binding:
            continue
        if (volume.get("status") or {}).get("phase") != "Available":
            continue
        if not _selector_matches(spec.get("selector"), _meta(volume).get("labels") or {}):
            continue
        if volume_class(volume) != wanted_class or not fits_node:
            continue
        if smallest is None or size < capacity(smallest):
            smallest = dict(volume)
    return smallest


def satisfies(volume: Mapping[str, Any], claim: Mapping[str, Any]) -> str | None:
    """checkVolumeSatisfyClaim: why a volume the claim names cannot serve it, None when it can."""
    spec, vspec = claim.get("spec") or {}, volume.get("spec") or {}
    if capacity(volume) < requested_storage(claim):
        return "requested PV is too small"
    if volume_class(volume) != claim_class(claim):
        return "storageClassName does not match"
    if _volume_mode(vspec) != _volume_mode(spec):
        return "incompatible volumeMode"
    if not set(spec.get("accessModes") or []) <= set(vspec.get("accessModes") or []):
        return "incompatible accessMode"
    return None


def claim_reference(claim: Mapping[str, Any]) -> Obj:
    """The claimRef a volume bound to `claim` carries (GetReference: kind, namespace, name, uid,
    apiVersion, resourceVersion)."""
    meta = _meta(claim)
    return {
        "kind": "PersistentVolumeClaim",
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "apiVersion": "v1",
        "resourceVersion": meta.get("resourceVersion", ""),
    }


def is_default_class(storage_class: Mapping[str, Any]) -> bool:
    """IsDefaultAnnotation: the GA annotation or its beta twin says "true"."""
    annotations = _annotations(storage_class)
    return any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS)


def _created(obj: Mapping[str, Any]) -> datetime:
    text = _meta(obj).get("creationTimestamp")
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00")) if text else None
    except ValueError:
        moment = None
    if moment is None:
        return datetime.min.replace(tzinfo=UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def default_storage_class(classes: Iterable[Mapping[str, Any]]) -> Obj | None:
    """GetDefaultClass: of the classes marked default, the newest, then the first by name; None when no
    class is marked (the DefaultStorageClass admission plugin and the PV controller's retroactive
    assignment both ask it)."""
    marked = [c for c in classes if is_default_class(c)]
    if not marked:
        return None
    newest = max(_created(c) for c in marked)
    chosen = min((c for c in marked if _created(c) == newest), key=lambda c: str(_meta(c).get("name") or ""))
    return dict(chosen)


def delay_binding(storage_class: Mapping[str, Any] | None) -> bool:
    """IsDelayBindingMode: the claim's class binds when its first pod is scheduled."""
    return bool(storage_class) and (storage_class or {}).get("volumeBindingMode") == "WaitForFirstConsumer"


def pod_claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The claims a pod's volumes use (`persistentVolumeClaim`; a generic ephemeral volume's claim is
    named `<pod>-<volume>`)."""
    names = []
    pod_name = _meta(pod).get("name", "")
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if volume.get("persistentVolumeClaim") is not None:
            names.append((volume["persistentVolumeClaim"] or {}).get("claimName", ""))
        elif volume.get("ephemeral") is not None:
            names.append(f"{pod_name}-{volume.get('name', '')}")
    return names


@dataclass(frozen=True)
class ClaimVerdict:
    """What kube-scheduler's VolumeBinding makes of a pod's claims before it looks at nodes: a PreFilter
    refusal (`refusal`, the text FailedScheduling quotes), or the bound volumes each node must fit and
    the claims of WaitForFirstConsumer classes still to bind (with their classes), which each node must
    offer a volume for or let the class provision one."""

    refusal: str | None = None
    bound_volumes: tuple[Obj, ...] = ()
    missing_volume: bool = False
    delayed: tuple[Obj, ...] = ()
    classes: tuple[tuple[str, Obj], ...] = ()

    @property
    def needs_binding(self) -> bool:
        return bool(self.delayed)


NO_PROVISIONER = "kubernetes.io/no-provisioner"


def judge_claims(
    pod: Mapping[str, Any],
    claims: Mapping[str, Obj | None],
    volumes: Mapping[str, Obj | None],
    classes: Mapping[str, Obj | None],
) -> ClaimVerdict:
    """VolumeBinding's PreFilter over the pod's claims, found by name in `claims` (None: not found), the
    volumes they are bound to and their classes (by name)."""
    bound: list[Obj] = []
    delayed: list[Obj] = []
    missing = False
    ephemeral = {
        f"{_meta(pod).get('name', '')}-{v.get('name', '')}"
        for v in (pod.get("spec") or {}).get("volumes") or []
        if v.get("ephemeral") is not None
    }
    unbound = False
    for name in pod_claim_names(pod):
        claim = claims.get(name)
        if claim is None:
            if name in ephemeral:
                return ClaimVerdict(
                    f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                )
            return ClaimVerdict(f'persistentvolumeclaim "{name}" not found')
        spec = claim.get("spec") or {}
        if (claim.get("status") or {}).get("phase") == "Lost":
            return ClaimVerdict(
                f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{spec.get("volumeName", "")}"'
            )
        if _meta(claim).get("deletionTimestamp"):
            return ClaimVerdict(f'persistentvolumeclaim "{name}" is being deleted')
        if name in ephemeral and not _owned_by(claim, pod):
            namespace, pod_name = _meta(pod).get("namespace", ""), _meta(pod).get("name", "")
            return ClaimVerdict(
                f"PVC {namespace}/{name} was not created for pod {namespace}/{pod_name} (pod is not owner)"
            )
        volume_name = spec.get("volumeName") or ""
        if volume_name and ANN_BIND_COMPLETED in _annotations(claim):
            volume = volumes.get(volume_name)
            if volume is None:
                missing = True
            else:
                bound.append(volume)
        elif delay_binding(classes.get(claim_class(claim))):
            delayed.append(dict(claim))
        else:
            unbound = True
    if unbound:
        return ClaimVerdict(UNBOUND_IMMEDIATE)
    used = {claim_class(c) for c in delayed}
    return ClaimVerdict(
        None,
        tuple(bound),
        missing,
        tuple(delayed),
        tuple((name, dict(c)) for name, c in classes.items() if name in used and c is not None),
    )


def _owned_by(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """VolumeIsForPod: the pod is the claim's controlling owner."""
    uid = _meta(pod).get("uid")
    return any(r.get("controller") and r.get("uid") == uid for r in _meta(claim).get("ownerReferences") or [])


@dataclass(frozen=True)
class ClaimBinding:
    """How the scheduler's PreBind binds one delayed claim on the chosen node: to `volume` (a static
    binding), or by asking the class's provisioner for a volume on that node (`volume` None)."""

    claim: Obj
    volume: Obj | None


def _topology_allows(storage_class: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """A class's allowedTopologies (any term; each expression's key among the node's labels with one of
    its values); none allows every node."""
    terms = storage_class.get("allowedTopologies") or []
    if not terms:
        return True
    labels = _meta(node).get("labels") or {}
    for term in terms:
        expressions = term.get("matchLabelExpressions") or []
        if all(labels.get(e.get("key")) in (e.get("values") or []) for e in expressions):
            return True
    return False


def bindings_for_node(
    verdict: ClaimVerdict, node: Mapping[str, Any], volumes: Iterable[Mapping[str, Any]]
) -> list[ClaimBinding] | None:
    """FindPodVolumes for the delayed claims on one node: a distinct matching volume for each, or its
    class's provisioner (not `kubernetes.io/no-provisioner`, and the node within allowedTopologies);
    None when some claim can have neither."""
    classes = dict(verdict.classes)
    chosen: set[str] = set()
    plan: list[ClaimBinding] = []
    candidates = list(volumes)
    for claim in verdict.delayed:
        volume = find_matching_volume(
            claim,
            [x for x in candidates if _meta(x).get("name") not in chosen],
            node=node,
            delay_binding=True,
        )
        if volume is not None:
            chosen.add(volume["metadata"]["name"])
            plan.append(ClaimBinding(claim, volume))
            continue
        storage_class = classes.get(claim_class(claim)) or {}
        if storage_class.get("provisioner", NO_PROVISIONER) == NO_PROVISIONER or not _topology_allows(
            storage_class, node
        ):
            return None
        plan.append(ClaimBinding(claim, None))
    return plan


def node_reason(
    verdict: ClaimVerdict, node: Mapping[str, Any], volumes: Iterable[Mapping[str, Any]] = ()
) -> str | None:
    """VolumeBinding's Filter for one node: every bound volume's node affinity must fit it, and each
    delayed claim must find a volume or a provisioner there."""
    if verdict.missing_volume:
        return PV_NOT_EXIST
    for volume in verdict.bound_volumes:
        if not node_affinity_matches(volume, node):
            return NODE_CONFLICT
    if verdict.delayed and bindings_for_node(verdict, node, volumes) is None:
        return BIND_CONFLICT
    return None


def selected_node_patch(claim: Mapping[str, Any], node: str) -> Obj:
    """The claim annotation that asks its class's provisioner for a volume on `node`."""
    return {
        "metadata": {
            "annotations": {ANN_SELECTED_NODE: node},
            "resourceVersion": _meta(claim).get("resourceVersion"),
        }
    }


def static_binding_patch(volume: Mapping[str, Any], claim: Mapping[str, Any]) -> Obj:
    """bindAPIUpdate for a static binding: the volume's claimRef names the claim; the PV controller then
    binds the claim's side."""
    return {
        "metadata": {
            "annotations": {ANN_BOUND_BY_CONTROLLER: "yes"},
            "resourceVersion": _meta(volume).get("resourceVersion"),
        },
        "spec": {"claimRef": claim_reference(claim)},
    }


@dataclass(frozen=True)
class BindingPatch:
    """One merge patch of PreBind: to a volume (cluster-scoped, `namespace` None) or to a claim."""

    resource: str
    name: str
    patch: Obj
    namespace: str | None


def prebind_patches(plan: Iterable[ClaimBinding], node: str) -> list[BindingPatch]:
    """bindAPIUpdate: what PreBind writes for each delayed claim on the chosen node, a static binding's
    claimRef on the volume or the node given to the provisioner on the claim."""
    patches = []
    for binding in plan:
        if binding.volume is not None:
            patch = static_binding_patch(binding.volume, binding.claim)
            patches.append(BindingPatch("persistentvolumes", binding.volume["metadata"]["name"], patch, None))
        else:
            meta = binding.claim["metadata"]
            patch = selected_node_patch(binding.claim, node)
            patches.append(BindingPatch("persistentvolumeclaims", meta["name"], patch, meta.get("namespace")))
    return patches


def all_bound(claims: Iterable[Mapping[str, Any] | None]) -> bool:
    """checkBindings: every claim has completed binding."""
    return all(
        c is not None and (c.get("spec") or {}).get("volumeName") and ANN_BIND_COMPLETED in _annotations(c)
        for c in claims
    )
