"""The validation suite: checks that prove the wiring, fractional GPUs and isolation, against any kubeconfigs."""

from __future__ import annotations

from tenantgpu.validate.checks import ALL_CHECKS, Check, Need, check_names, select
from tenantgpu.validate.cluster import Cluster, KubeCluster
from tenantgpu.validate.context import DeclaredGPU, DeclaredNode, Expectations, RunSettings, Targets
from tenantgpu.validate.outcome import Outcome
from tenantgpu.validate.runner import Result, run_suite, summary

__all__ = [
    "ALL_CHECKS",
    "Check",
    "Cluster",
    "DeclaredGPU",
    "DeclaredNode",
    "Expectations",
    "KubeCluster",
    "Need",
    "Outcome",
    "Result",
    "RunSettings",
    "Targets",
    "check_names",
    "run_suite",
    "select",
    "summary",
]
