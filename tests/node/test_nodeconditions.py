"""The kubelet's node conditions and the events their changes make (kube's pkg/kubelet/nodestatus)."""

from __future__ import annotations

from tenantgpu.node import nodeconditions as nc


def test_a_new_node_reports_every_condition_as_a_change() -> None:
    posted = nc.kubelet_conditions(None, now="T1")
    assert [(c["type"], c["status"], c["reason"]) for c in posted] == [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
        ("Ready", "True", "KubeletReady"),
    ]
    assert all(c["lastTransitionTime"] == c["lastHeartbeatTime"] == "T1" for c in posted)
    assert nc.transitions(None, posted) == [
        "NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID", "NodeReady",
    ]  # fmt: skip


def test_an_unchanged_condition_keeps_its_transition_time_and_makes_no_event() -> None:
    first = nc.kubelet_conditions(None, now="T1")
    again = nc.kubelet_conditions(first, now="T2")
    assert [c["lastTransitionTime"] for c in again] == ["T1"] * 4
    assert [c["lastHeartbeatTime"] for c in again] == ["T2"] * 4
    assert nc.transitions(first, again) == []


def test_conditions_the_node_controller_set_unknown_change_back() -> None:
    first = nc.kubelet_conditions(None, now="T1")
    unknown = [
        {**c, "status": "Unknown", "reason": "NodeStatusUnknown", "lastTransitionTime": "T2"} for c in first
    ]
    unknown[1]["status"] = "False"  # a condition the controller left alone keeps its time
    unknown[1]["lastTransitionTime"] = "T1"
    back = nc.kubelet_conditions(unknown, now="T3")
    assert [c["lastTransitionTime"] for c in back] == ["T3", "T1", "T3", "T3"]
    assert nc.transitions(unknown, back) == ["NodeHasSufficientMemory", "NodeHasSufficientPID", "NodeReady"]


def test_the_texts_are_the_kubelets() -> None:
    assert nc.status_event_message("w1", "NodeReady") == "Node w1 status is now: NodeReady"
    assert nc.node_reference("w1") == {"kind": "Node", "name": "w1", "uid": "w1"}
    assert nc.transitions([{"type": "Ready", "status": "True"}], [{"type": "Ready", "status": "False"}]) == [
        "NodeNotReady"
    ]
    assert nc.transitions(
        [{"type": "MemoryPressure", "status": "False"}], [{"type": "MemoryPressure", "status": "True"}]
    ) == ["NodeHasInsufficientMemory"]
