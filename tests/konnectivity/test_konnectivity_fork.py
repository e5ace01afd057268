"""A process whose tunnels carry traffic starts child processes safely.

grpcio registers fork handlers by default. When the lab's process, with its konnectivity servers busy,
started a control-plane process again, those handlers ran in the forked child before it could exec and
aborted it now and then ("Check failed: next_worker->state == KICKED", exit -6; seen twice in three
restarts of a child while a seed-sized lab ran). The project switches them off where it first imports
grpc, so nothing of gRPC runs between fork and exec.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "fork_during_traffic.py"


def test_children_started_during_tunnel_traffic_skip_grpcs_fork_handlers() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "10"], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [0] * 10
    # With the handlers on, gRPC logs from fork_posix.cc on every fork while its threads are busy.
    assert "fork_posix" not in done.stderr
    assert "Check failed" not in done.stderr
