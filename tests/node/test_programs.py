"""The commands a simulated container runs, by `kubectl exec` or as its own command, and what they print."""

from __future__ import annotations

import math

import pytest

from tenantgpu.node.execresult import ExecResult
from tenantgpu.node.gpu_runtime import GpuView
from tenantgpu.node.programs import COMMAND_NOT_FOUND, ContainerView, main_command, run

A100 = GpuView(0, "GPU-aaaa", "NVIDIA A100-SXM4-80GB", 81920, 8000)
ENV = {
    "NVIDIA_VISIBLE_DEVICES": "GPU-aaaa",
    "CUDA_DEVICE_MEMORY_LIMIT_0": "8000m",
    "CUDA_DEVICE_SM_LIMIT": "10",
}
GPU_CONTAINER = ContainerView(hostname="trainer-0", env=ENV, gpus=[A100], gpu_memory_used_mib=1200)
PLAIN_CONTAINER = ContainerView(hostname="web", env={"PATH": "/usr/bin"})


def test_nvidia_smi_shows_the_memory_limit_hami_core_exposes_and_the_memory_in_use() -> None:
    result = run(["nvidia-smi"], GPU_CONTAINER)
    assert result.exit_code == 0 and result.stderr == ""
    assert "NVIDIA A100-SXM4-80GB" in result.stdout
    assert "1200MiB / 8000MiB" in result.stdout  # total = the container's limit, not the card's 81920
    assert result.stdout.endswith("\n")
    assert run(["/usr/bin/nvidia-smi"], GPU_CONTAINER).stdout == result.stdout


def test_nvidia_smi_lists_its_gpus_with_dash_l() -> None:
    result = run(["nvidia-smi", "-L"], GPU_CONTAINER)
    assert result.stdout == "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-aaaa)\n" and result.exit_code == 0
    assert run(["nvidia-smi", "--list-gpus"], GPU_CONTAINER) == result


@pytest.mark.parametrize(
    ("args", "stdout"),
    [
        (
            ["--query-gpu=name,memory.total,memory.used,memory.free", "--format=csv"],
            "name, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n"
            "NVIDIA A100-SXM4-80GB, 8000 MiB, 1200 MiB, 6800 MiB\n",
        ),
        (["--query-gpu=index,uuid,memory.total", "--format=csv,noheader,nounits"], "0, GPU-aaaa, 8000\n"),
        (["--query-gpu", "count,driver_version", "--format", "csv,noheader"], "1, 550.54.15\n"),
    ],
)
def test_nvidia_smi_answers_query_gpu_with_the_memory_hami_core_exposes(args: list[str], stdout: str) -> None:
    result = run(["nvidia-smi", *args], GPU_CONTAINER)
    assert (result.stdout, result.stderr, result.exit_code) == (stdout, "", 0)


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (
            ["--query-gpu=temperature.gpu", "--format=csv"],
            'Field "temperature.gpu" is not a valid field to query.',
        ),
        (["--query-gpu=name"], "Option --query-gpu needs --format=csv beside it."),
        (["--query-gpu=name", "--format=xml"], 'Format "xml" is not supported'),
        (["-q"], '"-q" is not understood here'),
    ],
)
def test_nvidia_smi_refuses_what_it_does_not_simulate_with_exit_code_2(args: list[str], why: str) -> None:
    result = run(["nvidia-smi", *args], GPU_CONTAINER)
    assert result.exit_code == 2 and result.stdout == ""
    assert why in result.stderr and "--query-gpu=FIELDS --format=csv" in result.stderr


def test_a_container_without_a_gpu_has_no_nvidia_smi() -> None:
    result = run(["nvidia-smi"], PLAIN_CONTAINER)
    assert result.exit_code == COMMAND_NOT_FOUND
    assert 'exec: "nvidia-smi": executable file not found in $PATH' in result.stderr
    # the programs it does offer, without the one it just said is missing
    assert "runs: echo, env, false, hostname, printenv, true, and sh -c" in result.stderr
    assert "nvidia-smi, printenv" in run(["python"], GPU_CONTAINER).stderr


def test_env_and_printenv_show_hamis_variables() -> None:
    env = run(["env"], GPU_CONTAINER)
    assert env.stdout.splitlines() == sorted(f"{k}={v}" for k, v in ENV.items())
    assert run(["printenv", "CUDA_DEVICE_SM_LIMIT"], GPU_CONTAINER).stdout == "10\n"
    # like coreutils: the values that are set, and exit 1 when one is not
    missing = run(["printenv", "CUDA_DEVICE_SM_LIMIT", "NOT_SET"], GPU_CONTAINER)
    assert (missing.stdout, missing.exit_code) == ("10\n", 1)


def test_small_utilities() -> None:
    assert run(["hostname"], GPU_CONTAINER).stdout == "trainer-0\n"
    assert run(["echo", "a", "b"], GPU_CONTAINER).stdout == "a b\n"
    assert run(["echo", "-n", "a"], GPU_CONTAINER).stdout == "a"
    assert run(["true"], GPU_CONTAINER).exit_code == 0
    assert run(["false"], GPU_CONTAINER).exit_code == 1


def test_sh_c_runs_one_simple_command_and_refuses_shell_syntax() -> None:
    assert run(["sh", "-c", "printenv CUDA_DEVICE_MEMORY_LIMIT_0"], GPU_CONTAINER).stdout == "8000m\n"
    assert run(["/bin/bash", "-c", "echo 'two words'"], GPU_CONTAINER).stdout == "two words\n"
    piped = run(["sh", "-c", "nvidia-smi | grep MiB"], GPU_CONTAINER)
    assert piped.exit_code == 2 and "without pipes" in piped.stderr
    assert run(["sh", "-c", "echo a > /tmp/x"], GPU_CONTAINER).exit_code == 2
    assert run(["sh", "-c", "echo $HOME"], GPU_CONTAINER).exit_code == 2
    assert run(["sh", "-c", "ls /"], GPU_CONTAINER).stderr == "sh: 1: ls: not found\n"
    assert run(["sh", "-c", "exit 3"], GPU_CONTAINER).exit_code == 3
    assert run(["sh", "-c", "exit"], GPU_CONTAINER).exit_code == 0
    assert run(["sh", "-c", "exit 300"], GPU_CONTAINER).exit_code == 44  # the status is a byte
    # a shell without input ends at once (exec without -i); a session with input is the API server's
    assert run(["bash"], GPU_CONTAINER) == ExecResult()
    flagged = run(["bash", "-l"], GPU_CONTAINER)
    assert flagged.exit_code == COMMAND_NOT_FOUND and "no interactive shell" in flagged.stderr


def test_an_unknown_command_exits_127_and_says_what_there_is() -> None:
    result = run(["python", "train.py"], GPU_CONTAINER)
    assert result.exit_code == COMMAND_NOT_FOUND
    assert result.stdout == ""
    assert 'exec: "python": executable file not found in $PATH' in result.stderr
    assert "nvidia-smi" in result.stderr


def test_sh_c_runs_simple_commands_joined_by_semicolons_and_and_or() -> None:
    both = run(["sh", "-c", "hostname; printenv CUDA_DEVICE_SM_LIMIT"], GPU_CONTAINER)
    assert (both.stdout, both.exit_code) == ("trainer-0\n10\n", 0)
    assert run(["sh", "-c", "false && echo no"], GPU_CONTAINER) == run(["false"], GPU_CONTAINER)
    assert run(["sh", "-c", "false || echo yes"], GPU_CONTAINER).stdout == "yes\n"
    assert run(["sh", "-c", "true || echo no; echo after"], GPU_CONTAINER).stdout == "after\n"
    stopped = run(["bash", "-c", "echo one; exit 4; echo two"], GPU_CONTAINER)
    assert (stopped.stdout, stopped.exit_code) == ("one\n", 4)
    missing = run(["sh", "-c", "ls && echo no"], GPU_CONTAINER)
    assert (missing.stdout, missing.stderr, missing.exit_code) == ("", "sh: 1: ls: not found\n", 127)
    assert run(["sh", "-c", "echo a &"], GPU_CONTAINER).exit_code == 2  # background jobs need a real shell
    dangling = run(["sh", "-c", "echo a &&"], GPU_CONTAINER)
    assert dangling.exit_code == 2 and "Syntax error" in dangling.stderr
    assert run(["sh", "-c", "echo a;"], GPU_CONTAINER).stdout == "a\n"


def test_a_container_command_of_known_programs_runs_at_start_and_ends() -> None:
    smi = main_command(["nvidia-smi"], GPU_CONTAINER)
    assert smi is not None and smi.runs_for == 0
    assert smi.output == run(["nvidia-smi"], GPU_CONTAINER)
    failing = main_command(["sh", "-c", "echo checking && false"], GPU_CONTAINER)
    assert failing is not None and (failing.output.stdout, failing.output.exit_code) == ("checking\n", 1)
    assert failing.runs_for == 0
    no_gpu = main_command(["nvidia-smi"], PLAIN_CONTAINER)
    assert no_gpu is not None and no_gpu.output.exit_code == COMMAND_NOT_FOUND


@pytest.mark.parametrize(
    ("command", "runs_for", "stdout"),
    [
        (["sleep", "30"], 30.0, ""),
        (["sleep", "1m", "30"], 90.0, ""),  # GNU sleep adds its operands
        (["sleep", "infinity"], math.inf, ""),
        (["bash", "-c", "sleep 86400"], 86400.0, ""),  # HAMi's examples
        (["sh", "-c", "nvidia-smi -q || echo no smi; sleep 2.5"], 2.5, "no smi\n"),  # -q is not simulated
        (["sh", "-c", "hostname && sleep 1h"], 3600.0, "trainer-0\n"),
    ],
)
def test_a_final_sleep_keeps_the_container_running(command: list[str], runs_for: float, stdout: str) -> None:
    main = main_command(command, GPU_CONTAINER)
    assert main is not None
    assert (main.runs_for, main.output.stdout, main.output.exit_code) == (runs_for, stdout, 0)


def test_a_sleep_the_script_does_not_reach_does_not_run() -> None:
    skipped = main_command(["sh", "-c", "false && sleep 60"], GPU_CONTAINER)
    assert skipped is not None and (skipped.runs_for, skipped.output.exit_code) == (0, 1)
    exited = main_command(["sh", "-c", "exit 3; sleep 60"], GPU_CONTAINER)
    assert exited is not None and (exited.runs_for, exited.output.exit_code) == (0, 3)


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["python", "train.py"],
        ["sh", "-c", "python train.py && sleep 10"],
        ["sh", "-c", "nvidia-smi | tee /log"],
        ["sleep", "soon"],
        ["sleep"],
        ["sh", "-c", "sleep 5; nvidia-smi"],  # a sleep before other commands is beyond the simulation
        ["bash"],
        ["exit", "1"],  # a shell builtin, not a program an image has
    ],
)
def test_commands_the_simulation_does_not_know_are_left_to_run_as_workloads(command: list[str]) -> None:
    assert main_command(command, GPU_CONTAINER) is None
