"""The state directory knows whether a lab runs in it, even after the lab was killed with -9."""

import os
import subprocess
import sys

import pytest

from tenantgpu.lab.state import LabLock, LabLockedError, StateDir


def test_lock_is_exclusive_and_writes_the_pid(tmp_path) -> None:
    state = StateDir.at(tmp_path / "s")
    lock = LabLock(state)
    lock.acquire()
    try:
        assert state.read_pid() == os.getpid()
        assert state.running_pid() == os.getpid()
        with pytest.raises(LabLockedError) as caught:
            # flock is per open file description, so a second acquire in this process also conflicts.
            LabLock(state).acquire()
        assert caught.value.pid == os.getpid()
    finally:
        lock.release()
    assert state.running_pid() is None
    assert not state.pid_file.exists()


def test_stale_pid_file_of_a_killed_lab_is_removed(tmp_path) -> None:
    state = StateDir.at(tmp_path / "s")
    code = (
        "import os, signal, sys\n"
        "from tenantgpu.lab.state import LabLock, StateDir\n"
        f"LabLock(StateDir.at({str(state.root)!r})).acquire()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=False)
    assert state.read_pid() is not None
    assert state.running_pid() is None
    assert not state.pid_file.exists()
