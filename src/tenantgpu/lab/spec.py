"""The lab spec: a `kind: Lab` YAML file validated into typed models, with errors that name field and line."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tenantgpu.gpushare.config import SharingConfig

API_VERSION = "tenantgpu.io/v1alpha1"
DEFAULT_KUBERNETES_VERSION = "v1.31.4"

# UUIDs that the lab derives are stable across runs: uuid5 of this namespace and "<node>/<index>".
_GPU_UUID_NAMESPACE = uuid.UUID("6f1d2c59-7a0e-4c1e-9a53-2b8f3e7d9c41")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_K8S_VERSION = re.compile(r"^v1\.(\d+)\.(\d+)$")


class LabSpecError(Exception):
    """A lab file that cannot be used; the message names the file, line and field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


def _dns_label(value: str, what: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError(f"{what} {value!r} must be a DNS label (lower-case letters, digits and '-', ≤ 63)")
    return value


class GPUSpec(_Model):
    """One or more identical GPUs on a worker, as NVML would report them."""

    type: str = Field(min_length=1, description="model string as NVML reports it, e.g. 'NVIDIA L4'")
    memory: int = Field(gt=0, description="device memory in MiB, e.g. 23034 for an L4")
    count: int = Field(default=1, ge=1, le=64)
    numa: int = Field(default=0, ge=0)
    uuids: list[str] | None = Field(default=None, description="explicit GPU UUIDs, one per GPU")
    health: bool = True

    @model_validator(mode="after")
    def _uuids_match_count(self) -> GPUSpec:
        if self.uuids is not None and len(self.uuids) != self.count:
            raise ValueError(f"uuids lists {len(self.uuids)} UUIDs but count is {self.count}")
        return self


class WorkerSpec(_Model):
    """A worker node of a tenant."""

    name: str
    cpu: str = "32"
    memory: str = "256Gi"
    pods: int = Field(default=110, ge=1)
    labels: dict[str, str] = Field(default_factory=dict)
    gpus: list[GPUSpec] = Field(default_factory=list)
    runtime_handlers: list[str] | None = Field(
        default=None,
        alias="runtimeHandlers",
        description="the container runtime's handlers a RuntimeClass may name; default runc, and nvidia "
        "on a worker with GPUs (as the NVIDIA container toolkit configures containerd)",
    )

    @field_validator("runtime_handlers")
    @classmethod
    def _handlers(cls, value: list[str] | None) -> list[str] | None:
        for handler in value or ():
            _dns_label(handler, "runtime handler")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
            raise ValueError(f"worker name {value!r} must be a DNS subdomain (lower-case, digits, '-', '.')")
        return value

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str) -> str:
        if not _QUANTITY.match(str(value)):
            raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 32, 500m, 256Gi)")
        return str(value)

    def devices(self) -> list[GPUDevice]:
        """The worker's GPUs one by one, with their NVML index and a UUID (given or derived)."""
        result: list[GPUDevice] = []
        for spec in self.gpus:
            for i in range(spec.count):
                index = len(result)
                gpu_uuid = spec.uuids[i] if spec.uuids else derive_gpu_uuid(self.name, index)
                result.append(GPUDevice(gpu_uuid, index, spec.type, spec.memory, spec.numa, spec.health))
        return result


class QuotaSpec(_Model):
    """A namespace GPU quota in HAMi's terms: `limits.nvidia.com/gpumem` and `limits.nvidia.com/gpucores`."""

    namespace: str
    gpumem: int | None = Field(default=None, ge=0, description="MiB summed over the namespace's GPU slices")
    gpucores: int | None = Field(default=None, ge=0, description="percent summed over the namespace's slices")

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        return _dns_label(value, "namespace")

    @model_validator(mode="after")
    def _something_limited(self) -> QuotaSpec:
        if self.gpumem is None and self.gpucores is None:
            raise ValueError("a quota needs gpumem, gpucores or both")
        return self


class TenantSpec(_Model):
    """A tenant: its own control plane, its workers and its quotas."""

    name: str
    workers: list[WorkerSpec] = Field(default_factory=list)
    quotas: list[QuotaSpec] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _dns_label(value, "tenant name")


class HamiSpec(_Model):
    """HAMi's scheduler and device settings, named as in HAMi's Helm chart values."""

    node_scheduler_policy: Literal["binpack", "spread"] = Field("binpack", alias="nodeSchedulerPolicy")
    gpu_scheduler_policy: Literal["spread", "binpack", "mutex", "topology-aware"] = Field(
        "spread", alias="gpuSchedulerPolicy"
    )
    device_split_count: int = Field(10, ge=1, le=1000, alias="deviceSplitCount")
    default_memory: int = Field(0, ge=0, alias="defaultMemory")
    default_cores: int = Field(0, ge=0, le=100, alias="defaultCores")
    default_gpu_num: int = Field(1, ge=0, alias="defaultGPUNum")
    device_memory_scaling: float = Field(1.0, gt=0, alias="deviceMemoryScaling")
    device_core_scaling: float = Field(1.0, gt=0, alias="deviceCoreScaling")
    resource_name: str = Field("nvidia.com/gpu", alias="resourceName")
    resource_mem: str = Field("nvidia.com/gpumem", alias="resourceMem")
    resource_mem_percentage: str = Field("nvidia.com/gpumem-percentage", alias="resourceMemPercentage")
    resource_cores: str = Field("nvidia.com/gpucores", alias="resourceCores")
    resource_priority: str = Field("nvidia.com/priority", alias="resourcePriority")
    # The chart's `devicePlugin.runtimeClassName` / `createRuntimeClass`: the class HAMi's webhook names on
    # GPU pods and its device plugin runs under, and whether the chart creates it (handler `nvidia`).
    runtime_class_name: str = Field("", alias="runtimeClassName")
    create_runtime_class: bool = Field(False, alias="createRuntimeClass")

    @field_validator("runtime_class_name")
    @classmethod
    def _runtime_class(cls, value: str) -> str:
        if value and (len(value) > 253 or not _DNS_SUBDOMAIN.match(value)):
            raise ValueError(
                f"runtimeClassName {value!r} must be a DNS subdomain (lower-case, digits, '-', '.')"
            )
        return value

    @model_validator(mode="after")
    def _runtime_class_created(self) -> HamiSpec:
        # Without a GPU Operator nothing else would create the class, and every GPU pod HAMi's webhook
        # names it on, and HAMi's own device plugin, would be refused by the RuntimeClass admission plugin.
        if self.runtime_class_name and not self.create_runtime_class:
            raise ValueError(
                f"runtimeClassName {self.runtime_class_name!r} needs createRuntimeClass: true "
                "(the lab has no GPU Operator to create that RuntimeClass)"
            )
        return self

    def sharing(self) -> SharingConfig:
        return SharingConfig(
            node_policy=self.node_scheduler_policy,
            gpu_policy=self.gpu_scheduler_policy,
            resource_count_name=self.resource_name,
            resource_memory_name=self.resource_mem,
            resource_memory_percentage_name=self.resource_mem_percentage,
            resource_core_name=self.resource_cores,
            resource_priority_name=self.resource_priority,
            device_split_count=self.device_split_count,
            default_memory=self.default_memory,
            default_cores=self.default_cores,
            default_gpu_num=self.default_gpu_num,
            device_memory_scaling=self.device_memory_scaling,
            device_core_scaling=self.device_core_scaling,
            runtime_class_name=self.runtime_class_name,
        )


class DatastoreSpec(_Model):
    """Where every tenant's objects live; one store shared by all tenants, as Kamaji shares one etcd."""

    driver: Literal["sqlite"] = "sqlite"


class LabBody(_Model):
    kubernetes_version: str = Field(DEFAULT_KUBERNETES_VERSION, alias="kubernetesVersion")
    datastore: DatastoreSpec = Field(default_factory=DatastoreSpec)
    hami: HamiSpec = Field(default_factory=HamiSpec)  # type: ignore[arg-type]
    tenants: list[TenantSpec] = Field(min_length=1)

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, value: str) -> str:
        match = _K8S_VERSION.match(value)
        if not match or not 27 <= int(match.group(1)) <= 33:
            raise ValueError(
                f"{value!r} must look like v1.MINOR.PATCH with MINOR from 27 to 33 (kubectl's range)"
            )
        return value

    @model_validator(mode="after")
    def _unique_names(self) -> LabBody:
        _require_unique([t.name for t in self.tenants], "tenant")
        # GPU UUIDs derive from the worker name, so worker names must be unique across the whole lab.
        _require_unique([w.name for t in self.tenants for w in t.workers], "worker")
        _require_unique([d.uuid for t in self.tenants for w in t.workers for d in w.devices()], "GPU UUID")
        for tenant in self.tenants:
            _require_unique([q.namespace for q in tenant.quotas], f"quota namespace in tenant {tenant.name}")
        return self


class LabMetadata(_Model):
    name: str = "lab"


class Lab(_Model):
    """A whole lab: the management plane's settings and every tenant with its workers and GPUs."""

    api_version: Literal["tenantgpu.io/v1alpha1"] = Field(API_VERSION, alias="apiVersion")
    kind: Literal["Lab"]
    metadata: LabMetadata = Field(default_factory=LabMetadata)
    spec: LabBody

    @property
    def sharing(self) -> SharingConfig:
        return self.spec.hami.sharing()

    @property
    def tenants(self) -> list[TenantSpec]:
        return self.spec.tenants

    def tenant(self, name: str) -> TenantSpec:
        for tenant in self.spec.tenants:
            if tenant.name == name:
                return tenant
        raise KeyError(name)


@dataclass(frozen=True)
class GPUDevice:
    """One physical (simulated) GPU of a worker."""

    uuid: str
    index: int
    type: str
    memory: int
    numa: int
    health: bool = True


def derive_gpu_uuid(node_name: str, index: int) -> str:
    """A GPU UUID in NVIDIA's `GPU-<uuid>` form, the same for the same node and index on every run."""
    return f"GPU-{uuid.uuid5(_GPU_UUID_NAMESPACE, f'{node_name}/{index}')}"


def _require_unique(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{what} {name!r} appears more than once")
        seen.add(name)


SEED_LAB_YAML = """\
apiVersion: tenantgpu.io/v1alpha1
kind: Lab
metadata:
  name: seed
spec:
  kubernetesVersion: v1.31.4
  datastore:
    driver: sqlite
  hami:
    nodeSchedulerPolicy: binpack
    gpuSchedulerPolicy: spread
    deviceSplitCount: 10
  tenants:
    - name: tenant-a
      workers:
        - name: worker-a1
          gpus:
            - type: NVIDIA A100-SXM4-80GB
              memory: 81920
    - name: tenant-b
      workers:
        - name: worker-b1
          gpus:
            - type: NVIDIA L4
              memory: 23034
              count: 2
"""


def seed_lab() -> Lab:
    """The lab of the original article: tenant-a with one A100 80GB, tenant-b with two L4."""
    return parse_lab(SEED_LAB_YAML, source="<seed lab>")


def load_lab(path: str | Path | None) -> Lab:
    """Read and validate a lab file; with no path, the seed lab."""
    if path is None:
        return seed_lab()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LabSpecError(f"{path}: cannot read the lab file: {exc.strerror or exc}") from exc
    return parse_lab(text, source=str(path))


def parse_lab(text: str, *, source: str = "<lab>") -> Lab:
    """Validate lab YAML text; every error names `source:line: field: problem`."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise LabSpecError(f"{where}: not valid YAML: {problem}") from exc
    if not isinstance(data, dict):
        raise LabSpecError(f"{source}:1: a lab file must be a mapping with kind: Lab")
    if data.get("kind") != "Lab":
        raise LabSpecError(
            f"{source}:{_line_of(root, ('kind',))}: kind: expected 'Lab', got {data.get('kind')!r}"
        )
    try:
        return Lab.model_validate(data)
    except ValidationError as exc:
        # A misspelt key also makes the real key "missing"; the misspelling is the one worth showing.
        errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        error = errors[0]
        loc = tuple(error["loc"])
        field = _format_loc(loc)
        message = error["msg"].removeprefix("Value error, ")
        more = len(errors) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise LabSpecError(f"{source}:{_line_of(root, loc)}: {field}: {message}{suffix}") from None


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int:
    """The 1-based line of the deepest YAML node that `loc` reaches."""
    line = 1
    for part in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if key.value == part:
                    line = key.start_mark.line + 1
                    child = value
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
        node = child
    # A scalar value sits on its key's line; a block mapping or list starts below it, so keep the key's line,
    # except for list items and the document itself, whose own start is the better pointer.
    if node is not None and (isinstance(node, yaml.ScalarNode) or not loc or isinstance(loc[-1], int)):
        line = node.start_mark.line + 1
    return line
