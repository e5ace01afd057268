"""Scheduler recovery: pods created while HAMi's scheduler is stopped are placed once it is back."""

from __future__ import annotations

import contextlib
import time

from tenantgpu.validate import hami, lab_control
from tenantgpu.validate.checks.base import Check, Need
from tenantgpu.validate.checks.gpus import healthy_gpus
from tenantgpu.validate.checks.pods import gpu_pod, node_of, state, wait_running
from tenantgpu.validate.context import CheckContext
from tenantgpu.validate.outcome import CheckFailed, CheckSkipped, Outcome

_HELD_SECONDS = 1.5


def scheduler_recovers(ctx: CheckContext) -> Outcome:
    control = ctx.lab_control()
    if control is None:
        raise CheckSkipped(
            f"no lab control in tenant {ctx.tenant} (ConfigMap {lab_control.NAMESPACE}/{lab_control.NAME}); "
            "on a real cluster stopping HAMi's scheduler would also stop its webhook"
        )
    if lab_control.SCHEDULER not in control.components():
        raise CheckSkipped(f"the lab cannot stop {lab_control.SCHEDULER} in tenant {ctx.tenant}")
    healthy_gpus(ctx)  # the pods need a card to land on once the scheduler is back
    names = ["while-down-1", "while-down-2"]
    with ctx.namespace() as namespace:
        try:
            control.stop(lab_control.SCHEDULER)
            for name in names:
                pod = ctx.cluster.create(
                    "Pod", gpu_pod(name, labels=ctx.labels(), gpumem=1000, gpucores=10), namespace
                )
                if (pod.get("spec") or {}).get("schedulerName") != hami.SCHEDULER_NAME:
                    raise CheckFailed(
                        "with the scheduler stopped the webhook did not mutate the pod",
                        expected=f"schedulerName {hami.SCHEDULER_NAME} (the webhook keeps running)",
                        seen=state(pod),
                        command=ctx.kubectl("get mutatingwebhookconfigurations -o yaml"),
                    )

            def placed_while_down() -> str | None:
                for name in names:
                    pod = ctx.cluster.get("Pod", name, namespace) or {}
                    if node_of(pod):
                        return f"{name} was placed while the scheduler was stopped: {state(pod)}"
                return None

            ctx.hold(placed_while_down, _HELD_SECONDS)
        finally:
            with contextlib.suppress(Exception):
                control.start(lab_control.SCHEDULER)
        started = time.monotonic()
        for name in names:
            wait_running(ctx, namespace, name)
        took = time.monotonic() - started
    return Outcome.passed(
        f"{len(names)} pods stayed unscheduled for {_HELD_SECONDS} s with the scheduler stopped; "
        f"Running {took:.1f} s after it came back"
    )


CHECKS = (
    Check(
        "scheduler-recovers",
        "pods created while the HAMi scheduler is down are placed when it is back",
        scheduler_recovers,
        needs=frozenset({Need.LAB_CONTROL}),
        disruptive=True,
    ),
)
