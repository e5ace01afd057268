"""`tenantgpu node run` reports a user's mistakes in one line with exit code 2."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from tenantgpu.cli import main


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kc"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {token: abc}}]\n"
        "contexts: [{name: t, context: {cluster: c, user: u}}]\n"
    )
    return path


def test_bad_gpu_spec_is_a_user_error(tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path, "http://127.0.0.1:1")
    result = CliRunner().invoke(main, ["node", "run", "--kubeconfig", str(kc), "--name", "n", "--gpu", "L4"])
    assert result.exit_code == 2
    assert "expected MODEL:MEMORY_MIB" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("NVIDIA L4:23034:2:0:9", "expected MODEL:MEMORY_MIB[:COUNT[:NUMA]], at most 4 fields"),
        ("NVIDIA L4:23034:1:-1", "the NUMA node must be 0 or more"),
        ("NVIDIA L4:23034:0", "count must be positive"),
        ("NVIDIA L4:0", "memory must be a positive number of MiB"),
        ("NVIDIA L4:many", "memory, count and NUMA must be integers"),
    ],
)
def test_each_bad_gpu_spec_says_what_is_wrong(tmp_path: Path, spec: str, message: str) -> None:
    """Found by probing: a fifth field and a negative NUMA node both said `memory and count must be positive`."""
    kc = _kubeconfig(tmp_path, "http://127.0.0.1:1")
    result = CliRunner().invoke(main, ["node", "run", "--kubeconfig", str(kc), "--name", "n", "--gpu", spec])
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_a_bad_runtime_handler_is_a_user_error(tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path, "http://127.0.0.1:1")
    args = ["node", "run", "--kubeconfig", str(kc), "--name", "n", "--runtime-handler", "Kata VM"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "--runtime-handler 'Kata VM': expected a DNS label" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_missing_kubeconfig(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["node", "run", "--kubeconfig", str(tmp_path / "nope"), "--name", "n"])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_unreachable_api_server(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kc = _kubeconfig(tmp_path, f"http://127.0.0.1:{port}")
    result = CliRunner().invoke(
        main, ["node", "run", "--kubeconfig", str(kc), "--name", "n", "--gpu", "NVIDIA L4:23034:2"]
    )
    assert result.exit_code == 2
    assert "cannot reach the API server" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give either --kubeconfig or --join"),
        (["--join", "127.0.0.1:6443"], "--join needs --token and --discovery-token-ca-cert-hash"),
        (
            ["--join", "127.0.0.1:6443", "--token", "ABCDEF.0123456789abcdef", "--discovery-token-ca-cert-hash",
             "sha256:" + "0" * 64],
            '--token: the bootstrap token "ABCDEF.0123456789abcdef" was not of the form',
        ),
        (
            ["--join", "127.0.0.1:6443", "--token", "abcdef.0123456789abcdef", "--discovery-token-ca-cert-hash",
             "md5:00"],
            '--discovery-token-ca-cert-hash "md5:00": expected sha256:<64 hex digits>',
        ),
    ],
)  # fmt: skip
def test_joining_needs_a_token_and_the_cas_hash_in_kubeadms_forms(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["node", "run", "--name", "n", *args])
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_both_kubeconfig_and_join_is_a_user_error(tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path, "http://127.0.0.1:1")
    result = CliRunner().invoke(
        main, ["node", "run", "--name", "n", "--kubeconfig", str(kc), "--join", "127.0.0.1:6443"]
    )
    assert result.exit_code == 2 and "give either --kubeconfig or --join" in result.output
