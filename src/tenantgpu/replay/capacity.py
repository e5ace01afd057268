"""Capacity planning: how many nodes of one shape a workload needs so that every pod fits, per policy."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from tenantgpu.replay.fragmentation import typical_pods
from tenantgpu.replay.policies import make_policy
from tenantgpu.replay.simulate import replay
from tenantgpu.replay.trace import MILLI, NodeList, PodList, TraceError

HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class NodeShape:
    """One node type to buy: GPUs per node and their model, vCPU and memory."""

    gpus: int
    model: str
    cpu_milli: int
    memory_mib: int

    @classmethod
    def parse(cls, text: str, vcpu: int, memory_gib: int) -> NodeShape:
        """`8x NVIDIA A100-SXM4-80GB` (also `8 x ...`, `8×...`)."""
        match = re.fullmatch(r"\s*(\d+)\s*[x×]\s*(\S.*?)\s*", text)
        if not match or int(match.group(1)) < 1:
            raise TraceError(f"bad node shape {text!r}: use e.g. '8x NVIDIA A100-SXM4-80GB'")
        if vcpu < 1 or memory_gib < 1:
            raise TraceError("node vCPU and memory must be positive")
        return cls(int(match.group(1)), match.group(2), vcpu * 1000, memory_gib * 1024)

    def cluster(self, count: int) -> NodeList:
        return NodeList(
            names=tuple(f"node-{i:04d}" for i in range(count)),
            cpu_milli=np.full(count, self.cpu_milli, dtype=np.int64),
            memory_mib=np.full(count, self.memory_mib, dtype=np.int64),
            gpus=np.full(count, self.gpus, dtype=np.int64),
            model_index=np.zeros(count, dtype=np.int64),
            models=(self.model,),
        )


@dataclass(frozen=True)
class CapacityAnswer:
    policy: str
    nodes: int
    gpus: int
    monthly_cost: float
    simulations: int


def placeable(pods: PodList, shape: NodeShape) -> tuple[PodList, int]:
    """Pods an empty node of `shape` can hold (model constraints dropped: the fleet has one model),
    and how many cannot fit on such a node at all."""
    ok = (
        (pods.cpu_milli <= shape.cpu_milli)
        & (pods.memory_mib <= shape.memory_mib)
        & (pods.num_gpu <= shape.gpus)
    )
    kept = pods.take(np.flatnonzero(ok))
    return replace(kept, gpu_spec=("",) * len(kept)), int((~ok).sum())


def _lower_bound(pods: PodList, shape: NodeShape, rounds_up: bool) -> int:
    share = np.where(rounds_up & (pods.num_gpu > 0), MILLI, pods.gpu_milli) * pods.num_gpu
    return max(
        1,
        math.ceil(int(share.sum()) / (shape.gpus * MILLI)),
        math.ceil(int(pods.cpu_milli.sum()) / shape.cpu_milli),
        math.ceil(int(pods.memory_mib.sum()) / shape.memory_mib),
    )


def nodes_needed(
    pods: PodList, shape: NodeShape, policy: str, seed: int = 42, on_step: Callable[[str], None] | None = None
) -> tuple[int, int]:
    """Fewest nodes on which `policy` places every pod (arrival order shuffled by `seed`), and the number
    of simulations it took. Starts at the resource lower bound, grows by the failed demand, then bisects."""
    order = np.random.default_rng(seed).permutation(len(pods))
    arriving = pods.take(order)
    typical = typical_pods(arriving, (shape.model,))
    rounds_up = bool(getattr(make_policy(policy), "rounds_up", False))
    runs = 0

    def fits(count: int) -> tuple[bool, int]:
        nonlocal runs
        runs += 1
        result = replay(
            shape.cluster(count), arriving, typical, make_policy(policy), np.random.default_rng(seed)
        )
        if on_step:
            on_step(f"{policy}: {count} nodes, {result.failed_pods[-1]} pods left over")
        return result.failed_pods[-1] == 0, result.failed_pods[-1]

    low = _lower_bound(arriving, shape, rounds_up) - 1  # known not enough (or zero)
    high = low + 1
    while True:
        ok, failed = fits(high)
        if ok:
            break
        low = high
        high += max(1, math.ceil(failed * 0.5 / shape.gpus))
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid)[0]:
            high = mid
        else:
            low = mid
    return high, runs


def plan_capacity(
    pods: PodList,
    shape: NodeShape,
    policies: tuple[str, ...],
    price_per_gpu_hour: float,
    seed: int = 42,
    on_step: Callable[[str], None] | None = None,
) -> tuple[list[CapacityAnswer], int]:
    """Per policy the nodes and GPUs needed and their monthly cost; plus the count of pods too big."""
    fitting, too_big = placeable(pods, shape)
    answers = []
    for policy in policies:
        count, runs = nodes_needed(fitting, shape, policy, seed, on_step)
        gpus = count * shape.gpus
        answers.append(CapacityAnswer(policy, count, gpus, gpus * price_per_gpu_hour * HOURS_PER_MONTH, runs))
    return answers, too_big


def plot_capacity(answers: list[CapacityAnswer], shape: NodeShape, price: float, path: str) -> None:
    """Bar chart: GPUs needed per policy, labelled with nodes and monthly cost."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=90)
    names = [a.policy for a in answers]
    bars = ax.bar(
        names, [a.gpus for a in answers], color=["#999" if n == "whole-gpu" else "#3a7" for n in names]
    )
    for bar, answer in zip(bars, answers, strict=True):
        ax.annotate(
            f"{answer.nodes} nodes\n${answer.monthly_cost / 1e6:.2f}M/month",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_ylabel(f"GPUs needed ({shape.gpus}x {shape.model} nodes)")
    ax.set_title(f"Nodes so that every pod fits, at ${price}/GPU-hour")
    ax.margins(y=0.2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
