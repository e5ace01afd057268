"""HAMi's mutating webhook seen from a tenant: reached through the tunnel, and ignored when the tunnel is down."""

from __future__ import annotations

import contextlib

from tenantgpu.validate import hami, lab_control
from tenantgpu.validate.checks.base import Check, Need
from tenantgpu.validate.checks.pods import gpu_pod
from tenantgpu.validate.cluster import JSON, ApiError, Unreachable
from tenantgpu.validate.context import CheckContext
from tenantgpu.validate.outcome import CheckFailed, CheckSkipped, Outcome


def _hami_webhooks(ctx: CheckContext) -> list[tuple[str, JSON]]:
    """(configuration name, webhook) for every mutating webhook that looks like HAMi's."""
    found: list[tuple[str, JSON]] = []
    for config in ctx.cluster.list("MutatingWebhookConfiguration"):
        for webhook in config.get("webhooks") or []:
            service = ((webhook.get("clientConfig") or {}).get("service") or {}).get("name", "")
            if "hami" in webhook.get("name", "") or "hami" in service:
                found.append((config["metadata"]["name"], webhook))
    return found


def _create_probe(ctx: CheckContext, namespace: str, name: str) -> JSON:
    return ctx.cluster.create("Pod", gpu_pod(name, labels=ctx.labels(), gpumem=1000, gpucores=10), namespace)


def webhook_through_tunnel(ctx: CheckContext) -> Outcome:
    if ctx.declared_nodes() == ():
        raise CheckSkipped(f"the lab declares no worker for tenant {ctx.tenant}, so no HAMi webhook to reach")
    webhooks = _hami_webhooks(ctx)
    with ctx.namespace() as namespace:
        try:
            pod = _create_probe(ctx, namespace, "webhook-probe")
        except ApiError as exc:
            return Outcome.failed(
                "the tenant API server refused the GPU pod",
                expected=f"pod admitted with schedulerName {hami.SCHEDULER_NAME}",
                seen=str(exc),
                command=ctx.kubectl("get mutatingwebhookconfigurations -o yaml"),
            )
        scheduler = (pod.get("spec") or {}).get("schedulerName")
        if scheduler != hami.SCHEDULER_NAME:
            configured = (
                ", ".join(f"{c}/{w.get('name')}" for c, w in webhooks) or "no HAMi webhook configured"
            )
            return Outcome.failed(
                "the GPU pod was not mutated by HAMi's webhook (the API server did not reach it)",
                expected=f"schedulerName {hami.SCHEDULER_NAME}",
                seen=f"schedulerName {scheduler}; webhooks: {configured}",
                command=ctx.kubectl("get mutatingwebhookconfigurations -o yaml"),
            )
    names = ", ".join(w.get("name", "?") for _, w in webhooks)
    return Outcome.passed(f"GPU pod came back with schedulerName {hami.SCHEDULER_NAME} (webhook {names})")


def webhook_unreachable_behaviour(ctx: CheckContext) -> Outcome:
    control = ctx.lab_control()
    if control is None:
        raise CheckSkipped(
            f"no lab control in tenant {ctx.tenant} (ConfigMap {lab_control.NAMESPACE}/{lab_control.NAME}); "
            "a real cluster offers no safe way to disconnect the tunnel agent"
        )
    if lab_control.TUNNEL_AGENT not in control.components():
        raise CheckSkipped(f"the lab cannot stop {lab_control.TUNNEL_AGENT} in tenant {ctx.tenant}")
    webhooks = _hami_webhooks(ctx)
    policies = {w.get("failurePolicy", "Fail") for _, w in webhooks}
    command = ctx.kubectl("get mutatingwebhookconfigurations -o yaml")
    if not webhooks:
        raise CheckFailed(
            "no HAMi mutating webhook is configured",
            expected="a webhook for pods with failurePolicy Ignore",
            seen="none",
            command=command,
        )
    with ctx.namespace() as namespace:
        try:
            control.stop(lab_control.TUNNEL_AGENT)
            try:
                pod = _create_probe(ctx, namespace, "agent-down")
            except (ApiError, Unreachable) as exc:
                return Outcome.failed(
                    "with no tunnel agent connected the API server rejected the GPU pod",
                    expected="failurePolicy Ignore: the pod is admitted unmutated",
                    seen=f"{exc}; failurePolicy {', '.join(sorted(policies))}",
                    command=command,
                )
            scheduler = (pod.get("spec") or {}).get("schedulerName")
            if scheduler == hami.SCHEDULER_NAME:
                return Outcome.failed(
                    "the pod was mutated although the tunnel agent was stopped",
                    expected="schedulerName left unset/default-scheduler (webhook unreachable, ignored)",
                    seen=f"schedulerName {scheduler}",
                    command=command,
                )
        finally:
            with contextlib.suppress(Exception):
                control.start(lab_control.TUNNEL_AGENT)
        counter = iter(range(1, 10_000))

        def webhook_back() -> bool | None:
            pod = _create_probe(ctx, namespace, f"agent-back-{next(counter)}")
            return True if (pod.get("spec") or {}).get("schedulerName") == hami.SCHEDULER_NAME else None

        ctx.wait_for(
            webhook_back,
            what="the webhook mutating GPU pods again once the agent reconnected",
            seen=lambda: "pods still admitted without schedulerName hami-scheduler",
            command=command,
        )
    return Outcome.passed(
        f"agent stopped: GPU pod admitted unmutated (schedulerName {scheduler or 'unset'}, "
        f"failurePolicy {', '.join(sorted(policies))}); agent back: webhook mutates again"
    )


CHECKS = (
    Check(
        "webhook-through-tunnel",
        "a GPU pod comes back with schedulerName hami-scheduler: the tenant API reached the webhook on the worker",
        webhook_through_tunnel,
    ),
    Check(
        "webhook-unreachable-behaviour",
        "with no tunnel agent connected, failurePolicy Ignore admits GPU pods unmutated",
        webhook_unreachable_behaviour,
        needs=frozenset({Need.LAB_CONTROL}),
        disruptive=True,
    ),
)
