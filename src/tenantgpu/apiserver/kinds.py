"""The table of kinds the API serves: each kind is data plus a small strategy, never its own handler."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from tenantgpu.apiserver import certificates, featuregates
from tenantgpu.apiserver.defaults import default_job_labels, default_pod_status
from tenantgpu.apiserver.nodelabels import runtime_class_warnings

Obj = dict[str, Any]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Subresource:
    """A subresource such as `status` or `binding`; `kind` is what it returns (`responseKind`)."""

    name: str
    kind: str
    verbs: tuple[str, ...]
    group: str = ""
    version: str = "v1"
    # The first Kubernetes release that serves it (0: every one), e.g. 33 for `pods/resize`, whose
    # InPlacePodVerticalScaling gate is off by default before 1.33 (and the subresource then unserved).
    first_minor: int = 0


@dataclass(frozen=True)
class Generation:
    """When kube-apiserver's strategy for a kind gives it `metadata.generation` and counts a new one.

    A kind's strategy sets 1 on create and adds one on an update that changes `counts` (its top-level
    fields; None: every one but `metadata`, and `status` where a status subresource writes it) or the
    `metadata` fields named. Kinds without a `Generation` keep what the client sent, as kube does.
    """

    counts: frozenset[str] | None = frozenset({"spec"})
    metadata: tuple[str, ...] = ()
    # Pods have one from Kubernetes 1.33 on (KEP-5067), not behind a feature gate.
    first_minor: int = 0
    # A DaemonSet also counts its template's own generation, which apps/v1 shows in this annotation:
    # 1 on create, one more whenever `spec.template` changes, never what a client writes there.
    template_annotation: str = ""


_SPEC = Generation()
_CONTENT = Generation(counts=None)
DAEMON_SET_TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"


@dataclass(frozen=True)
class Strategy:
    """What differs per kind in the generic store, as kube-apiserver's `rest.RESTCreateStrategy` & co.

    `status_fields`: the top-level fields a `status` subresource update may change; the main resource
    may change everything else. `on_create` runs after defaulting and the mutating admission phase, as kube's
    PrepareForCreate does, `on_update` before defaulting; both before validation.
    """

    status_fields: tuple[str, ...] = ()
    on_create: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    # The grace period a delete gets, from the object and the requested one; None or 0 = at once.
    graceful_delete: Callable[[Obj, int | None], int | None] | None = None
    # Names that may never be deleted.
    protected_names: frozenset[str] = frozenset()
    # Namespaces: a delete only marks the object Terminating; it goes once `spec.finalizers` (which a
    # controller empties through the `finalize` subresource) and `metadata.finalizers` are both empty.
    spec_finalizers: bool = False
    # Kinds with a status subresource start with an empty status, except nodes: kubelets register
    # with theirs.
    keep_status_on_create: bool = False
    # What a delete does to the objects this kind owns (ownerReferences) when the request names no
    # propagationPolicy: "Background" (the garbage collector deletes them afterwards) or "Orphan"
    # (batch/v1 Jobs, for compatibility: they are kept and lose their ownerReference). "" = a kind that
    # owns nothing here, deleted as before whatever the request says.
    default_propagation: str = ""
    generation: Generation | None = None
    # The metadata fields a `status` update may change too (all others stay as stored). kube's status
    # strategies of built-in kinds keep only the spec, so these go through; a custom resource's keeps
    # all of its metadata.
    status_metadata: tuple[str, ...] = ("labels", "annotations", "finalizers", "ownerReferences")
    # Runs on a `status` update after the spec is carried over, as a status strategy's PrepareForUpdate.
    on_status_update: Callable[[Obj, Obj], None] | None = None
    # The strategy as Kubernetes 1.<minor> has it, for kinds whose strategy changed with a release.
    as_of: Callable[[int], Strategy] | None = None
    # kube's AllowUnconditionalUpdate: False refuses a PUT that names no `metadata.resourceVersion`
    # (422, `must be specified for an update`) where other kinds let it win over the stored object.
    unconditional_update: bool = True
    # WarningsOnCreate / WarningsOnUpdate: the `Warning` headers a write gets, from the object written
    # and, on an update, the stored one (None on create).
    warnings: Callable[[Obj, Obj | None], list[str]] | None = None
    # PrepareForCreate for kinds that record who asks (CertificateSigningRequests): runs where
    # `on_create` does, given the authenticated user.
    on_create_by: Callable[[Obj, Any], None] | None = None
    # PrepareForUpdate for kinds whose subresources each keep their own part of the object: given the
    # new object, the stored one and the subresource (`""` for the resource), it sets in `new` what that
    # write may not change, in place of the generic spec/status carry-over (metadata is still the store's).
    prepare_update: Callable[[Obj, Obj, str], None] | None = None


@dataclass(frozen=True)
class Deprecation:
    """A kind kube-apiserver marks deprecated (its Go type's `APILifecycleDeprecated`): from Kubernetes
    1.`minor` on, every request for it gets the warning `<apiVersion> <Kind> is deprecated in v1.<minor>+`,
    followed by `; use <replacement>` when the type names one (`APILifecycleReplacement`)."""

    minor: int
    replacement: str = ""


@dataclass(frozen=True)
class Kind:
    """One served resource: naming, scope and discovery facts plus its strategy.

    Its derived names are cached: every request and every stored write asks for some of them.
    """

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[Subresource, ...] = ()
    strategy: Strategy = field(default_factory=Strategy)
    storage_name: str = ""
    deprecated: Deprecation | None = None

    @cached_property
    def singular(self) -> str:
        return self.kind.lower()

    @cached_property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @cached_property
    def list_kind(self) -> str:
        return self.kind + "List"

    @cached_property
    def group_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @cached_property
    def key_segment(self) -> str:
        """The part of a storage key that names the resource, e.g. `pods` or `coordination.k8s.io/leases`."""
        return self.storage_name or (f"{self.group}/{self.plural}" if self.group else self.plural)

    def subresource(self, name: str) -> Subresource | None:
        for sub in self.subresources:
            if sub.name == name:
                return sub
        return None

    @cached_property
    def has_status(self) -> bool:
        return self.subresource("status") is not None

    def deprecation_warnings(self, minor: int) -> list[str]:
        """The `Warning` every request for this kind gets from a Kubernetes 1.`minor` server (kube's
        installer adds it to each route of a deprecated resource, whatever the verb or answer)."""
        if self.deprecated is None or minor < self.deprecated.minor:
            return []
        text = f"{self.api_version} {self.kind} is deprecated in v1.{self.deprecated.minor}+"
        if self.deprecated.replacement:
            text += f"; use {self.deprecated.replacement}"
        return [text]


class KindTable:
    """Lookup of served kinds by group/version/plural, by kind name, and grouped for discovery."""

    def __init__(self, kinds: Iterable[Kind]) -> None:
        self._by_resource: dict[tuple[str, str, str], Kind] = {}
        self._by_kind: dict[tuple[str, str], Kind] = {}
        self._ordered: list[Kind] = []
        for kind in kinds:
            self.add(kind)

    def add(self, kind: Kind) -> None:
        key = (kind.group, kind.version, kind.plural)
        if key in self._by_resource:
            raise ValueError(f"kind {kind.group_resource} is already served")
        self._by_resource[key] = kind
        # a kind served in several versions is known by its first (preferred) one
        self._by_kind.setdefault((kind.group, kind.kind), kind)
        self._ordered.append(kind)

    def resource(self, group: str, version: str, plural: str) -> Kind | None:
        return self._by_resource.get((group, version, plural))

    def by_kind(self, group: str, kind: str) -> Kind | None:
        return self._by_kind.get((group, kind))

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._ordered)

    def group_versions(self) -> dict[str, list[str]]:
        """Group name to its versions, in the order kinds were added; the core group is `""`."""
        result: dict[str, list[str]] = {}
        for kind in self._ordered:
            versions = result.setdefault(kind.group, [])
            if kind.version not in versions:
                versions.append(kind.version)
        return result

    def in_group_version(self, group: str, version: str) -> list[Kind]:
        return [k for k in self._ordered if k.group == group and k.version == version]


# --- strategies -------------------------------------------------------------------------------


def _pod_grace(pod: Obj, requested: int | None) -> int | None:
    """Pods on a node are deleted gracefully (the kubelet finishes the deletion); others at once."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return None
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return None
    if requested is not None:
        return requested
    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return 30 if grace is None else int(grace)


def _namespace_on_create(ns: Obj) -> None:
    finalizers = ns.setdefault("spec", {}).setdefault("finalizers", [])
    if "kubernetes" not in finalizers:
        finalizers.append("kubernetes")  # the namespace controller's, always present from the start
    ns.setdefault("status", {})["phase"] = "Active"
    labels = ns.setdefault("metadata", {}).setdefault("labels", {})
    labels["kubernetes.io/metadata.name"] = ns["metadata"].get("name", "")


def _namespace_on_update(new: Obj, old: Obj) -> None:
    # Only the finalize subresource changes spec.finalizers.
    old_finalizers = (old.get("spec") or {}).get("finalizers")
    if old_finalizers is None:
        (new.get("spec") or {}).pop("finalizers", None)
    else:
        new.setdefault("spec", {})["finalizers"] = list(old_finalizers)
    new.setdefault("metadata", {}).setdefault("labels", {})["kubernetes.io/metadata.name"] = old["metadata"][
        "name"
    ]


def _node_on_create(node: Obj) -> None:
    node.setdefault("status", {})


def _service_on_create(svc: Obj) -> None:
    spec = svc.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    svc.setdefault("status", {}).setdefault("loadBalancer", {})


def _secret_on_create(secret: Obj) -> None:
    if not secret.get("type"):
        secret["type"] = "Opaque"


def _tcp_on_create(tcp: Obj) -> None:
    status = tcp.setdefault("status", {})
    version = status.setdefault("kubernetesResources", {}).setdefault("version", {})
    version.setdefault("status", "Provisioning")


JOB_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def _job_on_create(job: Obj) -> None:
    """Without `manualSelector`, the selector and the template's labels are generated from the uid."""
    job["status"] = {}  # a new Job's status is empty, not absent, as kube's strategy leaves it
    spec = job.setdefault("spec", {})
    meta = job["metadata"]
    if spec.get("manualSelector") is not True:
        uid, name = meta["uid"], meta.get("name") or ""
        template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
        labels = template_meta.get("labels") or {}
        # The legacy keys first, then the prefixed ones, as the batch strategy writes them.
        labels.update(
            {"controller-uid": uid, "job-name": name, JOB_CONTROLLER_UID: uid, JOB_NAME_LABEL: name}
        )
        template_meta["labels"] = labels
        spec["selector"] = {"matchLabels": {JOB_CONTROLLER_UID: uid}}
    # The request was defaulted before these labels were generated, so a Job with labels of its own or
    # from its template keeps those as written. One without any takes the generated ones: kube defaults
    # the object again as it reads it back from storage.
    default_job_labels(job)


def _job_on_update(new: Obj, old: Obj) -> None:
    # The generated selector is the server's; an update that leaves it out keeps it.
    old_spec = old.get("spec") or {}
    spec = new.setdefault("spec", {})
    if "selector" not in spec and "selector" in old_spec:
        spec["selector"] = copy.deepcopy(old_spec["selector"])


_STATUS = ("status",)


def _status(kind: str, group: str = "", version: str = "v1") -> Subresource:
    return Subresource("status", kind, ("get", "patch", "update"), group, version)


POD = Kind(
    "",
    "v1",
    "Pod",
    "pods",
    True,
    ("po",),
    ("all",),
    subresources=(
        _status("Pod"),
        Subresource("binding", "Binding", ("create",)),
        Subresource("eviction", "Eviction", ("create",), "policy", "v1"),
        Subresource("log", "Pod", ("get",)),
        Subresource("exec", "PodExecOptions", ("create", "get")),
        Subresource("attach", "PodAttachOptions", ("create", "get")),
        Subresource("portforward", "PodPortForwardOptions", ("create", "get")),
        Subresource("proxy", "PodProxyOptions", ("create", "delete", "get", "patch", "update")),
        Subresource("ephemeralcontainers", "Pod", ("get", "patch", "update")),
        Subresource("resize", "Pod", ("get", "patch", "update"), first_minor=33),
    ),
    # The pod status strategy keeps the owner references: old kubelets wrote them wrong.
    strategy=Strategy(
        _STATUS,
        default_pod_status,  # the status a new pod starts with, whatever the request carried
        graceful_delete=_pod_grace,
        generation=Generation(first_minor=33),
        status_metadata=("labels", "annotations", "finalizers"),
    ),
)
NODE = Kind(
    "",
    "v1",
    "Node",
    "nodes",
    False,
    ("no",),
    subresources=(
        Subresource("proxy", "NodeProxyOptions", ("create", "delete", "get", "patch", "update")),
        _status("Node"),
    ),
    strategy=Strategy(_STATUS, _node_on_create, keep_status_on_create=True),
    storage_name="minions",
)
NAMESPACE = Kind(
    "",
    "v1",
    "Namespace",
    "namespaces",
    False,
    ("ns",),
    verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
    subresources=(_status("Namespace"), Subresource("finalize", "Namespace", ("update",))),
    strategy=Strategy(
        _STATUS,
        _namespace_on_create,
        _namespace_on_update,
        # kube's NamespaceLifecycle never lets these go.
        protected_names=frozenset({"default", "kube-system", "kube-public"}),
        spec_finalizers=True,
    ),
)
BUILTIN_KINDS: tuple[Kind, ...] = (
    POD,
    NODE,
    NAMESPACE,
    Kind("", "v1", "Binding", "bindings", True, verbs=("create",)),
    Kind("", "v1", "Event", "events", True, ("ev",)),
    Kind("", "v1", "Secret", "secrets", True, strategy=Strategy(on_create=_secret_on_create)),
    Kind("", "v1", "ConfigMap", "configmaps", True, ("cm",)),
    Kind(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        True,
        ("sa",),
        subresources=(Subresource("token", "TokenRequest", ("create",), "authentication.k8s.io", "v1"),),
    ),
    Kind(
        "",
        "v1",
        "Service",
        "services",
        True,
        ("svc",),
        ("all",),
        subresources=(
            Subresource("proxy", "ServiceProxyOptions", ("create", "delete", "get", "patch", "update")),
            _status("Service"),
        ),
        strategy=Strategy(_STATUS, _service_on_create),
    ),
    # kube 1.33 deprecates v1 Endpoints for EndpointSlices (KEP-4974; k8s.io/api/core/v1/lifecycle.go)
    Kind(
        "",
        "v1",
        "Endpoints",
        "endpoints",
        True,
        ("ep",),
        deprecated=Deprecation(33, "discovery.k8s.io/v1 EndpointSlice"),
    ),
    # kube's strategy counts a change of the labels too: they carry the Service the slice belongs to.
    Kind(
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        "endpointslices",
        True,
        strategy=Strategy(generation=Generation(counts=None, metadata=("labels",))),
    ),
    Kind(
        "",
        "v1",
        "ResourceQuota",
        "resourcequotas",
        True,
        ("quota",),
        subresources=(_status("ResourceQuota"),),
        strategy=Strategy(_STATUS),
    ),
    Kind("", "v1", "LimitRange", "limitranges", True, ("limits",)),
    Kind("coordination.k8s.io", "v1", "Lease", "leases", True),
    Kind(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        False,
        categories=("api-extensions",),
        strategy=Strategy(generation=_CONTENT),
    ),
    Kind(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        False,
        categories=("api-extensions",),
        strategy=Strategy(generation=_CONTENT),
    ),
    Kind(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        False,
        verbs=("create",),
    ),
    Kind("authentication.k8s.io", "v1", "TokenReview", "tokenreviews", False, verbs=("create",)),
    Kind("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", False, verbs=("create",)),
    # kube-apiserver 1.28-1.31 still serve the beta, which `kubectl auth whoami` of 1.27 asks for.
    Kind(
        "authentication.k8s.io",
        "v1beta1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        False,
        verbs=("create",),
    ),
    Kind(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        False,
        verbs=("create",),
    ),
    Kind(
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        "subjectaccessreviews",
        False,
        verbs=("create",),
    ),
    Kind(
        "authorization.k8s.io",
        "v1",
        "LocalSubjectAccessReview",
        "localsubjectaccessreviews",
        True,
        verbs=("create",),
    ),
)

JOB = Kind(
    "batch",
    "v1",
    "Job",
    "jobs",
    True,
    categories=("all",),
    subresources=(_status("Job", "batch", "v1"),),
    strategy=Strategy(
        _STATUS, _job_on_create, _job_on_update, default_propagation="Orphan", generation=_SPEC
    ),
)
_SCALE = Subresource("scale", "Scale", ("get", "patch", "update"), "autoscaling", "v1")


def _empty_status_on_create(obj: Obj) -> None:
    obj["status"] = {}  # as for Jobs: an empty status, which the controller fills


def _zero_counts(*counts: str) -> Callable[[Obj], None]:
    """A new object's status holding the counts its kind's status may not omit, at zero: kube's empty
    status serializes them (they are not `omitempty`), and clients require them."""

    def on_create(obj: Obj) -> None:
        obj["status"] = dict.fromkeys(counts, 0)

    return on_create


_zero_replicas_on_create = _zero_counts("replicas")  # ReplicaSets and StatefulSets
_zero_daemon_counts_on_create = _zero_counts(
    "currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"
)


CRON_JOB = Kind(
    "batch",
    "v1",
    "CronJob",
    "cronjobs",
    True,
    ("cj",),
    ("all",),
    subresources=(_status("CronJob", "batch", "v1"),),
    # Unlike batch/v1 Jobs, a CronJob's delete takes its Jobs along by default.
    strategy=Strategy(_STATUS, _empty_status_on_create, default_propagation="Background", generation=_SPEC),
)


DEPLOYMENT = Kind(
    "apps",
    "v1",
    "Deployment",
    "deployments",
    True,
    ("deploy",),
    ("all",),
    subresources=(_status("Deployment", "apps", "v1"), _SCALE),
    # kube counts a change of the annotations too: the controller copies them to the ReplicaSets. Its
    # status strategy keeps spec and labels, so the controller writes its revision annotation through
    # `status`, which is no new generation.
    strategy=Strategy(
        _STATUS,
        _empty_status_on_create,
        default_propagation="Background",
        generation=Generation(metadata=("annotations",)),
        status_metadata=("annotations", "finalizers", "ownerReferences"),
    ),
)
REPLICA_SET = Kind(
    "apps",
    "v1",
    "ReplicaSet",
    "replicasets",
    True,
    ("rs",),
    ("all",),
    subresources=(_status("ReplicaSet", "apps", "v1"), _SCALE),
    strategy=Strategy(_STATUS, _zero_replicas_on_create, default_propagation="Background", generation=_SPEC),
)
DAEMON_SET = Kind(
    "apps",
    "v1",
    "DaemonSet",
    "daemonsets",
    True,
    ("ds",),
    ("all",),
    subresources=(_status("DaemonSet", "apps", "v1"),),
    strategy=Strategy(
        _STATUS,
        _zero_daemon_counts_on_create,
        default_propagation="Background",
        generation=Generation(template_annotation=DAEMON_SET_TEMPLATE_GENERATION),
    ),
)
STATEFUL_SET = Kind(
    "apps",
    "v1",
    "StatefulSet",
    "statefulsets",
    True,
    ("sts",),
    ("all",),
    subresources=(_status("StatefulSet", "apps", "v1"), _SCALE),
    strategy=Strategy(_STATUS, _zero_replicas_on_create, default_propagation="Background", generation=_SPEC),
)
# The DaemonSet and StatefulSet controllers' history: one per template, read by `kubectl rollout history/undo`.
CONTROLLER_REVISION = Kind("apps", "v1", "ControllerRevision", "controllerrevisions", True)
WORKLOAD_KINDS: tuple[Kind, ...] = (
    DEPLOYMENT,
    REPLICA_SET,
    DAEMON_SET,
    STATEFUL_SET,
    CONTROLLER_REVISION,
    JOB,
    CRON_JOB,
)

# Kinds answered by a handler rather than stored: create returns a computed object.
VIRTUAL_KINDS = frozenset(
    {
        "SelfSubjectAccessReview",
        "SelfSubjectRulesReview",
        "SelfSubjectReview",
        "SubjectAccessReview",
        "LocalSubjectAccessReview",
        "TokenReview",
        "Binding",
    }
)

TENANT_CONTROL_PLANE = Kind(
    "kamaji.clastix.io",
    "v1alpha1",
    "TenantControlPlane",
    "tenantcontrolplanes",
    True,
    ("tcp",),
    ("kamaji",),
    subresources=(
        _status("TenantControlPlane", "kamaji.clastix.io", "v1alpha1"),
        Subresource("scale", "Scale", ("get", "patch", "update"), "autoscaling", "v1"),
    ),
    strategy=Strategy(_STATUS, _tcp_on_create, generation=_CONTENT, status_metadata=()),
)
DATA_STORE = Kind(
    "kamaji.clastix.io",
    "v1alpha1",
    "DataStore",
    "datastores",
    False,
    categories=("kamaji",),
    subresources=(_status("DataStore", "kamaji.clastix.io", "v1alpha1"),),
    strategy=Strategy(_STATUS, generation=_CONTENT, status_metadata=()),
)
KAMAJI_KINDS: tuple[Kind, ...] = (TENANT_CONTROL_PLANE, DATA_STORE)

# The definitions of the kinds served as custom resources (Kamaji's, on the management plane), which
# the API server writes itself (`crds.py`). Read-only: the lab serves no custom resources of users, so
# a new definition is refused rather than stored and never served. kubectl lists them to learn whether
# a kind it cannot find is a custom one (`no matches for kind` then, where it failed to list them).
CUSTOM_RESOURCE_DEFINITION = Kind(
    "apiextensions.k8s.io",
    "v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
    False,
    ("crd", "crds"),
    ("api-extensions",),
    verbs=("get", "list", "watch"),
    strategy=Strategy(generation=_SPEC),
)

# Where the scale subresource reads and writes replicas, per kind (Kamaji's CRD scale paths).
SCALE_PATHS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    # apps/v1: the Scale's status.selector is spec.selector, written as a label selector string.
    "Deployment": (("spec", "replicas"), ("status", "replicas"), ("spec", "selector")),
    "ReplicaSet": (("spec", "replicas"), ("status", "replicas"), ("spec", "selector")),
    "StatefulSet": (("spec", "replicas"), ("status", "replicas"), ("spec", "selector")),
    "TenantControlPlane": (
        ("spec", "controlPlane", "deployment", "replicas"),
        ("status", "kubernetesResources", "deployment", "replicas"),
        ("status", "kubernetesResources", "deployment", "selector"),
    ),
}


def _ingress_on_create(ingress: Obj) -> None:
    ingress["status"] = {"loadBalancer": {}}


# the disruption controller fills them in
_pdb_on_create = _zero_counts("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")


POD_DISRUPTION_BUDGET = Kind(
    "policy",
    "v1",
    "PodDisruptionBudget",
    "poddisruptionbudgets",
    True,
    ("pdb",),
    subresources=(_status("PodDisruptionBudget", "policy", "v1"),),
    strategy=Strategy(_STATUS, _pdb_on_create, generation=_SPEC),
)

_RBAC = "rbac.authorization.k8s.io"
# Kinds a cluster stores for others to act on. They are served as on a cluster, so manifests and Helm
# charts that carry them apply. RBAC's objects are what the authorizer (`rbac.py`) decides by, and
# PriorityClasses are read by the Priority admission plugin; nothing acts on the others (no ingress
# controller, no NetworkPolicy enforcement, as in a kind cluster without them).
CLUSTER_CONFIG_KINDS: tuple[Kind, ...] = (
    Kind(_RBAC, "v1", "Role", "roles", True),
    Kind(_RBAC, "v1", "ClusterRole", "clusterroles", False),
    Kind(_RBAC, "v1", "RoleBinding", "rolebindings", True),
    Kind(_RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    Kind(
        "networking.k8s.io",
        "v1",
        "Ingress",
        "ingresses",
        True,
        ("ing",),
        subresources=(_status("Ingress", "networking.k8s.io", "v1"),),
        strategy=Strategy(_STATUS, _ingress_on_create, generation=_SPEC),
    ),
    Kind(
        "networking.k8s.io",
        "v1",
        "IngressClass",
        "ingressclasses",
        False,
        strategy=Strategy(generation=_SPEC),
    ),
    Kind(
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        True,
        ("netpol",),
        strategy=Strategy(generation=_SPEC),
    ),
    # Given 1 on create and never counted again: kube's strategy has no update step for it.
    Kind(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        False,
        ("pc",),
        strategy=Strategy(generation=Generation(counts=frozenset())),
    ),
    POD_DISRUPTION_BUDGET,
)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pvc_on_create(pvc: Obj) -> None:
    # kube's strategy empties the status and its defaulting gives the phase when the claim is read back.
    pvc["status"] = {"phase": "Pending"}


def _pv_on_create(pv: Obj) -> None:
    pv["status"] = {"phase": "Pending"}


def _pv_on_create_with_transition(pv: Obj) -> None:
    pv["status"] = {"phase": "Pending", "lastPhaseTransitionTime": _now()}


def _pv_on_status_update(new: Obj, old: Obj) -> None:
    """A volume's `lastPhaseTransitionTime` moves with its phase unless the writer set a new one itself."""
    status, old_status = new.setdefault("status", {}), old.get("status") or {}
    was = old_status.get("lastPhaseTransitionTime")
    given = status.get("lastPhaseTransitionTime")
    # the phase as decoding defaults it (this runs before defaulting): a write without one means Pending
    if (status.get("phase") or "Pending") == old_status.get("phase"):
        if given is None and was is not None:
            status["lastPhaseTransitionTime"] = was
    elif given is None or given == was:
        status["lastPhaseTransitionTime"] = _now()


_PV_STRATEGY = Strategy(_STATUS, _pv_on_create_with_transition, on_status_update=_pv_on_status_update)


def _pv_strategy(minor: int) -> Strategy:
    """PersistentVolumeLastPhaseTransitionTime (beta and on from 1.29, GA in 1.31) gives the time."""
    if featuregates.enabled("PersistentVolumeLastPhaseTransitionTime", minor):
        return _PV_STRATEGY
    return Strategy(_STATUS, _pv_on_create)


# Storage is served for workloads to claim: the claims' binding, provisioning and protection finalizers
# are the controllers' (controlplane), the default class and the finalizers admission's (`admission.py`).
# None of the three has a generation: kube's strategies for them keep none.
PERSISTENT_VOLUME_CLAIM = Kind(
    "",
    "v1",
    "PersistentVolumeClaim",
    "persistentvolumeclaims",
    True,
    ("pvc",),
    subresources=(_status("PersistentVolumeClaim"),),
    strategy=Strategy(_STATUS, _pvc_on_create),
)
PERSISTENT_VOLUME = Kind(
    "",
    "v1",
    "PersistentVolume",
    "persistentvolumes",
    False,
    ("pv",),
    subresources=(_status("PersistentVolume"),),
    strategy=dataclasses.replace(_PV_STRATEGY, as_of=_pv_strategy),
)
STORAGE_CLASS = Kind("storage.k8s.io", "v1", "StorageClass", "storageclasses", False, ("sc",))
STORAGE_KINDS: tuple[Kind, ...] = (PERSISTENT_VOLUME_CLAIM, PERSISTENT_VOLUME, STORAGE_CLASS)

# The container runtime handler a pod runs with, and what comes with it: the RuntimeClass admission
# plugin (`admission.py`) gives the pod the class's overhead and scheduling, the kubelet hands the handler
# to the runtime. kube's strategy (pkg/registry/node/runtimeclass/strategy.go) keeps no generation and no
# status, warns about deprecated node labels in `scheduling.nodeSelector`, and refuses an update that
# names no resourceVersion (AllowUnconditionalUpdate is false).
RUNTIME_CLASS = Kind(
    "node.k8s.io",
    "v1",
    "RuntimeClass",
    "runtimeclasses",
    False,
    strategy=Strategy(unconditional_update=False, warnings=runtime_class_warnings),
)

# Certificates for clients and kubelets: a user's request, approved or denied through `approval`, signed by
# kube-controller-manager's signer through `status` (`controlplane/csrsigning.py`). kube's strategy
# (pkg/registry/certificates/certificates/strategy.go) records the requester, keeps the spec as created,
# and lets each subresource change only its part of the status; no generation.
CERTIFICATE_SIGNING_REQUEST = Kind(
    certificates.GROUP,
    "v1",
    "CertificateSigningRequest",
    certificates.PLURAL,
    False,
    ("csr",),
    subresources=(
        _status("CertificateSigningRequest", certificates.GROUP, "v1"),
        Subresource(
            "approval", "CertificateSigningRequest", ("get", "patch", "update"), certificates.GROUP, "v1"
        ),
    ),
    strategy=Strategy(
        _STATUS,
        on_create_by=certificates.prepare_create,
        prepare_update=certificates.prepare_update,
    ),
)


def _as_of(kind: Kind, minor: int) -> Kind:
    """The kind as Kubernetes 1.`minor` serves it: without the subresources of later releases, with the
    strategy of that release."""
    served = tuple(sub for sub in kind.subresources if sub.first_minor <= minor)
    changes: dict[str, Any] = {}
    if len(served) != len(kind.subresources):
        changes["subresources"] = served
    if kind.strategy.as_of is not None:
        changes["strategy"] = kind.strategy.as_of(minor)
    return dataclasses.replace(kind, **changes) if changes else kind


def kind_table(extra: Sequence[Kind] = (), minor: int | None = None) -> KindTable:
    """The built-in kinds plus `extra` (e.g. `KAMAJI_KINDS` on the management plane), with the
    subresources and strategies of Kubernetes 1.`minor` (the newest without a release)."""
    kinds = [
        *BUILTIN_KINDS,
        *WORKLOAD_KINDS,
        *CLUSTER_CONFIG_KINDS,
        *STORAGE_KINDS,
        RUNTIME_CLASS,
        CERTIFICATE_SIGNING_REQUEST,
        CUSTOM_RESOURCE_DEFINITION,
        *extra,
    ]
    return KindTable(kinds if minor is None else [_as_of(kind, minor) for kind in kinds])


def copy_obj(obj: Obj) -> Obj:
    """A deep copy of a JSON object; cached objects are shared and must never be mutated."""
    return copy.deepcopy(obj)
