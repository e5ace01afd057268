"""Replay placement policies by name: the paper's baselines, FGD, whole-GPU, ours and HAMi's."""

from __future__ import annotations

from tenantgpu.replay.policies.base import Policy
from tenantgpu.replay.policies.best_fit import BestFitPolicy, WholeGpuPolicy
from tenantgpu.replay.policies.dot_product import DotProductPolicy
from tenantgpu.replay.policies.fgd import FgdPolicy
from tenantgpu.replay.policies.fgd_pack import FgdPackPolicy
from tenantgpu.replay.policies.fgd_strand import FgdStrandPolicy
from tenantgpu.replay.policies.gpu_clustering import GpuClusteringPolicy
from tenantgpu.replay.policies.gpu_packing import GpuPackingPolicy
from tenantgpu.replay.policies.random_fit import RandomPolicy

PAPER_POLICIES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd")
HAMI_POLICIES = ("hami-binpack", "hami-spread")
DEFAULT_CAPACITY_POLICIES = ("whole-gpu", "bestfit", "fgd", "fgd-pack", "fgd-strand")

_FACTORIES = {
    "random": RandomPolicy,
    "dotprod": DotProductPolicy,
    "clustering": GpuClusteringPolicy,
    "packing": GpuPackingPolicy,
    "bestfit": BestFitPolicy,
    "fgd": FgdPolicy,
    "whole-gpu": WholeGpuPolicy,
    "fgd-pack": FgdPackPolicy,
    "fgd-strand": FgdStrandPolicy,
}


def policy_names() -> tuple[str, ...]:
    return (*_FACTORIES, *HAMI_POLICIES)


def make_policy(name: str, device_split_count: int = 10) -> Policy:
    """A fresh policy instance; KeyError names the unknown policy."""
    if name in HAMI_POLICIES:
        from tenantgpu.replay.hami_policy import HamiPolicy

        node_policy = name.removeprefix("hami-")
        # HAMi's chart default GPU policy is spread; binpack on nodes pairs with binpack on GPUs.
        return HamiPolicy(node_policy, node_policy, device_split_count)
    return _FACTORIES[name]()


__all__ = [
    "DEFAULT_CAPACITY_POLICIES",
    "HAMI_POLICIES",
    "PAPER_POLICIES",
    "Policy",
    "make_policy",
    "policy_names",
]
