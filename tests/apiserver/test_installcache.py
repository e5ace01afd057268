"""The tables kept beside the installed client: read back whole, derived again when unreadable."""

from __future__ import annotations

import json
from pathlib import Path

from tenantgpu.apiserver.installcache import read_json, write_json
from tenantgpu.apiserver.kamajischemas import crd_schema, kamaji_schemas_cache
from tenantgpu.apiserver.schemas import models_version


def test_a_table_is_read_back_as_written(tmp_path: Path) -> None:
    path = tmp_path / "share" / "tenantgpu" / "t.json"
    write_json(path, {"a": [1, 2]})
    assert read_json(path) == {"a": [1, 2]}
    assert [p.name for p in path.parent.iterdir()] == ["t.json"]  # no temporary file left behind


def test_a_missing_or_broken_table_reads_as_none(tmp_path: Path) -> None:
    assert read_json(tmp_path / "missing.json") is None
    broken = tmp_path / "broken.json"
    broken.write_text('{"a": ')
    assert read_json(broken) is None


def test_an_unwritable_place_is_no_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    write_json(blocker / "t.json", {"a": 1})  # its directory cannot be made: derived again next time
    assert read_json(blocker / "t.json") is None


def test_kamajis_schemas_are_kept_per_client_version() -> None:
    assert crd_schema("kamaji.clastix.io", "v1alpha1", "DataStore") is not None  # derived, or read back
    path = kamaji_schemas_cache()
    assert path.name.startswith(f"kamaji-schemas-{models_version()}-")
    assert json.loads(path.read_text()).keys() >= {"TenantControlPlane", "DataStore"}
