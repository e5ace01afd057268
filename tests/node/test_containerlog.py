"""The log of a container that stands for a lab component: the component's start-up lines, then what
it logged since the container started, as `kubectl logs` (with --tail, --timestamps, -f) reads it."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from tenantgpu.klog import ComponentLog
from tenantgpu.node.containerlog import ComponentContainerLog, ContainerLog, component_of


def texts(rendered: str) -> list[str]:
    return [line.split("] ", 1)[1] for line in rendered.splitlines()]


def test_a_container_shows_the_start_up_lines_then_only_what_came_after_it_started() -> None:
    component = ComponentLog()
    component.info("s.go:1", "Initializing")
    component.started()
    component.info("s.go:2", "before the container")
    container = ComponentContainerLog(component)
    component.info("s.go:3", "after", pod="p")
    assert texts(container.render()) == ['"Initializing"', '"after" pod="p"']
    assert texts(container.render(tail_lines=1)) == ['"after" pod="p"']
    assert container.render(tail_lines=0) == ""


def test_start_up_lines_are_stamped_no_earlier_than_the_container_started() -> None:
    component = ComponentLog()
    component.info("s.go:1", "Initializing")
    component.started()
    later = time.time() + 60
    container = ComponentContainerLog(component, started=later)
    stamp = container.render(timestamps=True).split(" ", 1)[0]
    assert stamp == datetime.fromtimestamp(later, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert component.startup[0].stamp() < stamp


def test_following_reads_each_new_line_once_even_when_the_window_moves_on() -> None:
    component = ComponentLog(capacity=2)
    component.started()
    container = ComponentContainerLog(component)
    seen = container.count()
    component.info("s.go:1", "one")
    assert texts(container.render_from(seen)) == ['"one"']
    seen = container.count()
    for word in ("two", "three", "four"):
        component.info("s.go:1", word)
    # "two" has left the two-line window: what is still there and new is sent
    assert texts(container.render_from(seen)) == ['"three"', '"four"']
    seen = container.count()
    container.write("process exited with code 137")
    assert container.render_from(seen) == "process exited with code 137\n"


def test_a_plain_container_log_counts_and_renders_from_a_point() -> None:
    log = ContainerLog()
    log.write("a\nb")
    assert log.count() == 2
    log.write("c")
    assert log.render_from(2) == "c\n"


def test_the_component_of_a_pod_comes_from_the_charts_or_kamajis_label_in_kube_system() -> None:
    def pod(namespace: str, labels: dict[str, str]) -> dict[str, object]:
        return {"metadata": {"namespace": namespace, "labels": labels}}

    assert (
        component_of(pod("kube-system", {"app.kubernetes.io/component": "hami-scheduler"}))
        == "hami-scheduler"
    )
    assert component_of(pod("kube-system", {"k8s-app": "konnectivity-agent"})) == "konnectivity-agent"
    assert component_of(pod("default", {"k8s-app": "konnectivity-agent"})) == ""
    assert component_of(pod("kube-system", {"app": "x"})) == ""
