"""The watch cache keeps each object's JSON in bytes of its own size.

orjson (3.13) returns its whole write buffer, at least 4 KiB, however short the JSON; an idle tenant
keeps a few hundred objects, and a burst's events thousands, so the cache copies what it keeps
(bench/kamaji's MiB per idle tenant fell from 4.97 to 4.71 with it).
"""

from __future__ import annotations

import tracemalloc

from tenantgpu.apiserver.jsoncodec import loads
from tenantgpu.apiserver.watchcache import encode

EVENT = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "w1.18ee2d912fec7ef1", "namespace": "default", "resourceVersion": "60"},
    "involvedObject": {"kind": "Node", "name": "w1", "uid": "w1"},
    "reason": "NodeReady",
    "message": "Node w1 status is now: NodeReady",
    "type": "Normal",
}


def test_a_kept_object_s_json_takes_about_its_own_size() -> None:
    tracemalloc.start()
    try:
        kept = [encode(EVENT) for _ in range(200)]
        per_object = tracemalloc.get_traced_memory()[0] / len(kept)
    finally:
        tracemalloc.stop()
    size = len(kept[0])
    assert loads(kept[0]) == EVENT
    assert per_object < size + 200, (per_object, size)  # bytes' header and the list's slot, not 4 KiB
