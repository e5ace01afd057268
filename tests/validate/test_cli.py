"""`tenantgpu validate` arguments: mistakes are one line and exit 2; the check list names every check."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tenantgpu.cli import main
from tenantgpu.validate.checks import check_names


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--state-dir", "/nonexistent-dir"], "/nonexistent-dir: no such state directory"),
        (["--kubeconfig", "tenant-a"], "--kubeconfig 'tenant-a': expected TENANT=PATH"),
        (["--kubeconfig", "a=/nonexistent"], "/nonexistent is not a file"),
        (["--state-dir", "x", "--kubeconfig", "a=b"], "either --state-dir or --kubeconfig"),
        (["--management-kubeconfig", "m"], "--management-kubeconfig goes with --kubeconfig"),
    ],
)
def test_bad_targets_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["validate", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def _kubeconfig(path: Path) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n"
        "users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
        "current-context: x\n"
    )
    return path


def test_unknown_check_names_the_known_ones(tmp_path: Path) -> None:
    config = _kubeconfig(tmp_path / "a.kubeconfig")
    result = CliRunner().invoke(main, ["validate", "--kubeconfig", f"a={config}", "--only", "nope"])
    assert result.exit_code == 2
    assert "no check named 'nope'; known: management-plane-ready" in result.output


def test_a_file_that_is_not_a_kubeconfig_is_a_user_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.kubeconfig"
    bad.write_text("just: text\n")
    result = CliRunner().invoke(main, ["validate", "--kubeconfig", f"a={bad}"])
    assert result.exit_code == 2 and "not a kubeconfig" in result.output


def test_an_unreachable_cluster_fails_every_check_it_runs_with_json_output(tmp_path: Path) -> None:
    import json

    config = _kubeconfig(tmp_path / "a.kubeconfig")
    junit = tmp_path / "out.xml"
    result = CliRunner().invoke(
        main,
        [
            "validate",
            "--kubeconfig",
            f"a={config}",
            "--only",
            "tenant-control-planes-ready,workers-joined",
            "-o",
            "json",
            "--junit-file",
            str(junit),
        ],
    )
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert [c["name"] for c in data["checks"]] == ["tenant-control-planes-ready", "workers-joined"]
    assert data["failed"] == 2
    assert "https://127.0.0.1:1" in data["checks"][0]["seen"]
    assert junit.read_text().startswith('<?xml version="1.0"')


def test_list_names_every_check() -> None:
    result = CliRunner().invoke(main, ["validate", "--list"], terminal_width=250)
    assert result.exit_code == 0
    for name in check_names():
        assert name in result.output


def test_a_junit_file_that_cannot_be_written_is_refused_before_the_run(tmp_path: Path) -> None:
    """Found by probing: the suite ran, printed its table, then died with a traceback and exit 1,
    which reads as a failed check."""
    config = _kubeconfig(tmp_path / "a.kubeconfig")
    args = ["validate", "--kubeconfig", f"a={config}", "--only", "workers-joined", "--junit-file"]
    missing = tmp_path / "no" / "such" / "x.xml"
    result = CliRunner().invoke(main, [*args, str(missing)])
    assert result.exit_code == 2
    assert result.output == f"error: cannot write {missing}: {missing.parent} is not a directory\n"
    # a folder that looks writable but is not (root may write anywhere but /proc): after the run, still
    # one line and exit 2
    result = CliRunner().invoke(main, [*args, "/proc/x"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.splitlines()[-1] == "error: cannot write /proc/x: No such file or directory"
