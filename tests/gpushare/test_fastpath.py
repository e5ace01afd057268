"""The indexed fast path and the reference path of schedule decide the same (DESIGN.md principle 3)."""

from gpushare_objects import A100, L4, gpu, gpu_pod, node, placed, pod, with_allocatable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenantgpu.gpushare import ClusterState, SharingConfig
from tenantgpu.gpushare.plan import plan

MODELS = [L4, A100, "NVIDIA T4", "NVIDIA"]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[ClusterState, ClusterState, list[dict]]:
    cfg = SharingConfig(
        node_policy=draw(st.sampled_from(["binpack", "spread"])),
        gpu_policy=draw(st.sampled_from(["spread", "binpack", "mutex"])),
    )
    nodes, pods = [], []
    for n in range(draw(st.integers(1, 6))):
        devs = [
            gpu(
                f"G{n}-{i}",
                i,
                mem=draw(st.sampled_from([16000, 23034, 81920])),
                model=draw(st.sampled_from(MODELS)),
                numa=draw(st.integers(0, 1)),
                count=draw(st.integers(1, 4)),
                health=draw(st.booleans()) or i > 0,
            )
            for i in range(draw(st.integers(0, 4)))
        ]
        spec = {}
        if draw(st.integers(0, 5)) == 0:
            spec["taints"] = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
        if draw(st.integers(0, 7)) == 0:
            spec["unschedulable"] = True
        notes = {"hami.io/device-cordon": f"G{n}-0"} if devs and draw(st.integers(0, 4)) == 0 else {}
        obj = node(
            f"n{n}", *devs, annotations=notes, labels={"pool": draw(st.sampled_from(["a", "b"]))}, **spec
        )
        if draw(st.booleans()):
            with_allocatable(
                obj, cpu=str(draw(st.integers(1, 8))), memory="16Gi", pods=str(draw(st.integers(1, 6)))
            )
        nodes.append(obj)
        for d in devs:
            for k in range(draw(st.integers(0, 2))):
                mem = draw(st.integers(0, d.devmem // 2))
                cores = draw(st.sampled_from([0, 10, 30, 50, 100]))
                pods.append(placed(f"old-{d.id}-{k}", f"n{n}", f"{d.id},NVIDIA,{mem},{cores}:;"))
    fast, ref = ClusterState(cfg), ClusterState(cfg)
    quota = {
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "team"},
        "spec": {"hard": {"limits.nvidia.com/gpumem": str(draw(st.integers(0, 40000)))}},
    }
    for s in (fast, ref):
        s.upsert_quota(quota)
        for obj in nodes:
            s.upsert_node(obj)
        for p in pods:
            s.upsert_pod(p)
    pending = []
    for j in range(draw(st.integers(1, 4))):
        notes = {}
        if draw(st.integers(0, 4)) == 0:
            notes["nvidia.com/use-gputype"] = draw(st.sampled_from(["L4", "a100", "t4,L4"]))
        if draw(st.integers(0, 4)) == 0:
            notes["hami.io/node-scheduler-policy"] = draw(st.sampled_from(["spread", "binpack"]))
        if draw(st.integers(0, 6)) == 0:
            notes["hami.io/gpu-scheduler-policy"] = "binpack"
        extra = {}
        if draw(st.integers(0, 4)) == 0:
            extra["nodeSelector"] = {"pool": "a"}
        if draw(st.integers(0, 4)) == 0:
            extra["tolerations"] = [{"operator": "Exists"}]
        use_pct = draw(st.booleans())
        p = gpu_pod(
            f"new-{j}",
            gpus=draw(st.integers(1, 3)),
            mem=None if use_pct else draw(st.integers(1, 30000)),
            pct=draw(st.integers(1, 100)) if use_pct else None,
            cores=draw(st.sampled_from([0, 5, 20, 50, 100])),
            annotations=notes,
            **extra,
        )
        p["spec"]["containers"][0]["resources"]["requests"] = {
            "cpu": draw(st.sampled_from(["100m", "1", "3"]))
        }
        if draw(st.integers(0, 4)) == 0:  # a pod without GPUs: only the kube-scheduler basics apply
            del p["spec"]["containers"][0]["resources"]["limits"]
        if draw(st.integers(0, 4)) == 0:  # a GPU-less init container shifts HAMi's segment alignment
            p["spec"]["initContainers"] = [{"name": "setup", "resources": {"requests": {"cpu": "2"}}}]
        if draw(st.integers(0, 6)) == 0:  # a namespace under quota: the fast path must hand over
            p["metadata"]["namespace"] = "team"
        pending.append(p)
    return fast, ref, pending


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_fast_and_reference_paths_agree(case: tuple[ClusterState, ClusterState, list[dict]]) -> None:
    fast, ref, pending = case
    for i, p in enumerate(pending):
        a, b = fast.schedule(p, fast=True), ref.schedule(p, fast=False)
        assert (a.node, a.annotation, a.reason) == (b.node, b.annotation, b.reason)
        if i % 2:  # the scores alone (FilteringSucceed's message) are worked out without the failures
            assert a.node_scores == b.node_scores
            assert a.failed_nodes == b.failed_nodes
        else:
            assert a.failed_nodes == b.failed_nodes
        assert a.node_scores == b.node_scores
        if a.node is not None:  # placing it must keep both states (and the index) in step
            for s, d in ((fast, a), (ref, b)):
                obj = {**p, "metadata": {**p["metadata"], "annotations": {**d.scheduled_annotations(i)}}}
                obj["spec"] = {**p["spec"], "nodeName": d.node}
                s.upsert_pod(obj)
    for name in fast.node_names:
        assert fast.node_usage(name) == ref.node_usage(name)


def test_no_nodes_leave_every_pod_unplaceable() -> None:
    """An empty cluster (a lab without workers, a caller with no Node): no numpy error, no node, and
    both paths give the reference path's reason."""
    state = ClusterState(SharingConfig())
    for p in (gpu_pod("gpu", gpus=1, mem=1000), pod("cpu")):
        fast, ref = state.schedule(p, fast=True), state.schedule(p, fast=False)
        assert (
            (fast.node, fast.reason)
            == (ref.node, ref.reason)
            == (None, "no available node, 0 nodes do not meet")
        )
    placements = plan([gpu_pod("gpu", gpus=1)], SharingConfig())
    assert [(p.node, p.reason) for p in placements] == [(None, "no available node, 0 nodes do not meet")]
