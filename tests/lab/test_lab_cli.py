"""The lab commands answer a user's mistakes with one line, never a traceback."""

import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tenantgpu.cli import main
from tenantgpu.lab.process import DetachedLab, LabError
from tenantgpu.lab.state import StateDir


def _lab_processes(state_dir: Path) -> list[str]:
    """Command lines of live lab processes serving this state directory."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            zombie = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        if "tenantgpu" in argv and str(state_dir) in argv and not zombie:
            found.append(" ".join(argv))
    return found


def test_kubeconfig_of_an_unknown_tenant_is_a_user_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["kubeconfig", "nobody", "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "no kubeconfig for tenant 'nobody'" in result.output


def test_down_without_a_lab_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["down", "--state-dir", str(tmp_path / "none")])
    assert result.exit_code == 0
    assert "no lab is running" in result.output


def test_status_without_a_lab_exits_1(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["status", "--state-dir", str(tmp_path), "-o", "json"])
    assert result.exit_code == 1
    assert '"running": false' in result.output


def test_up_with_a_broken_lab_file_names_the_line(tmp_path: Path) -> None:
    lab = tmp_path / "lab.yaml"
    lab.write_text("apiVersion: tenantgpu.io/v1alpha1\nkind: Lab\nspec:\n  tenants: []\n")
    result = CliRunner().invoke(main, ["up", "-d", "-f", str(lab), "--state-dir", str(tmp_path / "s")])
    assert result.exit_code == 2
    assert f"{lab}:4" in result.output
    assert "Traceback" not in result.output
    # The lab process, started while the file was checked, went without creating anything.
    assert not (tmp_path / "s").exists()
    assert _lab_processes(tmp_path / "s") == []


def test_a_detached_lab_let_go_before_the_go_ahead_starts_nothing(tmp_path: Path) -> None:
    state = StateDir.at(tmp_path / "lab")
    launch = DetachedLab(state, None)
    launch.abort()
    assert launch.child.returncode is not None
    assert not state.root.exists()


def test_a_lab_process_whose_caller_died_before_the_go_ahead_exits_by_itself(tmp_path: Path) -> None:
    # As when `up -d` is interrupted while it checks the lab file: the caller vanishes, no abort.
    state_dir = tmp_path / "lab"
    caller = (
        "import os, sys\n"
        "from tenantgpu.lab.process import DetachedLab\n"
        "from tenantgpu.lab.state import StateDir\n"
        f"launch = DetachedLab(StateDir.at({str(state_dir)!r}), None)\n"
        "print(launch.child.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    done = subprocess.run([sys.executable, "-c", caller], capture_output=True, text=True, timeout=60)
    child = int(done.stdout.split()[0])
    deadline = time.monotonic() + 30
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child)
    assert not state_dir.exists()


def _alive(pid: int) -> bool:
    """Whether the process still runs (a zombie waiting for its reaper counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_bad_worker_process_count_is_exit_2_with_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["up", "-d", "--worker-processes", "lots", "--state-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert result.output.strip() == "error: worker processes: expected a number or auto, got 'lots'"


def test_a_bad_control_plane_process_count_is_exit_2_with_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["up", "-d", "--control-plane-processes", "-2", "--state-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert result.output.strip() == "error: control-plane processes: expected 0 or more, got -2"


def test_a_lab_process_that_died_before_the_go_ahead_is_reported_and_nothing_is_created(
    tmp_path: Path,
) -> None:
    state = StateDir.at(tmp_path / "lab")
    launch = DetachedLab(state, None)
    launch.child.kill()
    launch.child.wait(10)
    with pytest.raises(LabError, match=r"exited \(code -9\) before it started"):
        launch.run(lambda _: None)
    assert not state.root.exists()


def test_a_state_directory_that_cannot_be_made_is_exit_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    state_dir = tmp_path / "a-file" / "lab"
    for detach in (["-d"], []):
        result = CliRunner().invoke(main, ["up", *detach, "--state-dir", str(state_dir)])
        assert result.exit_code == 2
        assert result.output.strip() == (
            f"error: cannot create the state directory {state_dir}: Not a directory"
        )
    assert _lab_processes(state_dir) == []


def test_down_purge_says_whether_it_deleted_anything(tmp_path: Path) -> None:
    missing = CliRunner().invoke(main, ["down", "--purge", "--state-dir", str(tmp_path / "none")])
    assert missing.exit_code == 0
    assert missing.output.splitlines() == [
        f"no lab is running in {tmp_path / 'none'}",
        f"nothing to delete in {tmp_path / 'none'}",
    ]
    (tmp_path / "old" / "logs").mkdir(parents=True)
    stale = CliRunner().invoke(main, ["down", "--purge", "--state-dir", str(tmp_path / "old")])
    assert stale.exit_code == 0
    assert stale.output.splitlines()[-1] == f"deleted {tmp_path / 'old'}"
    assert not (tmp_path / "old").exists()
