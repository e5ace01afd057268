"""The `nvidia-smi` options people use to read a GPU from inside a container: `-L` and
`--query-gpu=… --format=csv`, answered with the memory HAMi-core exposes (total = the container's limit).

nvidia-smi's exit code 2 means an invalid argument, as in its manual page. The table without options is
`gpu_runtime.nvidia_smi`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tenantgpu.node.execresult import ExecResult
from tenantgpu.node.gpu_runtime import GpuView, nvidia_smi

INVALID_ARGUMENT = 2
DRIVER_VERSION = "550.54.15"


@dataclass(frozen=True)
class _Field:
    header: str
    unit: str  # printed after the value unless `nounits`, and in the header as `[unit]`
    value: Callable[[GpuView, int, int], str]  # (gpu, used MiB, number of GPUs) → value


def _used(gpu: GpuView, used_mib: int) -> int:
    return min(used_mib, gpu.total_mib)


_FIELDS: dict[str, _Field] = {
    "count": _Field("count", "", lambda g, u, n: str(n)),
    "index": _Field("index", "", lambda g, u, n: str(g.index)),
    "name": _Field("name", "", lambda g, u, n: g.model),
    "uuid": _Field("uuid", "", lambda g, u, n: g.uuid),
    "driver_version": _Field("driver_version", "", lambda g, u, n: DRIVER_VERSION),
    "memory.total": _Field("memory.total", "MiB", lambda g, u, n: str(g.total_mib)),
    "memory.used": _Field("memory.used", "MiB", lambda g, u, n: str(_used(g, u))),
    "memory.free": _Field("memory.free", "MiB", lambda g, u, n: str(g.total_mib - _used(g, u))),
}
# nvidia-smi's other names for the same fields.
_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid"}
_USAGE = (
    "the simulated nvidia-smi answers `nvidia-smi`, `nvidia-smi -L` and "
    "`nvidia-smi --query-gpu=FIELDS --format=csv[,noheader][,nounits]` "
    f"with FIELDS from: {', '.join(sorted(_FIELDS))}"
)


def _invalid(why: str) -> ExecResult:
    return ExecResult(stderr=f"{why}\n{_USAGE}\n", exit_code=INVALID_ARGUMENT)


def _list(gpus: list[GpuView]) -> ExecResult:
    lines = [f"GPU {g.index}: {g.model} (UUID: {g.uuid})" for g in gpus]
    return ExecResult(stdout="".join(line + "\n" for line in lines))


def _option_values(args: list[str]) -> dict[str, str] | ExecResult:
    """`--query-gpu=a,b --format csv` → {"query-gpu": "a,b", "format": "csv"}; anything else is refused."""
    values: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, sep, value = arg.partition("=")
        if name not in ("--query-gpu", "--format"):
            return _invalid(f'Invalid combination of input arguments: "{arg}" is not understood here.')
        if not sep:
            if i + 1 >= len(args):
                return _invalid(f"Option {name} needs a value.")
            value = args[i + 1]
            i += 1
        values[name[2:]] = value
        i += 1
    return values


def _query(gpus: list[GpuView], used_mib: int, query: str, fmt: str) -> ExecResult:
    names = [part.strip() for part in query.split(",") if part.strip()]
    fields = []
    for name in names:
        field = _FIELDS.get(_ALIASES.get(name, name))
        if field is None:
            return _invalid(f'Field "{name}" is not a valid field to query.')
        fields.append(field)
    if not fields:
        return _invalid("Option --query-gpu needs at least one field.")
    options = [part.strip() for part in fmt.split(",")]
    if options[0] != "csv" or not set(options[1:]) <= {"noheader", "nounits"}:
        return _invalid(f'Format "{fmt}" is not supported: use csv, with noheader and nounits if wanted.')
    units = "nounits" not in options
    lines = []
    if "noheader" not in options:
        lines.append(", ".join(f"{f.header} [{f.unit}]" if f.unit else f.header for f in fields))
    for gpu in gpus:
        cells = [f.value(gpu, used_mib, len(gpus)) for f in fields]
        if units:
            cells = [f"{cell} {f.unit}" if f.unit else cell for cell, f in zip(cells, fields, strict=True)]
        lines.append(", ".join(cells))
    return ExecResult(stdout="".join(line + "\n" for line in lines))


def run_nvidia_smi(args: list[str], gpus: list[GpuView], used_mib: int = 0) -> ExecResult:
    """What `nvidia-smi ARGS` prints inside a container that sees `gpus`, `used_mib` of each in use."""
    if not args:
        return ExecResult(stdout=nvidia_smi(gpus, used_mib=used_mib, driver=DRIVER_VERSION) + "\n")
    if args in (["-L"], ["--list-gpus"]):
        return _list(gpus)
    values = _option_values(args)
    if isinstance(values, ExecResult):
        return values
    if "query-gpu" not in values:
        return _invalid("Option --format needs --query-gpu beside it.")
    if "format" not in values:
        return _invalid("Option --query-gpu needs --format=csv beside it.")
    return _query(gpus, used_mib, values["query-gpu"], values["format"])
