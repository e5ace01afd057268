"""DataStore status is derived from the TCPs that name it."""

from tenantgpu.kamaji import model
from tenantgpu.kamaji.datastores import derive_datastore_status


def _tcp(name: str, store: str, deleting: bool = False) -> dict:
    tcp = model.tenant_control_plane(name, version="v1.31.4", datastore=store)
    if deleting:
        tcp["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return tcp


def test_used_by_lists_live_tcps_of_this_store_only() -> None:
    store = model.datastore("default")
    tcps = [
        _tcp("b", "default"),
        _tcp("a", "default"),
        _tcp("c", "other"),
        _tcp("d", "default", deleting=True),
    ]
    assert derive_datastore_status(store, tcps) == {"ready": True, "usedBy": ["default/a", "default/b"]}


def test_a_driver_the_lab_cannot_serve_is_not_ready() -> None:
    store = model.datastore("pg", driver="PostgreSQL")
    assert derive_datastore_status(store, [])["ready"] is False
