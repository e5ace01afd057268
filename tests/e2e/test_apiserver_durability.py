"""Every acknowledged write survives `kill -9` of the API server process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from apiserver_harness import RawClient

pytestmark = pytest.mark.slow  # drives real kubectl binaries or subprocesses


def _start(state_dir: Path, port: int = 0) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tenantgpu.apiserver", "--state-dir", str(state_dir), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("ready "):
        process.kill()
        pytest.fail(f"server did not start: {line}{process.stderr.read() if process.stderr else ''}")
    return process, line.split()[1]


def test_kill_9_keeps_every_acknowledged_object(tmp_path: Path) -> None:
    process, url = _start(tmp_path)
    port = int(url.rsplit(":", 1)[1])
    acknowledged: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        raw = RawClient(tmp_path / "admin.kubeconfig")
        i = 0
        while not stop.is_set():
            name = f"cm-{i}"
            try:
                response = raw.request(
                    "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": name}}
                )
            except OSError:
                return
            if response.status == 201:
                acknowledged.append(name)
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    while len(acknowledged) < 150 and thread.is_alive():
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    stop.set()
    thread.join(10)

    restarted, _ = _start(tmp_path, port)
    try:
        raw = RawClient(tmp_path / "admin.kubeconfig")
        items = raw.request("GET", "/api/v1/namespaces/default/configmaps").json()["items"]
        stored = {item["metadata"]["name"] for item in items}
        assert set(acknowledged) <= stored
        versions = [int(item["metadata"]["resourceVersion"]) for item in items]
        created = raw.request(
            "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "after"}}
        )
        assert int(created.json()["metadata"]["resourceVersion"]) > max(versions)  # revisions never go back
    finally:
        restarted.terminate()
        restarted.wait(10)
