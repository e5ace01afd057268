"""The structural schemas of Kamaji's CRDs, `TenantControlPlane` and `DataStore`, as the management plane
publishes and enforces them.

Kamaji's chart installs both kinds as CRDs whose `openAPIV3Schema` controller-gen derives from Kamaji's
Go types (`api/v1alpha1`, read at `ddbabd8`). Field names, JSON types, enums, defaults and required
fields here follow those types; the Kubernetes types Kamaji embeds (a `Container`, an `Affinity`, a
`DeploymentStrategy` …) are the lab's own schemas of them (`schemas.py`), inlined, since a CRD's schema
refers to nothing outside itself. The descriptions are the lab's. With the schema the API server prunes
unknown fields (refusing them under `fieldValidation=Strict`, kubectl's default), refuses wrong JSON
types with 422 and `kubectl explain tcp.spec.controlPlane` walks it, as against Kamaji.

Two additions of the lab are marked where they are made: the `sqlite` DataStore driver (the lab's own
store) and `status.kubernetesResources.version.message` (why a control plane is not Ready).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tenantgpu.apiserver import schemas
from tenantgpu.apiserver.defaults import (
    KONNECTIVITY_AGENT,
    KONNECTIVITY_SERVER,
    TCP_ADMISSION_CONTROLLERS,
    TCP_DEPLOYMENT,
)
from tenantgpu.apiserver.fieldversions import FIRST_MINOR, trim_to
from tenantgpu.apiserver.installcache import cache_path, read_json, write_json

__all__ = ["crd_schema", "kamaji_kind_schemas", "kamaji_schemas_cache", "object_meta_schema"]

Schema = dict[str, Any]
GROUP = "kamaji.clastix.io"
VERSION = "v1alpha1"
_REF = "#/components/schemas/"
_CORE = "io.k8s.api.core.v1."
_APPS = "io.k8s.api.apps.v1."
_NETWORKING = "io.k8s.api.networking.v1."
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

STRING: Schema = {"type": "string"}
BOOLEAN: Schema = {"type": "boolean"}
INT32: Schema = {"type": "integer", "format": "int32"}
INT64: Schema = {"type": "integer", "format": "int64"}
TIME: Schema = {"type": "string", "format": "date-time"}
BYTES: Schema = {"type": "string", "format": "byte"}
INT_OR_STRING: Schema = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "x-kubernetes-int-or-string": True,
}
ANY: Schema = {"x-kubernetes-preserve-unknown-fields": True}

# The patterns the CRD carries: apimachinery's (Quantity, metav1.Condition) and Gateway API's (the
# ParentReference and status Kamaji embeds). kube-openapi matches them as Go regular expressions.
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = rf"{_DNS_LABEL}(\.{_DNS_LABEL})*"
QUANTITY_PATTERN = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
_CONDITION_TYPE = rf"^({_DNS_SUBDOMAIN}/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
_CONDITION_REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
_GATEWAY_CONTROLLER = rf"^{_DNS_SUBDOMAIN}\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$"
_GATEWAY_HOSTNAME = rf"^(\*\.)?{_DNS_SUBDOMAIN}$"
# A quantity as controller-gen writes resource.Quantity into a CRD: an integer or a string of that form.
QUANTITY: Schema = {**INT_OR_STRING, "pattern": QUANTITY_PATTERN}


def obj(properties: Mapping[str, Schema], *, required: tuple[str, ...] = (), **extra: Any) -> Schema:
    schema: Schema = {"type": "object", "properties": dict(properties), **extra}
    if required:
        schema["required"] = list(required)
    return schema


def array(items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items, **extra}


def enum(*values: str, **extra: Any) -> Schema:
    return {"type": "string", "enum": list(values), **extra}


def described(text: str, schema: Schema) -> Schema:
    return {"description": text, **schema}


def ref(component: str) -> Schema:
    """One of the Kubernetes types Kamaji embeds, inlined by `_inline`."""
    return {"$ref": _REF + component}


STRING_MAP: Schema = {"type": "object", "additionalProperties": STRING}
STRINGS: Schema = array(STRING)


def _metadata() -> Schema:
    return obj({"annotations": STRING_MAP, "labels": STRING_MAP})


def _probe() -> Schema:
    at_least = {"type": "integer", "format": "int32"}
    return obj(
        {
            "failureThreshold": {**at_least, "minimum": 1},
            "initialDelaySeconds": {**at_least, "minimum": 0},
            "periodSeconds": {**at_least, "minimum": 1},
            "successThreshold": {**at_least, "minimum": 1},
            "timeoutSeconds": {**at_least, "minimum": 1},
        }
    )


def _probe_set() -> Schema:
    return obj({"liveness": _probe(), "readiness": _probe(), "startup": _probe()})


def _per_component(item: Schema, *, kine: bool = False) -> Schema:
    fields = {"apiServer": item, "controllerManager": item, "scheduler": item}
    if kine:
        fields["kine"] = item
    return obj(fields)


def _parent_reference() -> Schema:
    # Gateway API's ParentReference, as Kamaji embeds it.
    return obj(
        {
            "group": {
                **STRING,
                "default": "gateway.networking.k8s.io",
                "maxLength": 253,
                "pattern": rf"^$|^{_DNS_SUBDOMAIN}$",
            },
            "kind": {
                **STRING,
                "default": "Gateway",
                "minLength": 1,
                "maxLength": 63,
                "pattern": r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$",
            },
            "name": {**STRING, "minLength": 1, "maxLength": 253},
            "namespace": {**STRING, "minLength": 1, "maxLength": 63, "pattern": f"^{_DNS_LABEL}$"},
            "port": {**INT32, "minimum": 1, "maximum": 65535},
            "sectionName": {**STRING, "minLength": 1, "maxLength": 253, "pattern": f"^{_DNS_SUBDOMAIN}$"},
        },
        required=("name",),
    )


def _condition() -> Schema:
    # apimachinery's metav1.Condition.
    return obj(
        {
            "lastTransitionTime": TIME,
            "message": {**STRING, "maxLength": 32768},
            "observedGeneration": {**INT64, "minimum": 0},
            "reason": {**STRING, "minLength": 1, "maxLength": 1024, "pattern": _CONDITION_REASON},
            "status": enum("True", "False", "Unknown"),
            "type": {**STRING, "maxLength": 316, "pattern": _CONDITION_TYPE},
        },
        required=("lastTransitionTime", "message", "reason", "status", "type"),
    )


def _conditions() -> Schema:
    return array(_condition(), **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})


# Kamaji's enum of admission plugins: the ones it enables by default (the defaulting's list) and the
# others, in the CRD's (alphabetical) order.
_ADMISSION_CONTROLLERS = sorted(
    [
        *TCP_ADMISSION_CONTROLLERS,
        "AlwaysAdmit",
        "AlwaysDeny",
        "AlwaysPullImages",
        "DenyEscalatingExec",
        "DenyExecOnPrivileged",
        "DenyServiceExternalIPs",
        "EventRateLimit",
        "ExtendedResourceToleration",
        "ImagePolicyWebhook",
        "LimitPodHardAntiAffinityTopology",
        "NamespaceAutoProvision",
        "NamespaceExists",
        "NodeRestriction",
        "OwnerReferencesPermissionEnforcement",
        "PersistentVolumeLabel",
        "PodNodeSelector",
        "PodSecurity",
        "PodSecurityPolicy",
        "PodTolerationRestriction",
        "SecurityContextDeny",
    ]
)
_ADDRESS_TYPES = ("Hostname", "InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS")


def _deployment() -> Schema:
    resources = ref(_CORE + "ResourceRequirements")
    return described(
        "The Deployment that runs the tenant's control plane (kube-apiserver, controller-manager, "
        "scheduler) on the management cluster.",
        obj(
            {
                "additionalContainers": array(ref(_CORE + "Container")),
                "additionalInitContainers": array(ref(_CORE + "Container")),
                "additionalMetadata": _metadata(),
                "additionalVolumeMounts": _per_component(array(ref(_CORE + "VolumeMount"))),
                "additionalVolumes": array(ref(_CORE + "Volume")),
                "affinity": ref(_CORE + "Affinity"),
                "automountServiceAccountToken": BOOLEAN,
                "containerSecurityContexts": _per_component(ref(_CORE + "SecurityContext")),
                "extraArgs": _per_component(STRINGS, kine=True),
                "nodeSelector": STRING_MAP,
                "podAdditionalMetadata": _metadata(),
                "podSecurityContext": ref(_CORE + "PodSecurityContext"),
                "probes": obj(
                    {
                        "apiServer": _probe_set(),
                        "controllerManager": _probe_set(),
                        "liveness": _probe(),
                        "readiness": _probe(),
                        "scheduler": _probe_set(),
                        "startup": _probe(),
                    }
                ),
                "registrySettings": obj(
                    {
                        "apiServerImage": {**STRING, "default": "kube-apiserver"},
                        "controllerManagerImage": {**STRING, "default": "kube-controller-manager"},
                        "registry": {**STRING, "default": "registry.k8s.io"},
                        "schedulerImage": {**STRING, "default": "kube-scheduler"},
                        "tagSuffix": STRING,
                    },
                    default=dict(TCP_DEPLOYMENT["registrySettings"]),
                ),
                "replicas": described(
                    "How many instances of the control plane run; 0 puts the tenant to sleep.",
                    {**INT32, "default": 2},
                ),
                "resources": _per_component(resources, kine=True),
                "runtimeClassName": STRING,
                "serviceAccountName": {**STRING, "default": "default"},
                "strategy": {
                    **ref(_APPS + "DeploymentStrategy"),
                    "default": copy.deepcopy(TCP_DEPLOYMENT["strategy"]),
                },
                "tolerations": array(ref(_CORE + "Toleration")),
                "topologySpreadConstraints": array(ref(_CORE + "TopologySpreadConstraint")),
            }
        ),
    )


def _control_plane() -> Schema:
    return described(
        "How the tenant's control plane runs and is reached.",
        obj(
            {
                "deployment": _deployment(),
                "gateway": obj(
                    {
                        "additionalMetadata": _metadata(),
                        "hostname": {
                            **STRING,
                            "minLength": 1,
                            "maxLength": 253,
                            "pattern": _GATEWAY_HOSTNAME,
                        },
                        "parentRefs": array(_parent_reference()),
                    }
                ),
                "ingress": obj(
                    {"additionalMetadata": _metadata(), "hostname": STRING, "ingressClassName": STRING}
                ),
                "service": described(
                    "The Service in front of the tenant's API server.",
                    obj(
                        {
                            "additionalMetadata": _metadata(),
                            "additionalPorts": array(
                                obj(
                                    {
                                        "appProtocol": STRING,
                                        "name": STRING,
                                        "port": INT32,
                                        "protocol": enum("TCP", "UDP", "SCTP", default="TCP"),
                                        "targetPort": INT_OR_STRING,
                                    },
                                    required=("name", "port", "targetPort"),
                                )
                            ),
                            "allocateLoadBalancerNodePorts": BOOLEAN,
                            "serviceType": enum("ClusterIP", "NodePort", "LoadBalancer"),
                        },
                        required=("serviceType",),
                    ),
                ),
            },
            required=("service",),
        ),
    )


def _kubernetes() -> Schema:
    return described(
        "The Kubernetes version the tenant runs and how its kubelets are configured.",
        obj(
            {
                "admissionControllers": array(
                    enum(*_ADMISSION_CONTROLLERS), default=list(TCP_ADMISSION_CONTROLLERS)
                ),
                "kubelet": obj(
                    {
                        "cgroupfs": enum("systemd", "cgroupfs"),
                        "configurationJSONPatches": array(
                            obj(
                                {
                                    "from": STRING,
                                    "op": enum("add", "remove", "replace", "move", "copy", "test"),
                                    "path": STRING,
                                    "value": ANY,
                                },
                                required=("op", "path"),
                            )
                        ),
                        "preferredAddressTypes": array(
                            enum(*_ADDRESS_TYPES),
                            default=["InternalIP", "ExternalIP", "Hostname"],
                            minItems=1,
                            **{"x-kubernetes-list-type": "set"},
                        ),
                    }
                ),
                "version": described("The Kubernetes version, such as v1.31.4.", STRING),
            },
            required=("kubelet", "version"),
        ),
    )


def _network_profile() -> Schema:
    return described(
        "Addresses, ports and CIDRs of the tenant cluster.",
        obj(
            {
                "address": STRING,
                "advertiseAddress": STRING,
                "allowAddressAsExternalIP": BOOLEAN,
                "certSANs": STRINGS,
                "clusterDomain": {**STRING, "default": "cluster.local", "pattern": r".*\..*"},
                "dnsServiceIPs": array(STRING, maxItems=8),
                "loadBalancerClass": {**STRING, "minLength": 1},
                "loadBalancerSourceRanges": array(STRING, maxItems=16),
                "podCidr": {**STRING, "default": "10.244.0.0/16"},
                "podCidrs": array(STRING, minItems=1, maxItems=2),
                "port": described("The API server's port.", {**INT32, "default": 6443}),
                "serviceCidr": {**STRING, "default": "10.96.0.0/16"},
                "serviceCidrs": array(STRING, minItems=1, maxItems=2),
            }
        ),
    )


def _addons() -> Schema:
    image = obj({"imageRepository": STRING, "imageTag": STRING})
    return described(
        "The add-ons Kamaji installs into the tenant: CoreDNS, kube-proxy and the Konnectivity tunnel.",
        obj(
            {
                "coreDNS": image,
                "konnectivity": obj(
                    {
                        "agent": obj(
                            {
                                "extraArgs": STRINGS,
                                "hostNetwork": {**BOOLEAN, "default": False},
                                "image": {
                                    **STRING,
                                    "default": "registry.k8s.io/kas-network-proxy/proxy-agent",
                                },
                                "mode": enum("DaemonSet", "Deployment", default="DaemonSet"),
                                "replicas": INT32,
                                "tolerations": {
                                    **array(ref(_CORE + "Toleration")),
                                    "default": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
                                },
                                "version": STRING,
                            },
                            default=dict(KONNECTIVITY_AGENT),
                        ),
                        "server": obj(
                            {
                                "extraArgs": STRINGS,
                                "image": {
                                    **STRING,
                                    "default": "registry.k8s.io/kas-network-proxy/proxy-server",
                                },
                                "port": INT32,
                                "resources": ref(_CORE + "ResourceRequirements"),
                                "securityContext": ref(_CORE + "SecurityContext"),
                                "version": STRING,
                            },
                            required=("port",),
                            default=dict(KONNECTIVITY_SERVER),
                        ),
                    }
                ),
                "kubeProxy": image,
            }
        ),
    )


def _tcp_spec() -> Schema:
    return described(
        "The tenant control plane Kamaji runs: its datastore, control plane, Kubernetes version, network and "
        "add-ons.",
        obj(
            {
                "addons": _addons(),
                "controlPlane": _control_plane(),
                "dataStore": described(
                    "The DataStore that keeps the tenant's state; empty for the default.", STRING
                ),
                "dataStoreOverrides": array(obj({"dataStore": STRING, "resource": STRING})),
                "dataStoreSchema": STRING,
                "dataStoreUsername": STRING,
                "kubernetes": _kubernetes(),
                "networkProfile": _network_profile(),
                "writePermissions": obj(
                    {"blockCreation": BOOLEAN, "blockDeletion": BOOLEAN, "blockUpdate": BOOLEAN}
                ),
            },
            required=("controlPlane", "kubernetes"),
        ),
    )


def _checked(*, secret: bool = True, updated: bool = True) -> Schema:
    fields: dict[str, Schema] = {"checksum": STRING}
    if updated:
        fields["lastUpdate"] = TIME
    if secret:
        fields["secretName"] = STRING
    return obj(fields)


def _named(*extra: str) -> Schema:
    fields = {"lastUpdate": TIME, "name": STRING, "namespace": STRING}
    fields.update({name: STRING for name in extra})
    return obj(fields)


def _service_status() -> Schema:
    return obj(
        {
            "conditions": _conditions(),
            "loadBalancer": ref(_CORE + "LoadBalancerStatus"),
            "name": STRING,
            "namespace": STRING,
            "port": INT32,
        },
        required=("name", "namespace", "port"),
    )


def _gateway_status() -> Schema:
    return obj(
        {
            "accessPoints": array(
                obj(
                    {
                        "port": INT32,
                        "type": {
                            **STRING,
                            "minLength": 1,
                            "maxLength": 253,
                            "pattern": rf"^Hostname|IPAddress|NamedAddress|{_DNS_SUBDOMAIN}\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$",
                        },
                        "urls": STRINGS,
                        "value": STRING,
                    },
                    required=("port", "type", "value"),
                )
            ),
            "parents": array(
                obj(
                    {
                        "conditions": {**_conditions(), "minItems": 1, "maxItems": 8},
                        "controllerName": {
                            **STRING,
                            "minLength": 1,
                            "maxLength": 253,
                            "pattern": _GATEWAY_CONTROLLER,
                        },
                        "parentRef": _parent_reference(),
                    },
                    required=("conditions", "controllerName", "parentRef"),
                ),
                maxItems=32,
            ),
            "routeRef": obj({"name": {**STRING, "default": ""}}),
        },
        required=("parents",),
    )


def _tcp_status() -> Schema:
    enabled = obj({"enabled": BOOLEAN, "lastUpdate": TIME}, required=("enabled",))
    deployment_status = obj(
        {
            "availableReplicas": INT32,
            "collisionCount": INT32,
            "conditions": array(ref(_APPS + "DeploymentCondition")),
            "lastUpdate": TIME,
            "name": STRING,
            "namespace": STRING,
            "observedGeneration": INT64,
            "readyReplicas": INT32,
            "replicas": INT32,
            "selector": STRING,
            "terminatingReplicas": INT32,
            "unavailableReplicas": INT32,
            "updatedReplicas": INT32,
        },
        required=("name", "namespace", "selector"),
    )
    return described(
        "What Kamaji observed of the tenant control plane; written by the controller.",
        obj(
            {
                "addons": obj(
                    {
                        "coreDNS": enabled,
                        "konnectivity": obj(
                            {
                                "agent": _named("mode"),
                                "certificate": _checked(),
                                "clusterrolebinding": _named(),
                                "configMap": obj({"checksum": STRING, "name": STRING}),
                                "enabled": BOOLEAN,
                                "gateway": _gateway_status(),
                                "kubeconfig": _checked(),
                                "sa": _named(),
                                "service": _service_status(),
                            },
                            required=("enabled",),
                        ),
                        "kubeProxy": enabled,
                    }
                ),
                "certificates": obj(
                    {
                        "apiServer": _checked(),
                        "apiServerKubeletClient": _checked(),
                        "ca": _checked(),
                        "etcd": obj({"apiServer": _checked(), "ca": _checked()}),
                        "frontProxyCA": _checked(),
                        "frontProxyClient": _checked(),
                        "sa": _checked(),
                    }
                ),
                "controlPlaneEndpoint": STRING,
                "kubeadmPhase": obj({"bootstrapToken": _checked(secret=False)}, required=("bootstrapToken",)),
                "kubeadmconfig": obj({"checksum": STRING, "configmapName": STRING, "lastUpdate": TIME}),
                "kubeconfig": obj(
                    {"admin": _checked(), "controllerManager": _checked(), "scheduler": _checked()}
                ),
                "kubernetesResources": obj(
                    {
                        "deployment": deployment_status,
                        "gateway": _gateway_status(),
                        "ingress": obj(
                            {
                                "loadBalancer": ref(_NETWORKING + "IngressLoadBalancerStatus"),
                                "name": STRING,
                                "namespace": STRING,
                            },
                            required=("name", "namespace"),
                        ),
                        "service": _service_status(),
                        "version": obj(
                            {
                                # The lab's addition: why the control plane is not Ready.
                                "message": STRING,
                                "status": enum(
                                    "Unknown",
                                    "Provisioning",
                                    "CertificateAuthorityRotating",
                                    "Upgrading",
                                    "Migrating",
                                    "Ready",
                                    "NotReady",
                                    "Sleeping",
                                    "WriteLimited",
                                    default="Provisioning",
                                ),
                                "version": STRING,
                            }
                        ),
                    }
                ),
                "observedGeneration": INT64,
                "storage": obj(
                    {
                        "certificate": _checked(),
                        "config": _checked(updated=False),
                        "dataStoreName": STRING,
                        "driver": STRING,
                        "setup": obj(
                            {"checksum": STRING, "lastUpdate": TIME, "schema": STRING, "user": STRING}
                        ),
                    }
                ),
            }
        ),
    )


def _content_or_secret() -> Schema:
    return obj(
        {
            "content": BYTES,
            "secretReference": obj(
                {"keyPath": {**STRING, "minLength": 1}, "name": STRING, "namespace": STRING},
                required=("keyPath",),
                **{"x-kubernetes-map-type": "atomic"},
            ),
        }
    )


# Kamaji's drivers, and the lab's own store beside them.
DATASTORE_DRIVERS = ("etcd", "MySQL", "PostgreSQL", "NATS", "sqlite")


def _datastore_spec() -> Schema:
    pair = obj({"certificate": _content_or_secret(), "privateKey": _content_or_secret()})
    return described(
        "A store tenant control planes keep their state in: its driver, endpoints and credentials.",
        obj(
            {
                "basicAuth": obj(
                    {"password": _content_or_secret(), "username": _content_or_secret()},
                    required=("password", "username"),
                ),
                "driver": enum(*DATASTORE_DRIVERS),
                "endpoints": array(STRING, minItems=1),
                "tlsConfig": obj(
                    {
                        "certificateAuthority": {**pair, "required": ["certificate"]},
                        "clientCertificate": {**pair, "required": ["certificate", "privateKey"]},
                    },
                    required=("certificateAuthority",),
                ),
            },
            required=("driver", "endpoints"),
        ),
    )


def _datastore_status() -> Schema:
    return described(
        "Whether the store can be used, and which tenant control planes use it.",
        obj(
            {
                "conditions": array(_condition()),
                "observedGeneration": INT64,
                "ready": BOOLEAN,
                "usedBy": STRINGS,
            },
            required=("ready",),
        ),
    )


def _root(description: str, spec: Schema, status: Schema) -> Schema:
    return {
        "description": description,
        "type": "object",
        "properties": {
            "apiVersion": described(
                "The versioned schema of this object: kamaji.clastix.io/v1alpha1.", STRING
            ),
            "kind": described("The REST resource this object represents.", STRING),
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }


_ROOTS = {
    "TenantControlPlane": lambda: _root(
        "A Kubernetes control plane Kamaji runs on the management cluster for one tenant.",
        _tcp_spec(),
        _tcp_status(),
    ),
    "DataStore": lambda: _root(
        "A store for the state of tenant control planes.", _datastore_spec(), _datastore_status()
    ),
}


# The release of the k8s.io/api Kamaji's CRD was generated from (v0.36 at ddbabd8): the fields of the
# lab's core schemas (the client's models, a newer Kubernetes) that it does not have yet, Kamaji prunes.
KAMAJI_API_MINOR = 36


@functools.cache
def _core_components() -> Mapping[str, Mapping[str, Any]]:
    """The lab's schemas of the Kubernetes types Kamaji embeds (and all they refer to)."""
    found: dict[str, Mapping[str, Any]] = {}
    for group, version, kind in (
        ("", "v1", "Pod"),
        ("", "v1", "Service"),
        ("apps", "v1", "Deployment"),
        ("networking.k8s.io", "v1", "Ingress"),
    ):
        kinds = schemas.kind_schemas(group, version, kind)
        if kinds is not None:
            found.update(kinds.components)
    # kube's OpenAPI publishes a quantity as a bare string-or-number; in a CRD it is structural.
    found[schemas.QUANTITY] = QUANTITY
    trim_to(found, KAMAJI_API_MINOR)
    return found


def _inline(schema: Any, components: Mapping[str, Mapping[str, Any]], seen: tuple[str, ...] = ()) -> Any:
    """`schema` with every `$ref` replaced by the component it names, as a CRD's schema spells it out."""
    if isinstance(schema, list):
        return [_inline(item, components, seen) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    target = schema.get("$ref") or next(
        (s["$ref"] for s in schema.get("allOf") or () if isinstance(s, Mapping) and "$ref" in s), None
    )
    if target is not None:
        name = target[len(_REF) :]
        rest = {k: v for k, v in schema.items() if k not in ("$ref", "allOf")}
        component = components.get(name)
        if component is None or name in seen:  # unknown, or a cycle: leave it open
            return {**rest, **ANY}
        if name == _OBJECT_META and seen:
            # controller-gen writes an embedded ObjectMeta (a PVC template's) as a bare object, which
            # prunes everything in it; only the root's metadata is pruned against ObjectMeta.
            return {**rest, "type": "object"}
        inner = {k: v for k, v in component.items() if k not in ("x-kubernetes-group-version-kind",)}
        merged = _inline(inner, components, (*seen, name))
        if "description" in rest:
            merged = {**merged, "description": rest["description"]}
        return {**merged, **{k: v for k, v in rest.items() if k != "description"}}
    out = {k: _inline(v, components, seen) for k, v in schema.items()}
    if out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        # A free-form object of the lab's schemas (an `object` in the client's models, such as FieldsV1).
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _raw() -> dict[str, Schema]:
    return {kind: build() for kind, build in _ROOTS.items()}


def kamaji_schemas_cache(raw: Mapping[str, Schema] | None = None) -> Path:
    """Where this installation keeps the inlined schemas: named by the client's version (whose models
    give the embedded types) and a digest of Kamaji's part, so an edited schema is derived anew."""
    # The quantity and the trimmed fields change the core schemas, so they are part of what the name covers.
    text = json.dumps(
        [raw if raw is not None else _raw(), QUANTITY, FIRST_MINOR, KAMAJI_API_MINOR], sort_keys=True
    )
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return cache_path(f"kamaji-schemas-{schemas.models_version() or 'unknown'}-{digest}.json")


@functools.cache
def _inlined_all() -> Mapping[str, Mapping[str, Any]]:
    # Inlining needs the core schemas, which import the client's models (most of a second): done once
    # per installation, at `make install`, and read back by every later process.
    raw = _raw()
    path = kamaji_schemas_cache(raw)
    found = read_json(path)
    if isinstance(found, dict) and set(found) == {*_ROOTS, _OBJECT_META}:
        return found
    components = _core_components()
    inlined: dict[str, Any] = {}
    for kind, root in raw.items():
        schema = _inline(root, components)
        # The root's metadata stays a bare object, as in every CRD; ObjectMeta's own schema prunes it.
        schema["properties"]["metadata"] = {"type": "object"}
        inlined[kind] = schema
    inlined[_OBJECT_META] = _inline(ref(_OBJECT_META), components)
    write_json(path, inlined)
    return inlined


def crd_schema(group: str, version: str, kind: str) -> Mapping[str, Any] | None:
    """The `openAPIV3Schema` of one of Kamaji's kinds (shared and read-only), or None for any other kind."""
    if (group, version) != (GROUP, VERSION) or kind not in _ROOTS:
        return None
    return _inlined_all()[kind]


def object_meta_schema() -> Mapping[str, Any]:
    """ObjectMeta's schema, inlined: what a custom resource's metadata is pruned against."""
    return _inlined_all()[_OBJECT_META]


def kamaji_kind_schemas(group: str, version: str, kind: str) -> schemas.KindSchemas | None:
    """The kind's published OpenAPI v3 component (the CRD's schema, tagged with its GVK), or None."""
    schema = crd_schema(group, version, kind)
    if schema is None:
        return None
    name = schemas.schema_name(group, version, kind)
    component = {
        **copy.deepcopy(dict(schema)),
        "x-kubernetes-group-version-kind": [{"group": group, "version": version, "kind": kind}],
    }
    return schemas.KindSchemas(name, "", {name: component})
