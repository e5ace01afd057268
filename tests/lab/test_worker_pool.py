"""How many worker processes a lab gets, and what a bad setting says."""

from __future__ import annotations

import pytest

from tenantgpu.lab import workerpool
from tenantgpu.lab.process import LabError
from tenantgpu.lab.workerpool import worker_process_count


def test_auto_gives_one_worker_process_per_two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(workerpool.WORKER_PROCESSES_ENV, raising=False)
    monkeypatch.setattr(workerpool.os, "cpu_count", lambda: 2)
    assert worker_process_count(None, 10, 20) == 1
    monkeypatch.setattr(workerpool.os, "cpu_count", lambda: 8)
    assert worker_process_count("auto", 10, 20) == 4
    # Never more processes than tenants with workers to put in them.
    assert worker_process_count("auto", 2, 6) == 2


def test_auto_keeps_a_small_lab_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # The seed lab (2 worker nodes) starts faster without a second process to import.
    monkeypatch.delenv(workerpool.WORKER_PROCESSES_ENV, raising=False)
    monkeypatch.setattr(workerpool.os, "cpu_count", lambda: 8)
    assert worker_process_count("auto", 2, 2) == 0
    assert worker_process_count("auto", 3, 3) == 3
    assert worker_process_count("1", 2, 2) == 1


def test_one_core_keeps_everything_in_the_lab_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(workerpool.WORKER_PROCESSES_ENV, raising=False)
    monkeypatch.setattr(workerpool.os, "cpu_count", lambda: 1)
    assert worker_process_count(None, 3, 6) == 0


def test_the_environment_sets_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(workerpool.WORKER_PROCESSES_ENV, "0")
    assert worker_process_count(None, 5, 5) == 0
    monkeypatch.setenv(workerpool.WORKER_PROCESSES_ENV, "3")
    assert worker_process_count(None, 5, 5) == 3


@pytest.mark.parametrize("setting", ["many", "-1", "1.5"])
def test_a_bad_setting_is_one_clear_line(setting: str) -> None:
    with pytest.raises(LabError, match="worker processes: expected"):
        worker_process_count(setting, 2, 2)
