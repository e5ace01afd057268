"""How a lab spreads its tenants over DataStores (one control-plane process each), and what a bad setting says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenantgpu.kamaji import model
from tenantgpu.lab import datastores
from tenantgpu.lab.datastores import assign_datastore, control_plane_process_count, lab_datastores
from tenantgpu.lab.process import LabError
from tenantgpu.lab.state import StateDir


def test_auto_adds_a_process_per_four_cores_for_a_lab_of_several_tenants(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(datastores.CONTROL_PLANE_PROCESSES_ENV, raising=False)
    monkeypatch.setattr(datastores.os, "cpu_count", lambda: 2)
    assert control_plane_process_count(None, 10) == 0
    monkeypatch.setattr(datastores.os, "cpu_count", lambda: 8)
    assert control_plane_process_count("auto", 10) == 2
    # The seed lab's two tenants start faster in one process.
    assert control_plane_process_count("auto", 2) == 0


def test_a_count_is_capped_so_every_store_gets_a_tenant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(datastores.CONTROL_PLANE_PROCESSES_ENV, "5")
    assert control_plane_process_count(None, 3) == 2
    assert control_plane_process_count("1", 2) == 1
    assert control_plane_process_count("0", 10) == 0


@pytest.mark.parametrize("setting", ["two", "-1"])
def test_a_bad_setting_is_one_clear_line(setting: str) -> None:
    with pytest.raises(LabError, match="control-plane processes: expected"):
        control_plane_process_count(setting, 4)


def test_the_lab_stores_are_default_then_a_file_each_in_the_state_dir(tmp_path: Path) -> None:
    state = StateDir.at(tmp_path)
    stores = lab_datastores(state, 2)
    assert [s["metadata"]["name"] for s in stores] == ["default", "datastore-1", "datastore-2"]
    assert [model.datastore_endpoint(s) for s in stores] == [
        f"sqlite://{state.datastore}",
        f"sqlite://{tmp_path}/datastores/datastore-1.sqlite",
        f"sqlite://{tmp_path}/datastores/datastore-2.sqlite",
    ]
    assert all(s["spec"]["driver"] == "sqlite" for s in stores)


def test_tenants_go_round_robin_in_the_lab_files_order(tmp_path: Path) -> None:
    stores = lab_datastores(StateDir.at(tmp_path), 1)
    assert [assign_datastore(stores, i) for i in range(5)] == [
        "default",
        "datastore-1",
        "default",
        "datastore-1",
        "default",
    ]
    assert assign_datastore(lab_datastores(StateDir.at(tmp_path), 0), 3) == "default"
