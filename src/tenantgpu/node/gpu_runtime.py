"""The simulated GPU runtime: what HAMi-core would let a container's workload do (memory cap, compute share).

This is the model, not CUDA. Documented pod annotations drive a container's simulated workload:

- `tenantgpu.io/gpu-memory-used: "<MiB>"` — device memory the workload allocates on each of its GPUs.
  Above the container's `CUDA_DEVICE_MEMORY_LIMIT_<i>` the allocation fails exactly where HAMi-core's
  `oom_check` refuses it: the process logs `CUDA_ERROR_OUT_OF_MEMORY` and exits with code 1 (pod Failed).
- `tenantgpu.io/run-for: "<duration>"` (`30s`, `2m`, `1h30m`, `500ms`) — wall time after which the workload
  exits 0 (pod Succeeded, its GPU slice is free again). Without it the workload runs until deleted.
- `tenantgpu.io/gpu-work: "<seconds>"` — compute work in seconds of a whole card. Its wall time is
  work / share, where share is the container's compute share on its busiest card (see `compute_shares`).
  When both are given, `gpu-work` wins.

Compute model (HAMi-core's SM limiter, time-averaged): `CUDA_DEVICE_SM_LIMIT` of 1..99 caps a container at
that percent of the card; 0 or ≥ 100 means unthrottled. On one card, capped containers get their cap;
unthrottled ones split what the capped ones leave; if the caps alone exceed 100 % every share is scaled
down proportionally. Shares are fixed when a container starts (no re-balancing while it runs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

RUN_FOR = "tenantgpu.io/run-for"
GPU_MEMORY_USED = "tenantgpu.io/gpu-memory-used"
GPU_WORK = "tenantgpu.io/gpu-work"
OOM_EXIT_CODE = 1

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds from a Go-style duration (`1h30m`, `45s`, `250ms`) or a bare number of seconds."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"invalid duration {text!r} (use e.g. 30s, 2m, 1h30m, 500ms)")
    return total


def parse_memory_limit(value: str) -> int | None:
    """MiB from HAMi-core's limit syntax (`1000m`, `2g`, `512k`, bare bytes); None = unlimited."""
    value = value.strip().lower()
    if not value or value == "0":
        return None
    factor = {"k": 1 / 1024, "m": 1, "g": 1024}.get(value[-1])
    if factor is None:
        return int(value) // (1024 * 1024) or None
    return int(int(value[:-1]) * factor) or None


@dataclass(frozen=True)
class GpuView:
    """What one visible GPU looks like from inside the container."""

    index: int
    uuid: str
    model: str
    physical_mib: int
    limit_mib: int | None

    @property
    def total_mib(self) -> int:
        # HAMi-core's cuMemGetInfo: total = min(limit, physical)
        return self.physical_mib if self.limit_mib is None else min(self.limit_mib, self.physical_mib)


def visible_gpus(env: dict[str, str], devices: dict[str, tuple[str, int]]) -> list[GpuView]:
    """The container's GPUs from its env; `devices` maps uuid → (model, physical MiB) of the node."""
    uuids = [u for u in env.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if u and u not in ("none", "void")]
    fallback = env.get("CUDA_DEVICE_MEMORY_LIMIT")
    views = []
    for i, uuid in enumerate(uuids):
        model, physical = devices.get(uuid, ("NVIDIA GPU", 0))
        raw = env.get(f"CUDA_DEVICE_MEMORY_LIMIT_{i}", fallback or "")
        views.append(GpuView(i, uuid, model, physical, parse_memory_limit(raw)))
    return views


def sm_limit(env: dict[str, str]) -> int | None:
    """The container's compute cap in percent, or None when HAMi-core would not throttle it."""
    try:
        limit = int(env.get("CUDA_DEVICE_SM_LIMIT", "0"))
    except ValueError:
        return None
    if env.get("GPU_CORE_UTILIZATION_POLICY") == "disable" or limit <= 0 or limit >= 100:
        return None
    return limit


def compute_shares(caps: dict[str, int | None]) -> dict[str, float]:
    """Fraction of one card each co-located container gets, from their SM caps (None = unthrottled)."""
    capped = {k: v / 100 for k, v in caps.items() if v is not None}
    free = [k for k, v in caps.items() if v is None]
    total_capped = sum(capped.values())
    if total_capped > 1.0:
        capped = {k: v / total_capped for k, v in capped.items()}
        total_capped = 1.0
    leftover = max(0.0, 1.0 - total_capped)
    shares = dict(capped)
    for key in free:
        shares[key] = leftover / len(free) if leftover > 0 else 0.0
    return shares


def nvidia_smi(gpus: list[GpuView], used_mib: int = 0, driver: str = "550.54.15", cuda: str = "12.4") -> str:
    """A `nvidia-smi`-style table showing the capped memory HAMi-core exposes inside the container."""
    head = ("GPU", "Name", "UUID", "Memory-Usage")
    rows = [
        (str(gpu.index), gpu.model, gpu.uuid, f"{min(used_mib, gpu.total_mib)}MiB / {gpu.total_mib}MiB")
        for gpu in gpus
    ]
    widths = [max(len(cells[i]) for cells in (head, *rows)) for i in range(len(head))]

    def row(cells: tuple[str, ...]) -> str:
        left = "  ".join(f"{cell:<{width}}" for cell, width in zip(cells[:-1], widths, strict=False))
        return f"{left}  {cells[-1]:>{widths[-1]}}"

    title = f"NVIDIA-SMI {driver}   (tenantgpu simulated)   Driver Version: {driver}   CUDA Version: {cuda}"
    body = [row(cells) for cells in rows] if rows else ["No devices were found"]
    width = max(len(text) for text in (title, row(head), *body))
    line = "+" + "-" * (width + 2) + "+"
    framed = [f"| {text:<{width}} |" for text in body]
    return "\n".join([line, f"| {title:<{width}} |", line, f"| {row(head):<{width}} |", *framed, line])


@dataclass(frozen=True)
class WorkloadPlan:
    """What the simulated workload will do once its container runs."""

    runs_for: float | None  # seconds until it exits, None = until deleted
    exit_code: int
    log_lines: tuple[str, ...]
    timed: bool = False  # the annotations set the run time (then a container's command does not)

    @property
    def fails(self) -> bool:
        return self.exit_code != 0


def plan_workload(
    annotations: dict[str, str], env: dict[str, str], gpus: list[GpuView], share: float
) -> WorkloadPlan:
    """Decide the workload's fate from the pod's annotations, its HAMi env and its compute share."""
    lines: list[str] = []
    want = annotations.get(GPU_MEMORY_USED)
    if want and gpus:
        mib = int(float(want))
        for gpu in gpus:
            if gpu.limit_mib is not None and mib > gpu.limit_mib:
                lines.append(
                    f"cudaMalloc({mib} MiB) on GPU {gpu.index} failed: CUDA_ERROR_OUT_OF_MEMORY: "
                    f"out of memory (HAMi-core limit {gpu.limit_mib} MiB)"
                )
                return WorkloadPlan(0.0, OOM_EXIT_CODE, tuple(lines))
            lines.append(f"allocated {mib} MiB on GPU {gpu.index} ({gpu.uuid})")
    runs_for: float | None = None
    timed = True
    if GPU_WORK in annotations:
        work = parse_duration(annotations[GPU_WORK])
        runs_for = work / share if share > 0 else None
        lines.append(
            f"compute share {share * 100:.0f}% of a card: {work:g}s of work takes {runs_for or 0:.1f}s"
        )
    elif RUN_FOR in annotations:
        runs_for = parse_duration(annotations[RUN_FOR])
        lines.append(f"running for {runs_for:g}s")
    else:
        timed = False
    return WorkloadPlan(runs_for, 0, tuple(lines), timed)


def container_env_lines(env: dict[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in sorted(env.items())]


def pod_annotations(pod: dict[str, Any]) -> dict[str, str]:
    return (pod.get("metadata") or {}).get("annotations") or {}
