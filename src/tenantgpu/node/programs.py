"""The programs a simulated container can run for `kubectl exec`: what a HAMi user checks from inside.

A simulated container has no file system and no processes, so `kubectl exec` offers the few commands
people run to see what HAMi gave a container: `nvidia-smi` (the memory limit HAMi-core exposes),
`env` / `printenv` (HAMi's `CUDA_DEVICE_*` and `NVIDIA_VISIBLE_DEVICES`), `hostname`, `echo`, `true`,
`false`, and `sh -c` / `bash -c` around one of them or `exit N`. Anything else exits 127, as a shell
does for a command it cannot find, and says what is there instead.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from tenantgpu.node.gpu_runtime import GpuView, nvidia_smi

COMMAND_NOT_FOUND = 127
SHELLS = ("sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash")
# Characters that would need a real shell (pipes, redirections, several commands, expansions).
_SHELL_SYNTAX = set("|&;<>()$`*?[]{}~")


@dataclass(frozen=True)
class ExecResult:
    """What a finished command wrote and how it ended."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


@dataclass(frozen=True)
class ContainerView:
    """What a command inside one container can see."""

    hostname: str
    env: dict[str, str] = field(default_factory=dict)
    gpus: list[GpuView] = field(default_factory=list)
    gpu_memory_used_mib: int = 0


Program = Callable[[list[str], ContainerView], ExecResult]


def _nvidia_smi(args: list[str], view: ContainerView) -> ExecResult:
    if not view.gpus:
        # No GPU was allocated, so the NVIDIA runtime mounted neither the driver nor its tools.
        return _not_found("nvidia-smi")
    if args:
        return ExecResult(
            stderr=f"nvidia-smi: the simulated nvidia-smi takes no options (given: {' '.join(args)})\n",
            exit_code=2,
        )
    return ExecResult(stdout=nvidia_smi(view.gpus, used_mib=view.gpu_memory_used_mib) + "\n")


def _env(args: list[str], view: ContainerView) -> ExecResult:
    if args:
        return ExecResult(stderr="env: the simulated env only prints the environment\n", exit_code=125)
    return ExecResult(stdout="".join(f"{k}={v}\n" for k, v in sorted(view.env.items())))


def _printenv(args: list[str], view: ContainerView) -> ExecResult:
    if not args:
        return _env([], view)
    found = [view.env[name] for name in args if name in view.env]
    # coreutils: the values of the names that are set, exit 1 if any is not
    return ExecResult(stdout="".join(f"{v}\n" for v in found), exit_code=0 if len(found) == len(args) else 1)


def _echo(args: list[str], _: ContainerView) -> ExecResult:
    newline = True
    if args and args[0] == "-n":
        newline, args = False, args[1:]
    return ExecResult(stdout=" ".join(args) + ("\n" if newline else ""))


def _hostname(_: list[str], view: ContainerView) -> ExecResult:
    return ExecResult(stdout=view.hostname + "\n")


PROGRAMS: dict[str, Program] = {
    "nvidia-smi": _nvidia_smi,
    "env": _env,
    "printenv": _printenv,
    "echo": _echo,
    "hostname": _hostname,
    "true": lambda _args, _view: ExecResult(),
    "false": lambda _args, _view: ExecResult(exit_code=1),
}


def run(command: list[str], view: ContainerView) -> ExecResult:
    """Run `command` (argv) in the container `view` describes."""
    if not command:
        return ExecResult(stderr="no command given\n", exit_code=COMMAND_NOT_FOUND)
    name, args = command[0], command[1:]
    if name in SHELLS:
        return _shell(name, args, view)
    program = PROGRAMS.get(name.rpartition("/")[2] if name.startswith("/") else name)
    if program is None:
        return _not_found(name)
    return program(args, view)


def _shell(shell: str, args: list[str], view: ContainerView) -> ExecResult:
    if len(args) < 2 or args[0] != "-c":
        return ExecResult(
            stderr=f"{shell}: the simulated container has no interactive shell; "
            f"run a command directly or with {shell} -c 'COMMAND'\n",
            exit_code=COMMAND_NOT_FOUND,
        )
    script = args[1]
    if _SHELL_SYNTAX & set(script):
        return ExecResult(
            stderr=f"{shell}: the simulated shell runs one simple command, without pipes, redirections "
            "or expansions\n",
            exit_code=2,
        )
    try:
        words = shlex.split(script)
    except ValueError as err:
        return ExecResult(stderr=f"{shell}: {err}\n", exit_code=2)
    if not words:
        return ExecResult()
    if words[0] == "exit":  # the usual way to try an exit code through kubectl exec
        if len(words) == 1:
            return ExecResult()
        if len(words) == 2 and words[1].isdigit():
            return ExecResult(exit_code=int(words[1]) % 256)
        return ExecResult(stderr=f"{shell}: 1: exit: Illegal number: {' '.join(words[1:])}\n", exit_code=2)
    if words[0] in SHELLS:
        return _shell(words[0], words[1:], view)
    result = run(words, view)
    if result.exit_code == COMMAND_NOT_FOUND and words[0] not in PROGRAMS:
        return ExecResult(stderr=f"{shell}: 1: {words[0]}: not found\n", exit_code=COMMAND_NOT_FOUND)
    return result


def _not_found(name: str) -> ExecResult:
    available = ", ".join(sorted(PROGRAMS))
    return ExecResult(
        stderr=f'exec: "{name}": executable file not found in $PATH '
        f"(a tenantgpu simulated container runs: {available}, and sh -c around one of them)\n",
        exit_code=COMMAND_NOT_FOUND,
    )
