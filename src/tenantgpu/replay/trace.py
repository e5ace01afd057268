"""Loading and validating trace CSVs (Alibaba GPU-sharing trace format) into column arrays."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MILLI = 1000
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
ANY_MODEL = -1  # spec mask with every bit set: the pod accepts any GPU model


class TraceError(ValueError):
    """Input a user must fix: the message is one plain line."""


@dataclass(frozen=True)
class NodeList:
    """The cluster: one row per node; `model_index` points into `models` (-1 for a node without GPUs)."""

    names: tuple[str, ...]
    cpu_milli: np.ndarray
    memory_mib: np.ndarray
    gpus: np.ndarray
    model_index: np.ndarray
    models: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def gpu_capacity(self) -> int:
        return int(self.gpus.sum())

    @property
    def model_bit(self) -> np.ndarray:
        """One bit per node for its GPU model (0 for GPU-less nodes), matched against pod spec masks."""
        bits = np.zeros(len(self), dtype=np.int64)
        has = self.model_index >= 0
        bits[has] = np.left_shift(np.int64(1), self.model_index[has].astype(np.int64))
        return bits


@dataclass(frozen=True)
class PodList:
    """The workload, one row per pod. `gpu_milli` is the share of each GPU (1000 whole, 0 for CPU pods)."""

    names: tuple[str, ...]
    cpu_milli: np.ndarray
    memory_mib: np.ndarray
    num_gpu: np.ndarray
    gpu_milli: np.ndarray
    gpu_spec: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def total_milli(self) -> np.ndarray:
        """GPU request of each pod in thousandths of a GPU (num_gpu × share)."""
        return self.num_gpu * self.gpu_milli

    def take(self, index: np.ndarray) -> PodList:
        """A new list with the rows at `index`, in that order (repeats allowed)."""
        index = np.asarray(index, dtype=np.int64)
        return PodList(
            names=tuple(self.names[i] for i in index),
            cpu_milli=self.cpu_milli[index],
            memory_mib=self.memory_mib[index],
            num_gpu=self.num_gpu[index],
            gpu_milli=self.gpu_milli[index],
            gpu_spec=tuple(self.gpu_spec[i] for i in index),
        )

    def spec_masks(self, models: tuple[str, ...]) -> np.ndarray:
        """Per pod, the bits of the cluster models it accepts (ANY_MODEL when it names none)."""
        lookup = {name: i for i, name in enumerate(models)}
        cache: dict[str, int] = {}
        out = np.empty(len(self), dtype=np.int64)
        for row, spec in enumerate(self.gpu_spec):
            if spec not in cache:
                wanted = [s.strip() for s in spec.split("|") if s.strip()]
                if not wanted:
                    cache[spec] = ANY_MODEL
                else:
                    mask = 0
                    for name in wanted:
                        if name in lookup:
                            mask |= 1 << lookup[name]
                    cache[spec] = mask
            out[row] = cache[spec]
        return out


def _read_rows(path: Path, required: tuple[str, ...], what: str) -> list[dict[str, str]]:
    try:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            missing = [c for c in required if c not in header]
            if missing:
                raise TraceError(f"{what} {path} lacks column(s) {', '.join(missing)}")
            return list(reader)
    except FileNotFoundError:
        raise TraceError(f"{what} {path} does not exist") from None
    except OSError as exc:  # a directory, no permission
        raise TraceError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise TraceError(f"{what} {path} is not a readable CSV: {exc}") from None


def _int_column(rows: list[dict[str, str]], column: str, path: Path) -> np.ndarray:
    values = np.empty(len(rows), dtype=np.int64)
    for i, row in enumerate(rows):
        text = (row.get(column) or "").strip()
        try:
            values[i] = int(float(text)) if text else 0
        except ValueError:
            raise TraceError(f"{path} row {i + 2}: {column}={text!r} is not a number") from None
        if values[i] < 0:
            raise TraceError(f"{path} row {i + 2}: {column}={text} is negative")
    return values


def load_nodes(path: Path | str) -> NodeList:
    """Read a node CSV (`sn,cpu_milli,memory_mib,gpu,model`); a list without any GPU is an error."""
    path = Path(path)
    rows = _read_rows(path, NODE_COLUMNS, "node list")
    gpus = _int_column(rows, "gpu", path)
    if len(rows) == 0 or int(gpus.sum()) == 0:
        raise TraceError(f"node list {path} has no GPUs")
    models: list[str] = []
    model_index = np.full(len(rows), -1, dtype=np.int64)
    for i, row in enumerate(rows):
        model = (row.get("model") or "").strip()
        if gpus[i] > 0:
            if model not in models:
                models.append(model)
            model_index[i] = models.index(model)
    if len(models) > 62:
        raise TraceError(f"node list {path} has {len(models)} GPU models; at most 62 are supported")
    return NodeList(
        names=tuple(row["sn"] for row in rows),
        cpu_milli=_int_column(rows, "cpu_milli", path),
        memory_mib=_int_column(rows, "memory_mib", path),
        gpus=gpus,
        model_index=model_index,
        models=tuple(models),
    )


def load_pods(path: Path | str) -> PodList:
    """Read a pod CSV (`name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec]`); time, QoS, phase ignored."""
    path = Path(path)
    rows = _read_rows(path, POD_COLUMNS, "pod list")
    if not rows:
        raise TraceError(f"pod list {path} has no pods")
    num_gpu = _int_column(rows, "num_gpu", path)
    gpu_milli = _int_column(rows, "gpu_milli", path)
    for i in range(len(rows)):
        if num_gpu[i] == 0:
            gpu_milli[i] = 0
        elif not 0 < gpu_milli[i] <= MILLI:
            raise TraceError(f"{path} row {i + 2}: gpu_milli={gpu_milli[i]} must be 1..1000 for a GPU pod")
        elif num_gpu[i] > 1 and gpu_milli[i] != MILLI:
            raise TraceError(f"{path} row {i + 2}: a pod with num_gpu={num_gpu[i]} must ask for whole GPUs")
    return PodList(
        names=tuple(row["name"] for row in rows),
        cpu_milli=_int_column(rows, "cpu_milli", path),
        memory_mib=_int_column(rows, "memory_mib", path),
        num_gpu=num_gpu,
        gpu_milli=gpu_milli,
        gpu_spec=tuple((row.get("gpu_spec") or "").strip() for row in rows),
    )


def shared_traces_dir() -> Path:
    """The shared trace folder beside the repository (`../shared/traces`)."""
    return Path(__file__).resolve().parents[3] / ".." / "shared" / "traces"


def default_trace_dir() -> Path:
    return shared_traces_dir() / "alibaba-gpu-2023" / "csv"


@dataclass(frozen=True)
class _ManifestPod:
    """A pod spec holder of a manifest: a Pod, or a workload's template, with its name and replicas."""

    holder: dict
    name: str
    replicas: int
    label: str  # how an error names it: `pod x`, `deployment x: pod template`


def _manifest_pods(doc: dict, path: Path) -> list[_ManifestPod]:
    """The pods of a Pod, a List of them, or a workload with a pod template."""
    kind = doc.get("kind")
    if kind == "List":
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise TraceError(f"{path}: List.items must be a list")
        # like the documents of the file, items that are not objects hold no pods
        return [p for item in items if isinstance(item, dict) for p in _manifest_pods(item, path)]
    name = _manifest_name(doc)
    label = f"{str(kind or 'object').lower()} {name}" if name else f"a {str(kind or 'object').lower()}"
    if kind == "Pod":
        return [_ManifestPod(doc, name or "pod", 1, label)]
    spec = doc.get("spec")
    if spec is None:
        return []
    if not isinstance(spec, dict):
        raise TraceError(f"{path}: {label}: spec must be an object")
    template = spec.get("template")
    if not template:
        return []
    if not isinstance(template, dict):
        raise TraceError(f"{path}: {label}: spec.template must be an object")
    replicas = 1 if spec.get("replicas") is None else spec["replicas"]  # None: the API server's default
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise TraceError(f"{path}: {label}: spec.replicas must be an integer greater than or equal to 0")
    if kind in ("Job", "CronJob"):
        replicas = 1
    pod_name = _manifest_name(template) or name or "pod"
    return [_ManifestPod(template, pod_name, replicas, f"{label}: pod template")]


def _manifest_name(obj: dict) -> str:
    """metadata.name, or "" when there is none (the shape check names a malformed one)."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""


def load_pod_manifests(path: Path | str) -> PodList:
    """Pods from Kubernetes YAML (Pods, Lists, Deployments...): cpu and memory requests, `nvidia.com/gpu`,
    and the share from `nvidia.com/gpucores` (else `gpumem-percentage`) in %; `nvidia.com/use-gputype`
    becomes the model constraint. A GPU container without either share takes whole GPUs (HAMi's default)."""
    import yaml

    from tenantgpu.gpushare import parse_quantity
    from tenantgpu.gpushare.shape import pod_problem

    path = Path(path)
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    except FileNotFoundError:
        raise TraceError(f"pod manifests {path} do not exist") from None
    except OSError as exc:  # a directory, no permission
        raise TraceError(f"cannot read pod manifests {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise TraceError(f"cannot read pod manifests {path}: not a text file") from None
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0]
        raise TraceError(f"pod manifests {path} are not valid YAML or JSON: {first}") from None
    rows: list[tuple[str, int, int, int, int, str]] = []
    for doc in docs:
        for pod in _manifest_pods(doc, path):
            problem = pod_problem(pod.holder)
            if problem is not None:
                raise TraceError(f"{path}: {pod.label}: {problem}")
            holder, name, replicas = pod.holder, pod.name, pod.replicas
            spec = holder.get("spec") or {}
            cpu = mem = gpus = 0
            share = MILLI
            for container in spec.get("containers") or []:
                res = container.get("resources") or {}
                req, lim = res.get("requests") or {}, res.get("limits") or {}

                def value(key: str, req: dict = req, lim: dict = lim) -> float:
                    raw = lim.get(key, req.get(key))
                    return 0.0 if raw is None else float(parse_quantity(raw))

                try:
                    cpu += round(float(parse_quantity(req.get("cpu", lim.get("cpu", 0)))) * 1000)
                    mem += round(float(parse_quantity(req.get("memory", lim.get("memory", 0)))) / 2**20)
                    count = int(value("nvidia.com/gpu"))
                    percent = value("nvidia.com/gpucores") or value("nvidia.com/gpumem-percentage")
                except (ValueError, TypeError, ArithmeticError) as exc:
                    raise TraceError(f"{path}: pod {name}: bad resource quantity ({exc})") from None
                if count:
                    gpus += count
                    if count == 1 and 0 < percent < 100:
                        share = min(share, max(1, round(percent * 10)))
            annotations = (holder.get("metadata") or {}).get("annotations") or {}
            spec_models = "|".join(
                m.strip() for m in annotations.get("nvidia.com/use-gputype", "").split(",") if m.strip()
            )
            for i in range(replicas):
                rows.append(
                    (
                        f"{name}-{i}" if replicas > 1 else name,
                        cpu,
                        mem,
                        gpus,
                        share if gpus else 0,
                        spec_models,
                    )
                )
    if not rows:
        raise TraceError(f"pod manifests {path} hold no pods")
    return PodList(
        names=tuple(r[0] for r in rows),
        cpu_milli=np.array([r[1] for r in rows], dtype=np.int64),
        memory_mib=np.array([r[2] for r in rows], dtype=np.int64),
        num_gpu=np.array([r[3] for r in rows], dtype=np.int64),
        gpu_milli=np.array([r[4] if r[3] <= 1 else MILLI for r in rows], dtype=np.int64),
        gpu_spec=tuple(r[5] for r in rows),
    )


MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")  # JSON is YAML to the loader


def load_workload(path: Path | str) -> PodList:
    """A pod CSV, or Kubernetes manifests when the file ends in .yaml, .yml or .json."""
    if str(path).endswith(MANIFEST_SUFFIXES):
        return load_pod_manifests(path)
    return load_pods(path)
