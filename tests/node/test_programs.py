"""The commands `kubectl exec` can run in a simulated container, and what they print."""

from __future__ import annotations

from tenantgpu.node.gpu_runtime import GpuView
from tenantgpu.node.programs import COMMAND_NOT_FOUND, ContainerView, run

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


def test_a_container_without_a_gpu_has_no_nvidia_smi() -> None:
    result = run(["nvidia-smi"], PLAIN_CONTAINER)
    assert result.exit_code == COMMAND_NOT_FOUND
    assert 'exec: "nvidia-smi": executable file not found in $PATH' in result.stderr


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
    assert run(["sh", "-c", "ls /"], GPU_CONTAINER).stderr == "sh: 1: ls: not found\n"
    assert run(["sh", "-c", "exit 3"], GPU_CONTAINER).exit_code == 3
    assert run(["sh", "-c", "exit"], GPU_CONTAINER).exit_code == 0
    assert run(["sh", "-c", "exit 300"], GPU_CONTAINER).exit_code == 44  # the status is a byte
    interactive = run(["bash"], GPU_CONTAINER)
    assert interactive.exit_code == COMMAND_NOT_FOUND and "no interactive shell" in interactive.stderr


def test_an_unknown_command_exits_127_and_says_what_there_is() -> None:
    result = run(["python", "train.py"], GPU_CONTAINER)
    assert result.exit_code == COMMAND_NOT_FOUND
    assert result.stdout == ""
    assert 'exec: "python": executable file not found in $PATH' in result.stderr
    assert "nvidia-smi" in result.stderr
